//! `.gitignore` rules as git applies them: one matcher per directory that has a `.gitignore`,
//! deeper files taking precedence over shallower ones, `.git/info/exclude` below all of them, and
//! within one file the last matching pattern winning (so `!negations` re-include).
//!
//! A path inside an ignored directory is never re-included (git does not descend into ignored
//! directories, and neither does the walker); [`Rules::check`] is therefore asked about each
//! directory on the way down before anything inside it.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// One directory's `.gitignore`.
struct Frame {
    /// The directory, relative to the project root (`""` for the root).
    dir: String,
    /// The file the patterns came from, for messages (`src/.gitignore`).
    source: String,
    matcher: Gitignore,
}

/// Why a path is ignored: the pattern (as written) and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub pattern: String,
    pub source: String,
}

/// The ignore rules in force at one point of a walk: the root's `.git/info/exclude` and the
/// `.gitignore` of every directory from the root down to the current one.
#[derive(Default)]
pub struct Rules {
    exclude: Option<Frame>,
    frames: Vec<Frame>,
}

/// Largest ignore file read; anything past it is not used.
pub const MAX_IGNORE_FILE_BYTES: usize = 1024 * 1024;

/// Builds a matcher from the text of an ignore file. Patterns that do not parse are skipped, as git
/// skips them; `None` when the file has no usable pattern.
fn build(content: &[u8]) -> Option<Gitignore> {
    let text = String::from_utf8_lossy(content);
    // Paths are always given relative to the file's directory, so the root must strip nothing:
    // `.` is the one root `Gitignore` never strips.
    let mut builder = GitignoreBuilder::new(".");
    for (i, line) in text.lines().enumerate() {
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(None, line);
    }
    builder.build().ok().filter(|m| !m.is_empty())
}

impl Rules {
    /// Sets the patterns of `.git/info/exclude` (relative to the project root).
    pub fn set_exclude(&mut self, content: &[u8]) {
        self.exclude = build(content).map(|matcher| Frame {
            dir: String::new(),
            source: ".git/info/exclude".to_string(),
            matcher,
        });
    }

    /// Adds the `.gitignore` of directory `dir` (which must be below every directory already
    /// pushed). Returns whether a frame was pushed (a file without patterns pushes nothing).
    pub fn push(&mut self, dir: &str, content: &[u8]) -> bool {
        match build(content) {
            Some(matcher) => {
                let source = super::join_rel(dir, ".gitignore");
                self.frames.push(Frame {
                    dir: dir.to_string(),
                    source,
                    matcher,
                });
                true
            }
            None => false,
        }
    }

    /// Removes the most recently pushed `.gitignore`.
    pub fn pop(&mut self) {
        self.frames.pop();
    }

    /// Drops every `.gitignore` (keeps `.git/info/exclude`).
    pub fn clear(&mut self) {
        self.frames.clear();
    }

    /// Whether `rel` (relative to the project root; a directory when `is_dir`) is ignored by the
    /// rules in force. Only the path itself is matched: callers check its directories first.
    pub fn check(&self, rel: &str, is_dir: bool) -> Option<Ignored> {
        for frame in self.frames.iter().rev().chain(self.exclude.as_ref()) {
            let sub = if frame.dir.is_empty() {
                rel
            } else if super::is_within(rel, &frame.dir) && rel.len() > frame.dir.len() {
                &rel[frame.dir.len() + 1..]
            } else {
                continue;
            };
            match frame.matcher.matched(sub, is_dir) {
                Match::None => {}
                Match::Whitelist(_) => return None,
                Match::Ignore(glob) => {
                    return Some(Ignored {
                        pattern: glob.original().to_string(),
                        source: frame.source.clone(),
                    });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_negation_and_directories() {
        let mut r = Rules::default();
        r.set_exclude(b"*.local\n");
        assert!(r.push(
            "",
            b"\xef\xbb\xbf*.log\n!keep.log\nbuild/\n/top.txt\n# comment\n\n[\n"
        ));
        assert!(r.push("sub", b"!*.local\nsecret\n"));
        assert!(r.check("a.log", false).is_some());
        assert!(r.check("deep/x/a.log", false).is_some());
        assert!(r.check("keep.log", false).is_none());
        assert!(r.check("build", true).is_some());
        assert!(
            r.check("build", false).is_none(),
            "directory pattern must not match a file"
        );
        assert!(r.check("top.txt", false).is_some());
        assert!(r.check("sub/top.txt", false).is_none(), "anchored pattern");
        assert!(r.check("x.local", false).is_some());
        assert!(
            r.check("sub/x.local", false).is_none(),
            ".gitignore beats info/exclude"
        );
        assert!(r.check("sub/secret", false).is_some());
        assert!(r.check("secret", false).is_none());
        assert!(r.check("subx/secret", false).is_none());
        let why = r.check("sub/secret", false).unwrap();
        assert_eq!(
            why,
            Ignored {
                pattern: "secret".into(),
                source: "sub/.gitignore".into()
            }
        );
        r.pop();
        assert!(r.check("sub/secret", false).is_none());
        assert!(!r.push("x", b"# only comments\n"));
    }
}
