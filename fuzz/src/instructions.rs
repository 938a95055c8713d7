//! Fuzz target `instructions`: the project instructions parser
//! ([`bb7::instructions::process_project`]: `@@` comments, `@include`, fences) over a real project
//! tree with files inside, a file outside, symlinks leading out and into `.git/`, and a `.git/config`.
//!
//! Input: the text of `.bb7/instructions` (lossy UTF-8). Invariants:
//! - nothing panics;
//! - nothing from outside the project root ever appears in the output (the outside file, through
//!   `..`, an absolute path or the symlink);
//! - nothing from `.git/` appears in the output;
//! - text with no directive lines (no line starting with `@`) comes out unchanged;
//! - every error names `.bb7/instructions` and a line.

use std::fs;
use std::sync::OnceLock;

const OUTSIDE_MARK: &str = "OUTSIDE-SECRET-7f3a";
const GIT_MARK: &str = "GIT-SECRET-91c2";

struct Tree {
    _dir: tempfile::TempDir,
    project: bb7::store::project::ProjectDir,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = super::scratch_dir();
        let base = dir.path().canonicalize().expect("canonical tempdir");
        let root = base.join("proj");
        let w = |rel: &str, text: &str| {
            let p = base.join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(p, text).expect("write");
        };
        w("proj/a.md", "alpha text\n");
        w("proj/docs/b.md", "beta text, no newline");
        w("proj/docs/my notes.md", "gamma with spaces\n");
        w(
            "proj/.git/config",
            &format!("[remote]\n\turl = https://{GIT_MARK}@example.invalid/x\n"),
        );
        w("proj/.bb7/instructions", "@include a.md\n");
        w("outside/secret.txt", &format!("{OUTSIDE_MARK}\n"));
        fs::write(base.join("proj/bin.dat"), [0xFFu8, 0xFE, 0x00]).expect("write");
        std::os::unix::fs::symlink(base.join("outside/secret.txt"), root.join("leak.md"))
            .expect("symlink");
        std::os::unix::fs::symlink(base.join("outside"), root.join("outdir")).expect("symlink");
        std::os::unix::fs::symlink(".git", root.join("g")).expect("symlink");
        let project = bb7::store::project::ProjectDir::open(&root).expect("open the project");
        Tree { _dir: dir, project }
    })
}

pub fn run(data: &[u8]) {
    let source = String::from_utf8_lossy(data);
    let t = tree();
    // (A marker typed into the instructions themselves is no leak.)
    let marked = source.contains(OUTSIDE_MARK) || source.contains(GIT_MARK);
    match bb7::instructions::process_project(&source, &t.project) {
        Ok(out) => {
            assert!(
                marked || !out.contains(OUTSIDE_MARK),
                "a file outside the project was included"
            );
            assert!(
                marked || !out.contains(GIT_MARK),
                "a file under .git/ was included"
            );
            if !source.lines().any(|l| l.starts_with('@')) {
                assert_eq!(out, source, "text without directives changed");
            }
        }
        Err(e) => {
            let e = e.to_string();
            for line in e.lines() {
                assert!(
                    line.starts_with(".bb7/instructions line "),
                    "an error that names no line: {line:?}"
                );
            }
            assert!(
                marked || (!e.contains(OUTSIDE_MARK) && !e.contains(GIT_MARK)),
                "an error leaks content"
            );
        }
    }
}
