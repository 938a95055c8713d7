//! The `project-read` view a third-party component receives: a private temporary directory holding
//! copies of exactly the files the built-in retrieval tools may read — no `.git/`, `.bb7/`, ignored
//! or deny-listed files, no symbolic links, no file with more than one hard link, nothing of bb7's
//! own state or cache. It is granted read-only, so the component can read those files and nothing
//! else: what is left out is not hidden by a path check, it is simply not in the directory the
//! component holds. Copies, not hard links: a link would give the project's files a second link
//! (which the built-in tools rightly refuse) and would put the view wherever a planted
//! `.bb7/tmp` symlink pointed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bb7_tool_logic::paths::Root;
use bb7_tool_logic::settings::Settings;
use cap_std::fs::{Dir, MetadataExt as _};

use super::error::ComponentError;
use crate::sandbox::grant::{Access, Grant};

/// The most files a view holds; a larger project is refused (the component would get a partial
/// project without knowing it).
pub const MAX_VIEW_FILES: usize = 100_000;
/// The most bytes a view holds.
pub const MAX_VIEW_BYTES: u64 = 512 << 20;

/// A built view; removed when dropped.
pub struct ProjectView {
    dir: tempfile::TempDir,
    /// How many files it holds.
    pub files: usize,
}

impl ProjectView {
    /// Builds the view of `project` under the retrieval `settings` (deny list) in a new private
    /// (0700) directory under the system temporary directory.
    pub fn build(
        project: &Path,
        settings: &[(String, String)],
    ) -> Result<ProjectView, ComponentError> {
        let pairs: Vec<(&str, &str)> = settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let settings = Settings::from_pairs(pairs.iter().copied())
            .map_err(|e| ComponentError::ViewSettings(e.message))?;
        let root = Root::at(project).with_settings(&settings);
        let listed = bb7_tool_logic::retrieval::list::list(&root, None, None, MAX_VIEW_FILES)
            .map_err(|e| ComponentError::ViewList(e.message))?;
        if listed.truncated {
            return Err(ComponentError::ViewTooManyFiles(MAX_VIEW_FILES));
        }
        let dir = tempfile::Builder::new()
            .prefix("bb7-view-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .map_err(ComponentError::ViewCreate)?;
        let src = Dir::open_ambient_dir(project, cap_std::ambient_authority())
            .map_err(|e| ComponentError::io(project, e))?;
        let dst = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority())
            .map_err(|e| ComponentError::io(dir.path(), e))?;
        // bb7's own state and compiled-code cache are never in a view, even in a project that
        // contains them.
        let protected: Vec<PathBuf> = [
            crate::paths::state_dir(),
            crate::sandbox::cache::ComponentCache::default_base(),
        ]
        .into_iter()
        .flatten()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
        let canonical_root = project
            .canonicalize()
            .map_err(|e| ComponentError::io(project, e))?;
        let mut files = 0;
        let mut total = 0u64;
        for rel in &listed.files {
            let abs = canonical_root.join(rel);
            if protected.iter().any(|p| abs.starts_with(p)) {
                continue;
            }
            // Each directory on the way is opened without following links, and the file must be
            // a regular file with a single link (a hard link may be the same file as one outside).
            let Ok(Some((parent_dir, name))) = open_parent(&src, rel) else {
                continue;
            };
            let Ok(meta) = parent_dir.symlink_metadata(name) else {
                continue;
            };
            if !meta.is_file() || meta.nlink() != 1 {
                continue;
            }
            total += meta.len();
            if total > MAX_VIEW_BYTES {
                return Err(ComponentError::ViewTooLarge(MAX_VIEW_BYTES >> 20));
            }
            // Read without following a link swapped in since the check.
            let Ok(bytes) = crate::store::read_regular_nofollow(&parent_dir, name) else {
                continue;
            };
            if let Some((d, _)) = rel.rsplit_once('/') {
                dst.create_dir_all(d).map_err(ComponentError::ViewCreate)?;
            }
            dst.write(rel, &bytes).map_err(ComponentError::ViewCreate)?;
            files += 1;
        }
        Ok(ProjectView { dir, files })
    }

    /// The view's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A project view built on first use and shared by the calls that follow (one reply's, or one
/// CLI call's); removed when dropped.
#[derive(Default)]
pub struct ViewSlot {
    view: Mutex<Option<ProjectView>>,
}

impl ViewSlot {
    /// The read-only grant of the view of `project` under `settings`, built on the first call.
    pub fn grant(
        &self,
        project: &Path,
        settings: impl FnOnce() -> Vec<(String, String)>,
    ) -> Result<Grant, ComponentError> {
        let mut slot = self.view.lock().unwrap_or_else(|e| e.into_inner());
        let view = match &mut *slot {
            Some(v) => v,
            empty => empty.insert(ProjectView::build(project, &settings())?),
        };
        Grant::new(view.path(), Access::ReadOnly).map_err(ComponentError::ViewGrant)
    }
}

/// The directory holding `rel`'s file, opened link by link without following symbolic links.
fn open_parent<'a>(root: &Dir, rel: &'a str) -> std::io::Result<Option<(Dir, &'a str)>> {
    let parts = crate::store::project::check_rel(rel)?;
    crate::store::project::parent_nofollow(root, parts, false).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view holds copies of project files in the shared temp dir: it is its owner's alone.
    #[test]
    fn the_view_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("a.txt"), "x").unwrap();
        let view = ProjectView::build(t.path(), &[]).unwrap();
        let mode = std::fs::metadata(view.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    /// Issue 23 item 4: on a case-insensitive file system `.GIT/config` is git's config and
    /// `server.PEM` a key: the view leaves them out in any case, like the built-in tools.
    #[test]
    fn the_view_leaves_out_git_bb7_and_secrets_in_any_case() {
        let t = tempfile::tempdir().unwrap();
        let put = |rel: &str| {
            let p = t.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "SECRET").unwrap();
        };
        for rel in [
            ".GIT/config",
            "sub/.Git/HEAD",
            ".BB7/chats/c/chat.json",
            "certs/server.PEM",
            ".ENV",
            "keys/ID_ECDSA",
            ".git-credentials",
            "home/.aws/credentials",
            "home/.docker/config.json",
            ".kube/config",
        ] {
            put(rel);
        }
        std::fs::write(t.path().join("a.txt"), "visible").unwrap();
        let view = ProjectView::build(t.path(), &[]).unwrap();
        assert_eq!(view.files, 1);
        let dir = Dir::open_ambient_dir(view.path(), cap_std::ambient_authority()).unwrap();
        let names: Vec<String> = dir
            .entries()
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.txt"]);
    }
}
