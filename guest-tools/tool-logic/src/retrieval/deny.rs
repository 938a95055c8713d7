//! The secret deny list (AGENT-PROTOCOL.md §1, config `agent.deny`): files the retrieval tools never
//! list, search or read, whatever `.gitignore` says. Patterns use `.gitignore` syntax: a pattern
//! without a `/` matches a name at any depth (`*.pem`, `.env.*`), one with a `/` is anchored at the
//! project root, a trailing `/` matches directories only. Matching ignores case: on a
//! case-insensitive file system (macOS, exFAT) `server.PEM` and `.ENV` are the files `*.pem` and
//! `.env` mean to hide, and on any other a differently cased key is still a key.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The default deny list: credentials and keys that commonly sit in a project tree. Like every
/// deny pattern they match in any case (`server.PEM`, `.ENV`).
pub const DEFAULT_DENY: [&str; 15] = [
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "*.p12",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "**/.aws/credentials",
    "**/.docker/config.json",
    "**/.kube/config",
];

/// A compiled deny list.
///
/// A walk asks about every entry, so the common case is made cheap: globs that ignore case are
/// regular expressions to `globset`, while case-sensitive ones mostly are not (a literal name, an
/// extension, a prefix). When every pattern is ASCII without a character class, the list is also
/// compiled ASCII-lowercased and case-sensitive, and an ASCII path is lowercased and matched
/// against that: the same answer, without a regular expression per entry.
///
/// When moreover every pattern is plain — a name with `*` wildcards (`*.pem`, `id_rsa*`), a path
/// under `**/` without wildcards (`**/.aws/credentials`), or a path from the root without
/// wildcards — the lowercased path is matched by [`Plain`] string comparisons, with no glob
/// engine at all (a walk asks once per entry; the default list is all plain).
///
/// And almost no entry is denied: with plain patterns, an entry whose ASCII name can match none of
/// them (a first letter no pattern's name starts with, a last letter none ends with:
/// [`NameFilter`]) is let through on its name alone ([`DenyList::check_entry`]), without its path
/// being built or lowercased.
#[derive(Clone, Default)]
pub struct DenyList {
    matcher: Option<Gitignore>,
    /// The lowercased, case-sensitive twin of `matcher`, and each lowercased pattern's original.
    ascii: Option<(Gitignore, Vec<(String, String)>)>,
    /// `ascii`'s patterns as plain matchers, in order, when every one of them is plain.
    plain: Option<Vec<Plain>>,
    /// What an entry's name must look like for any of `plain` to match it, when every pattern
    /// says something about the name's first or last letter.
    names: Option<NameFilter>,
}

/// A necessary condition for a list of plain patterns to match a path, on the path's last name
/// alone (lowercased): every pattern fixes the name's first letter (`.env`, `id_rsa*`, the
/// `credentials` of `**/.aws/credentials`) or its last (`*.pem`), and a name with neither
/// letter of any pattern matches none.
#[derive(Clone)]
struct NameFilter {
    /// Bit `b` of word `b / 64`: some pattern's name starts with byte `b`.
    first: [u64; 4],
    /// Likewise for the last byte, of patterns whose name has no fixed start.
    last: [u64; 4],
}

impl NameFilter {
    /// The filter for `plain`, or `None` when some pattern fixes neither letter of a name (`*`,
    /// `*a*`).
    fn new(plain: &[Plain]) -> Option<NameFilter> {
        let mut f = NameFilter {
            first: [0; 4],
            last: [0; 4],
        };
        let set = |bits: &mut [u64; 4], b: u8| bits[usize::from(b / 64)] |= 1 << (b % 64);
        for p in plain {
            match &p.shape {
                Shape::Name(parts) => {
                    let first = parts.first().and_then(|s| s.bytes().next());
                    let last = parts.last().and_then(|s| s.bytes().last());
                    match (first, last) {
                        (Some(b), _) => set(&mut f.first, b),
                        (None, Some(b)) => set(&mut f.last, b),
                        (None, None) => return None,
                    }
                }
                // The whole name after the last `/` is fixed.
                Shape::Tail(t) | Shape::Exact(t) => {
                    let name = t.rsplit('/').next().unwrap_or(t);
                    set(&mut f.first, name.bytes().next()?);
                }
            }
        }
        Some(f)
    }

