//! The built-in tools, defined once: each tool's name as the model calls it, what kind of tool it
//! is (which decides how a call runs) and the directory its calls are granted.

use crate::config::DiffMode;
use crate::sandbox::Access;

/// A tool built into BB-7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    /// `write_file`: writes a whole file.
    WriteFile,
    /// `edit_file`: changes part of a file.
    EditFile,
    /// `search_project`: finds text in the project (agent mode).
    SearchProject,
    /// `read_file`: reads a file of the project (agent mode).
    ReadFile,
    /// `list_files`: lists the project's files (agent mode).
    ListFiles,
    /// `clarify_user`: asks the user (agent mode; runs in the host, not the sandbox).
    ClarifyUser,
}

/// What a built-in tool does, which decides how its calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Changes files: runs against the reply's staging directory; all or nothing at the end.
    Edit,
    /// Reads the project, read-only (agent mode).
    Retrieval,
    /// Asks the user through the client.
    Clarify,
}

/// The directory a built-in tool's calls are granted, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolGrant {
    /// A directory with this access.
    Dir {
        /// What the directory is.
        directory: &'static str,
        /// How the calls may use it.
        access: Access,
    },
    /// No directory: the tool does not run in the sandbox.
    None,
}

impl BuiltinTool {
    /// Every built-in tool, in the order agent mode offers them.
    pub const ALL: [BuiltinTool; 6] = [
        BuiltinTool::WriteFile,
        BuiltinTool::EditFile,
        BuiltinTool::SearchProject,
        BuiltinTool::ReadFile,
        BuiltinTool::ListFiles,
        BuiltinTool::ClarifyUser,
    ];

    /// The retrieval tools, in the order they are offered.
    pub const RETRIEVAL: [BuiltinTool; 3] = [
        BuiltinTool::SearchProject,
        BuiltinTool::ReadFile,
        BuiltinTool::ListFiles,
    ];

    /// The name the model calls the tool by (and its component's name).
    pub fn name(self) -> &'static str {
        match self {
            BuiltinTool::WriteFile => "write_file",
            BuiltinTool::EditFile => "edit_file",
            BuiltinTool::SearchProject => "search_project",
            BuiltinTool::ReadFile => "read_file",
            BuiltinTool::ListFiles => "list_files",
            BuiltinTool::ClarifyUser => "clarify_user",
        }
    }

    /// The built-in tool the model calls `name`, if any.
    pub fn parse(name: &str) -> Option<BuiltinTool> {
        BuiltinTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What kind of tool it is.
    pub fn kind(self) -> ToolKind {
        match self {
            BuiltinTool::WriteFile | BuiltinTool::EditFile => ToolKind::Edit,
            BuiltinTool::SearchProject | BuiltinTool::ReadFile | BuiltinTool::ListFiles => {
                ToolKind::Retrieval
            }
            BuiltinTool::ClarifyUser => ToolKind::Clarify,
        }
    }

    /// Whether it changes files.
    pub fn is_edit(self) -> bool {
        self.kind() == ToolKind::Edit
    }

    /// The directory its calls are granted (`read_file` of a file the reply staged reads the
    /// staging directory instead, read-only).
    pub fn grant(self) -> ToolGrant {
        match self.kind() {
            ToolKind::Edit => ToolGrant::Dir {
                directory: "the reply's staging directory (a fresh copy of the files the reply may change)",
                access: Access::ReadWrite,
            },
            ToolKind::Retrieval => ToolGrant::Dir {
                directory: "the project root (skipping .git/, .bb7/ and ignored files)",
                access: Access::ReadOnly,
            },
            ToolKind::Clarify => ToolGrant::None,
        }
    }

    /// The edit tools offered in chats for `mode` (EDITS.md: `write_file`, plus `edit_file`
    /// unless `off`).
    pub fn edit_tools(mode: DiffMode) -> &'static [BuiltinTool] {
        match mode {
            DiffMode::Off => &[BuiltinTool::WriteFile],
            _ => &[BuiltinTool::WriteFile, BuiltinTool::EditFile],
        }
    }
}

impl std::fmt::Display for BuiltinTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_components() {
        for t in BuiltinTool::ALL {
            assert_eq!(BuiltinTool::parse(t.name()), Some(t));
        }
        assert_eq!(BuiltinTool::parse("Write_file"), None);
        // Every built-in tool but clarify_user is a sandboxed component of that name, granted as
        // the sandbox's registry grants it.
        let sandboxed: Vec<&str> = BuiltinTool::ALL
            .into_iter()
            .filter(|t| t.grant() != ToolGrant::None)
            .map(BuiltinTool::name)
            .collect();
        let components: Vec<&str> = crate::sandbox::registry::BUILTIN_COMPONENTS
            .iter()
            .map(|c| c.tool)
            .collect();
        assert_eq!(sandboxed, components);
        for t in BuiltinTool::ALL {
            if let ToolGrant::Dir { directory, access } = t.grant() {
                let p = crate::sandbox::registry::builtin_policy(t.name());
                assert_eq!((directory, access), (p.directory, p.access), "{t}");
            }
        }
    }
}
