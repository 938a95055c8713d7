//! Reading the user's current copy of a context file under the rules of the chat's scope: project
//! files through the project path rule, external files only when this user added them here.

use std::io;
use std::path::Path;

use super::external::{ExternalRecord, scope};
use super::paths::ClientPath;
use crate::store::project::ProjectDir;

/// Where a chat's context files are re-read from: the open project (if any) and the chat's scope.
pub struct LocalFiles<'a> {
    /// The open project; `None` in global-only mode.
    pub project: Option<&'a ProjectDir>,
    /// Whether the chat is a global one (every file is external to it).
    pub global_chat: bool,
}

impl LocalFiles<'_> {
    /// The scope of the chat for the record of external files (see [`super::external`]).
    pub fn scope(&self) -> String {
        scope(self.global_chat, self.project.map(|p| p.root()))
    }

    /// Reads the user's current version of a context file: inside the project under the project
    /// path rule; an external file by its absolute path, only when this user added it to a chat of
    /// this scope (a chat.json shipped by a repository cannot make the host read `~/.ssh/id_rsa`).
    /// An external file nobody here added is refused without touching the disk, so whether it
    /// exists is not revealed either.
    pub fn read(&self, path: &ClientPath) -> io::Result<Vec<u8>> {
        match path {
            ClientPath::Internal(rel) => match self.project {
                Some(p) => p.read(rel),
                None => Err(io::Error::new(io::ErrorKind::NotFound, "no project")),
            },
            ClientPath::External(abs) => {
                if !ExternalRecord::of_user().allows(&self.scope(), abs) {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "external file not added by this user here",
                    ));
                }
                crate::store::read_regular_path(Path::new(abs))
            }
        }
    }

    /// Whether `path`, read under this scope's rules now, may be re-read later by its absolute path
    /// (after a move to global): a project file only if the project rule reads it now (a regular
    /// file, no symlink on the way), so a planted `leak -> ~/.ssh/id_rsa` never becomes trusted; an
    /// external file only if this user added it here.
    pub fn trusts(&self, path: &ClientPath) -> bool {
        match path {
            ClientPath::Internal(rel) => self.project.is_some_and(|p| p.open_read(rel).is_ok()),
            ClientPath::External(abs) => ExternalRecord::of_user().allows(&self.scope(), abs),
        }
    }
}