    /// Whether a path whose last name is `name` (ASCII, any case) may match some pattern.
    fn may_match(&self, name: &[u8]) -> bool {
        let has = |bits: &[u64; 4], b: u8| {
            let b = b.to_ascii_lowercase();
            bits[usize::from(b / 64)] & (1 << (b % 64)) != 0
        };
        match (name.first(), name.last()) {
            (Some(&a), Some(&z)) => has(&self.first, a) || has(&self.last, z),
            _ => true,
        }
    }
}

/// A lowercased deny pattern simple enough to match by comparing strings.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plain {
    shape: Shape,
    /// The pattern ends in `/`: it matches directories only.
    dir_only: bool,
}

/// Where a [`Plain`] pattern looks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// The last name, against a glob whose only wildcard is `*` (split at each `*`).
    Name(Vec<String>),
    /// The whole path, or its end after a `/` (`**/a/b`).
    Tail(String),
    /// The whole path (`/a/b` or `a/b`).
    Exact(String),
}

impl Plain {
    /// `pattern` (trimmed, lowercased, not a comment) as a plain matcher, if it is one.
    fn parse(pattern: &str) -> Option<Plain> {
        // Any other glob syntax (`?`, classes, escapes, `{a,b}` alternatives) goes to the globs.
        if pattern.starts_with('!') || pattern.contains(['?', '[', ']', '{', '}', '\\']) {
            return None;
        }
        let (body, dir_only) = match pattern.strip_suffix('/') {
            Some(b) => (b, true),
            None => (pattern, false),
        };
        if body.is_empty() || body.ends_with('/') {
            return None;
        }
        let shape = if let Some(rest) = body.strip_prefix("**/") {
            if rest.is_empty() || rest.contains('*') || rest.starts_with('/') {
                return None;
            }
            Shape::Tail(rest.to_string())
        } else if body.contains('/') {
            let rest = body.strip_prefix('/').unwrap_or(body);
            if rest.is_empty() || rest.contains('*') || rest.starts_with('/') {
                return None;
            }
            Shape::Exact(rest.to_string())
        } else {
            if body.contains("**") {
                return None;
            }
            Shape::Name(body.split('*').map(str::to_string).collect())
        };
        Some(Plain { shape, dir_only })
    }

    /// Whether the pattern matches `path` (lowercased; a directory when `is_dir`), whose last
    /// name is `name`.
    fn matches(&self, path: &str, name: &str, is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        match &self.shape {
            Shape::Name(parts) => glob_star(parts, name),
            Shape::Tail(t) => path
                .strip_suffix(t.as_str())
                .is_some_and(|head| head.is_empty() || head.ends_with('/')),
            Shape::Exact(e) => path == e,
        }
    }
}

/// Whether `name` matches the glob whose literal pieces between `*`s are `parts`.
fn glob_star(parts: &[String], name: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|p| p == name);
    };
    let Some(mut rest) = name.strip_prefix(first.as_str()) else {
        return false;
    };
    for p in middle {
        match rest.find(p.as_str()) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last.as_str())
}

impl std::fmt::Debug for DenyList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenyList")
            .field("patterns", &self.matcher.as_ref().map_or(0, |m| m.len()))
            .finish()
    }
}

impl DenyList {
    /// Compiles `patterns`; patterns that do not parse are skipped (as git skips them).
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> DenyList {
        let mut builder = GitignoreBuilder::new(".");
        // Cannot fail: it only sets a flag for the patterns added afterwards.
        let _ = builder.case_insensitive(true);
        let mut lower = GitignoreBuilder::new(".");
        let mut originals = Vec::new();
        let mut plain = Some(Vec::new());
        let mut ascii = true;
        for p in patterns {
            let p = p.trim();
            if p.is_empty() || p.starts_with('#') {
                continue;
            }
            let ok = builder.add_line(None, p).is_ok();
            ascii &= p.is_ascii() && !p.contains('[');
            if ascii && ok {
                let l = p.to_ascii_lowercase();
                ascii &= lower.add_line(None, &l).is_ok();
                plain = plain.zip(Plain::parse(&l)).map(|(mut v, m)| {
                    v.push(m);
                    v
                });
                originals.push((l, p.to_string()));
            }
        }
        let matcher = builder.build().ok().filter(|m| !m.is_empty());
        let ascii = match (&matcher, ascii) {
            (Some(m), true) => lower
                .build()
                .ok()
                .filter(|l| l.num_ignores() == m.num_ignores() && l.len() == m.len())
                .map(|l| (l, originals)),
            _ => None,
        };
        let plain = plain.filter(|v| ascii.as_ref().is_some_and(|(_, o)| o.len() == v.len()));
        let names = plain.as_deref().and_then(NameFilter::new);
        DenyList {
            matcher,
            ascii,
            plain,
            names,
        }
    }

    /// [`DenyList::check`] for entry `name` of directory `dir` (`""` for the root): the same
    /// answer, but an entry whose name no pattern can match is let through without its path
    /// being built (a walk asks about every entry it lists). `name` is one name as a directory
    /// listing gives it: never a path (with a `/` the filter would look at the wrong letters).
    pub fn check_entry(&self, dir: &str, name: &str, is_dir: bool) -> Option<String> {
        debug_assert!(!name.contains('/'), "check_entry takes one name: {name}");
        // Only an ASCII name: a pattern's letter may match another letter in Unicode's case
        // folding (`k` the Kelvin sign), and then the globs decide.
        if let Some(filter) = &self.names
            && name.is_ascii()
            && !filter.may_match(name.as_bytes())
        {
            return None;
        }
        self.check(&super::join_rel(dir, name), is_dir)
    }

    /// The pattern that denies `rel` (relative to the project root; a directory when `is_dir`),
    /// checking the path itself only (callers check its directories on the way down).
    pub fn check(&self, rel: &str, is_dir: bool) -> Option<String> {
        if let Some((lower, originals)) = &self.ascii
            && rel.is_ascii()
        {
            let mut buf = [0u8; 256];
            let lowered;
            let path = if rel.len() <= buf.len() {
                let b = &mut buf[..rel.len()];
                b.copy_from_slice(rel.as_bytes());
                b.make_ascii_lowercase();
                std::str::from_utf8(b).ok()?
            } else {
                lowered = rel.to_ascii_lowercase();
                &lowered
            };
            if let Some(plain) = &self.plain {
                let name = path.rsplit_once('/').map_or(path, |(_, n)| n);
                // As the glob matcher reports it: the last pattern that matches.
                let hit = plain.iter().rposition(|m| m.matches(path, name, is_dir))?;
                let l = &originals.get(hit)?.0;
                return originals
                    .iter()
                    .find(|(x, _)| x == l)
                    .map(|(_, o)| o.clone());
            }
            return match lower.matched(path, is_dir) {
                Match::Ignore(g) => Some(
                    originals
                        .iter()
                        .find(|(l, _)| l == g.original())
                        .map_or_else(|| g.original().to_string(), |(_, o)| o.clone()),
                ),
                _ => None,
            };
        }
        match self.matcher.as_ref()?.matched(rel, is_dir) {
            Match::Ignore(g) => Some(g.original().to_string()),
            _ => None,
        }
    }

    /// The pattern that denies `rel` or any directory above it.
    pub fn check_path(&self, rel: &str, is_dir: bool) -> Option<String> {
        let parts: Vec<&str> = rel.split('/').collect();
        let mut cur = String::new();
        for (i, part) in parts.iter().enumerate() {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(part);
            let last = i + 1 == parts.len();
            if let Some(p) = self.check(&cur, !last || is_dir) {
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_secrets_at_any_depth() {
        let d = DenyList::new(DEFAULT_DENY);
        for p in [
            ".env",
            ".env.local",
            "cfg/.env",
            "certs/server.pem",
            "a/b/tls.key",
            "id_rsa",
            "home/id_rsa.pub",
            "id_ed25519",
            "x.p12",
            ".netrc",
            "web/.npmrc",
            ".pypirc",
            // Issue 23: case-insensitive file systems make `server.PEM` the same kind of file.
            "certs/server.PEM",
            ".ENV",
            "Cfg/.Env.Local",
            "ID_RSA",
            "id_ecdsa",
            "keys/id_ecdsa.pub",
            "id_ecdsa_sk",
            ".git-credentials",
            "home/.git-credentials",
            ".aws/credentials",
            "home/.AWS/Credentials",
            ".docker/config.json",
            "home/.docker/config.json",
            ".kube/config",
            "ops/.kube/config",
        ] {
            assert!(d.check_path(p, false).is_some(), "{p}");
        }
        for p in [
            "env",
            "src/key.rs",
            "README.md",
            ".envrc",
            ".aws/config",
            "docker/config.json",
            ".kube/cache",
        ] {
            assert!(d.check_path(p, false).is_none(), "{p}");
        }
        // Reported as written, whichever way it was matched.
        let upper = DenyList::new(["*.PEM", "Secrets/"]);
        assert!(upper.ascii.is_some());
        assert_eq!(upper.check("a/b.pem", false).as_deref(), Some("*.PEM"));
        assert_eq!(upper.check("SECRETS", true).as_deref(), Some("Secrets/"));
        let class = DenyList::new(["*.PEM", "Secret[s]/"]);
        assert!(class.ascii.is_none());
        assert_eq!(class.check("SECRETS", true).as_deref(), Some("Secret[s]/"));
        let custom = DenyList::new(["secrets/", "/top.txt"]);
        assert!(custom.check_path("secrets/a.txt", false).is_some());
        assert!(custom.check_path("Secrets/a.txt", false).is_some());
        assert!(custom.check_path("TOP.txt", false).is_some());
        assert!(custom.check_path("top.txt", false).is_some());
        assert!(custom.check_path("x/top.txt", false).is_none());
        assert!(DenyList::new([""]).check_path(".env", false).is_none());
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    /// The lowercased, case-sensitive matching gives exactly what matching the patterns while
    /// ignoring case gives, for the defaults and a custom list, on paths in every case.
    #[test]
    fn ascii_fast_path_agrees_with_case_insensitive_globs() {
        let custom = [
            "secrets/",
            "/top.txt",
            "*.Key",
            "!keep.key",
            "build/**/out",
            "a?c",
        ];
        for list in [DenyList::new(DEFAULT_DENY), DenyList::new(custom)] {
            assert!(list.ascii.is_some());
            let slow = |rel: &str, is_dir: bool| match list.matcher.as_ref()?.matched(rel, is_dir) {
                Match::Ignore(g) => Some(g.original().to_string()),
                _ => None,
            };
            let names = [
                ".env",
                ".ENV.local",
                "server.Pem",
                "x.KEY",
                "keep.key",
                "Keep.Key",
                "id_RSA.pub",
                "README.md",
                "Secrets",
                "top.TXT",
                "abc",
                "aBc",
                "abbc",
                "credentials",
                "config.json",
                "config",
            ];
            let dirs = [
                "",
                "src/",
                ".AWS/",
                "home/.aws/",
                "Build/x/",
                ".docker/",
                "ops/.Kube/",
            ];
            for d in dirs {
                for n in names {
                    let rel = format!("{d}{n}");
                    for is_dir in [false, true] {
                        assert_eq!(
                            list.check(&rel, is_dir),
                            slow(&rel, is_dir),
                            "{rel} {is_dir}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod plain_tests {
    use super::*;

    /// The plain matchers answer exactly as the glob matcher does (the same pattern reported),
    /// for the defaults and for lists of plain patterns with stars in every place, on paths at
    /// every depth, as files and as directories; a list with any pattern that is not plain keeps
    /// the glob matcher.
    #[test]
    fn plain_matching_agrees_with_the_globs() {
        let lists: [&[&str]; 5] = [
            &DEFAULT_DENY,
            &["*", "x/"],
            &[
                "a*b*c", "*ab*b", "a*a", "*.tar.*", "sec*/", "/top.txt", "deep/a/b",
            ],
            &[
                "**/b/c",
                "**/c",
                "/a/b/",
                "b",
                "*.PEM",
                "*.pem",
                "**/Secret/",
            ],
            &["ab*", "*ba", "*a*", "a**"],
        ];
        let names = [
            "a",
            "b",
            "c",
            "ab",
            "abc",
            "aXbYc",
            "acb",
            "abb",
            "abab",
            "aa",
            "aba",
            "x",
            "x.tar.gz",
            "tar.",
            ".tar.",
            "secret",
            "sec",
            "top.txt",
            "key.pem",
            "b.PEM",
            ".env",
            ".env.local",
            "id_rsa.pub",
            "credentials",
            "config.json",
            "config",
            "Secret",
        ];
        let dirs = [
            "",
            "a/",
            "deep/",
            "deep/a/",
            "x/",
            "b/",
            "home/.aws/",
            ".kube/",
            "q/.docker/",
        ];
        let mut compared = 0;
        for (i, list) in lists.iter().enumerate() {
            let d = DenyList::new(list.iter().copied());
            if i == 4 {
                assert!(d.plain.is_none(), "`a**` is not plain");
            } else {
                assert!(d.plain.is_some(), "{list:?}");
            }
            let Some((lower, originals)) = &d.ascii else {
                panic!("ascii")
            };
            let globbed = |rel: &str, is_dir: bool| match lower.matched(rel, is_dir) {
                Match::Ignore(g) => originals
                    .iter()
                    .find(|(l, _)| l == g.original())
                    .map(|(_, o)| o.clone()),
                _ => None,
            };
            for dir in dirs {
                for name in names {
                    let rel = format!("{dir}{name}");
                    for is_dir in [false, true] {
                        let want = globbed(&rel.to_ascii_lowercase(), is_dir);
                        assert_eq!(d.check(&rel, is_dir), want, "{list:?} {rel} {is_dir}");
                        compared += usize::from(want.is_some());
                    }
                }
            }
        }
        assert!(compared > 100, "the lists deny something: {compared}");
    }

    /// `check_entry` answers as `check` on the joined path, for every list above and a few more
    /// (one whose patterns fix no letter of a name, one with a pattern that is not plain), names
    /// in any case, non-ASCII ones, and directories that are not ASCII; and its name filter lets
    /// the defaults skip ordinary names.
    #[test]
    fn check_entry_agrees_with_check() {
        let lists: [&[&str]; 6] = [
            &DEFAULT_DENY,
            &["*", "x/"],
            &[
                "a*b*c", "*ab*b", "a*a", "*.tar.*", "sec*/", "/top.txt", "deep/a/b",
            ],
            &[
                "**/b/c",
                "**/c",
                "/a/b/",
                "b",
                "*.PEM",
                "*.pem",
                "**/Secret/",
            ],
            &["ab*", "*ba", "*a*", "a**"],
            &["*.key", "k*", "*k"],
        ];
        let names = [
            "a",
            "b",
            "c",
            "ab",
            "abc",
            "aXbYc",
            "acb",
            "x.tar.gz",
            "top.TXT",
            "key.pem",
            "b.PEM",
            ".env",
            ".ENV",
            ".env.local",
            "id_rsa.pub",
            "ID_RSA",
            "credentials",
            "Credentials",
            "config.json",
            "config",
            "Secret",
            "f123.rs",
            "mod4",
            "pkg001",
            "x.\u{212a}ey",
            "\u{212a}ey",
            "\u{e9}.pem",
            "sec",
            "secret",
        ];
        let dirs = [
            "",
            "a",
            "deep",
            "deep/a",
            "home/.aws",
            ".kube",
            "q/.docker",
            "\u{e9}t\u{e9}",
        ];
        for list in lists {
            let d = DenyList::new(list.iter().copied());
            for dir in dirs {
                for name in names {
                    let rel = super::super::join_rel(dir, name);
                    for is_dir in [false, true] {
                        assert_eq!(
                            d.check_entry(dir, name, is_dir),
                            d.check(&rel, is_dir),
                            "{list:?} {rel} {is_dir}"
                        );
                    }
                }
            }
        }
        let defaults = DenyList::new(DEFAULT_DENY);
        let Some(filter) = &defaults.names else {
            panic!("the defaults are plain, each fixing a letter of the name")
        };
        for skipped in ["f123.rs", "mod4", "pkg001", "README.md", "main.rs"] {
            assert!(!filter.may_match(skipped.as_bytes()), "{skipped}");
        }
        for kept in [".env", "ID_RSA", "a.PEM", "credentials", "config"] {
            assert!(filter.may_match(kept.as_bytes()), "{kept}");
        }
        assert!(DenyList::new(["*", "x/"]).names.is_none());
        // Unicode case folding: a name whose letter folds to a pattern's (the Kelvin sign to `k`,
        // the long s to `s`) gets the globs' answer, whatever it is, never the letter filter's.
        for (list, dir, name, is_dir) in [
            (["k*"], "", "\u{212a}ey.txt", false),
            (["k*"], "a", "\u{212a}ey.txt", true),
            (["secrets/"], "", "\u{17f}ecrets", true),
            (["*s"], "x", "key\u{17f}", false),
        ] {
            let d = DenyList::new(list);
            assert_eq!(
                d.check_entry(dir, name, is_dir),
                d.check(&super::super::join_rel(dir, name), is_dir),
                "{list:?} {dir} {name}"
            );
        }
    }

    #[test]
    fn a_brace_pattern_denies_each_alternative() {
        // `{a,b}` is an alternative in the globs; the plain matcher must not take it literally.
        let d = DenyList::new(["*.{pem,key,p8}", "credentials.{json,yaml}"]);
        for denied in [
            "server.p8",
            "a/b.key",
            "x.pem",
            "credentials.yaml",
            "d/credentials.json",
        ] {
            assert!(d.check(denied, false).is_some(), "{denied}");
        }
        for allowed in ["server.p9", "x.{pem,key,p8}x", "credentials.toml"] {
            assert_eq!(d.check(allowed, false), None, "{allowed}");
        }
    }

    #[test]
    fn plain_shapes() {
        let name = |p: &str| Plain::parse(p).map(|m| m.shape);
        assert_eq!(
            name("*.pem"),
            Some(Shape::Name(vec![String::new(), ".pem".into()]))
        );
        assert_eq!(
            name("**/.aws/credentials"),
            Some(Shape::Tail(".aws/credentials".into()))
        );
        assert_eq!(name("/top.txt"), Some(Shape::Exact("top.txt".into())));
        for p in [
            "!x",
            "a?",
            "[ab]",
            "a\\*",
            "**",
            "**/",
            "a/*",
            "**/*.pem",
            "a**b",
            "/",
            "//",
            "*.{pem,key}",
            "a{b",
            "a}b",
            "a]",
        ] {
            assert_eq!(Plain::parse(p), None, "{p}");
        }
    }
}

#[cfg(test)]
mod walk_tests {
    use crate::retrieval::testutil::put;
    use crate::{Root, Settings};

    #[test]
    fn retrieval_hides_denied_files() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), ".env", "SECRET=1\n");
        put(t.path(), "certs/a.pem", "SECRET\n");
        put(t.path(), "src/a.rs", "// SECRET mention\n");
        let root = Root::at(t.path()).with_settings(&Settings::default());
        let s = Settings::default();
        let v = crate::tools::list_files::call(&root, &s, "{}").unwrap();
        assert_eq!(v["files"], serde_json::json!(["src/a.rs"]));
        let v = crate::tools::search_project::call(&root, &s, r#"{"query":"SECRET"}"#).unwrap();
        let text = v.to_string();
        assert!(text.contains("src/a.rs") && !text.contains(".env") && !text.contains("pem"));
        let e = crate::tools::read_file::call(&root, &s, r#"{"file_path":".env"}"#).unwrap_err();
        assert!(
            e.message.contains("hidden by the deny list (agent.deny"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("SECRET=1"));
        let open = Root::at(t.path()).with_settings(&Settings::from_pairs([("deny", "")]).unwrap());
        assert!(crate::tools::read_file::call(&open, &s, r#"{"file_path":".env"}"#).is_ok());
    }
}
