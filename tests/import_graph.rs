//! The host's import graph (the twin of the Lua require-graph test in `tests/nvim/unit_spec.lua`).
//!
//! It reads every `.rs` file under `host/src/` (not `main.rs`, a separate crate that only calls
//! `bb7::cli::main`) and builds the graph of which module file uses which, at two granularities:
//! files (`agent/steps.rs`, `agent/mod.rs`, `config.rs`, …) and top modules (`agent`, `config`, …).
//! It fails on
//!
//! 1. an import circle between files, or between top modules;
//! 2. a use of a top module that [`LAYERS`] does not allow (the layer order of
//!    `doc/architecture.md`: protocol → workspace / agent → toolhost → components → sandbox → store,
//!    with chat, llm, tokens, config, instructions and paths where the doc puts them);
//! 3. `wasmtime` named outside `host/src/sandbox/` ([`WASMTIME_ONLY_IN`]: nothing above the sandbox
//!    knows it);
//! 4. reply-shaped JSON built outside `host/src/protocol/` ([`REPLY_JSON_ONLY_IN`]): see
//!    [`reply_json`] for the exact definition.
//!
//! What counts as a use of file B by file A (comments and string contents are ignored, and so is
//! code under `#[cfg(test)]`: test modules may reach anywhere):
//! - a `use` declaration in A whose path resolves into B: `use crate::a::b::Item`,
//!   `use super::x`, `use self::child::x`, `use child::x` (a child module of A's module), groups
//!   (`use crate::a::{b, c::d}`) expanded;
//! - a path in code: `crate::a::b::f()`, `super::f()` (`super::super::` too), `child::f()`.
//!
//! A path resolves to the deepest module file it names; an item that a module re-exports
//! (`pub use child::Item`, `pub use child::*`) resolves to the file that defines it, so a
//! facade `mod.rs` does not make every file of its module one circle. A re-export itself
//! (`pub use` / `pub(crate) use`) is not a use. A module's `mod child;` is not a use either, and
//! neither is a `mod.rs` using its own submodules (`protocol/actions/mod.rs` dispatching to
//! `send.rs`): the parts of a module may use the items their `mod.rs` defines (`super::Handled`),
//! and only circles between siblings (or across modules) count.
//!
//! The rules live in the tables right below, so they can be adjusted in one place.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------------------------

/// The layers, highest first. A top module may use the top modules of strictly LOWER layers
/// (a larger number is higher), never one of its own layer (other than itself) or above.
/// `lib.rs` (the crate root) is outside the layers. A top module that is not listed fails the
/// test: place every new top module (e.g. the coming `toolhost`) here.
///
/// From doc/architecture.md: `cli/` is the entry point (`bb7` with no arguments serves the
/// protocol; `bb7 tools …` runs the tool verbs); `protocol/` uses everything below; `workspace/`
/// and `agent/` are one layer (the doc: workspace uses chat and store, agent uses llm, sandbox and
/// chat); below them the tool host, then `components/`, then `sandbox/`; `llm/` (its prompt is
/// built from chat messages) above `chat/` and `instructions.rs`; `config` (with the agent's
/// configuration, moving to `config/agent.rs`) and `tokens/` above `store/`; `paths.rs` (where
/// the per-user files live: environment only) at the bottom.
const LAYERS: &[(&str, u32)] = &[
    ("cli", 95),
    ("protocol", 90),
    ("mcp", 90),
    ("workspace", 85),
    ("agent", 80),
    ("hooks", 75),
    ("toolhost", 70),
    ("components", 60),
    ("sandbox", 50),
    ("spend", 47),
    ("llm", 45),
    ("chat", 40),
    ("instructions", 40),
    ("config", 30),
    ("audit", 20),
    ("tokens", 30),
    ("store", 10),
    ("paths", 5),
];

/// Where the name `wasmtime` may appear in code (as a crate path or a `use`).
const WASMTIME_ONLY_IN: &str = "sandbox";

/// Where reply-shaped JSON may be built.
const REPLY_JSON_ONLY_IN: &str = "protocol";

/// The `type`s that exist only on the wire: the protocol's replies and events (PROTOCOL.md,
/// protocol/events.rs). `thinking`, `text`, `tool_call` and `context_event` are left out on
/// purpose: they are also the part types of chat.json, which chat/ builds.
const WIRE_ONLY_TYPES: &[&str] = &[
    "ok",
    "error",
    "chunk",
    "agent_event",
    "warning",
    "done",
    "diff_error",
    "title_updated",
    "models",
    "balance",
];

// ---------------------------------------------------------------------------------------------
// Reading the sources
// ---------------------------------------------------------------------------------------------

/// One source file, reduced to what the rules look at.
struct Source {
    /// Its path under host/src, with `/`.
    rel: String,
    /// Its module path (`["agent", "steps"]`; `[]` for lib.rs).
    module: Vec<String>,
    /// The code with comments removed, string and char literal contents blanked, and
    /// `#[cfg(test)]` items removed (blanked, so byte offsets and lines stay).
    code: String,
    /// The string literals outside comments and test code: (offset of the opening quote, content).
    strings: Vec<(usize, String)>,
}

impl Source {
    fn line(&self, offset: usize) -> usize {
        self.code[..offset].matches('\n').count() + 1
    }
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_of(rel: &str) -> Vec<String> {
    let no_ext = rel.strip_suffix(".rs").expect(".rs file");
    let mut parts: Vec<String> = no_ext.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// Removes comments, blanks the contents of string and char literals (keeping them aside) and
/// keeps every byte offset and newline where it was.
fn lex(text: &str) -> (String, Vec<(usize, String)>) {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut strings = Vec::new();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c == b'r' || c == b'b')
            && !prev_is_ident(b, i)
            && raw_string_start(b, i).is_some()
        {
            let (hashes, quote) = raw_string_start(b, i).unwrap();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = quote + 1;
            let end = find_bytes(b, body, &close).unwrap_or(b.len());
            strings.push((quote, text[body..end].to_string()));
            blank(&mut out, body, end);
            i = (end + close.len()).min(b.len());
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = j.min(b.len());
            strings.push((i, text[i + 1..end].to_string()));
            blank(&mut out, i + 1, end);
            i = end + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime / label ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                // Past the escaped character: '\'' and '\\' end at the next quote.
                b.get(i + 3..)
                    .and_then(|r| r.iter().position(|&x| x == b'\''))
                    .map(|n| i + 3 + n)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                // A multi-byte char: the quote closes within 5 bytes, a lifetime has none.
                let s = &text[i + 1..];
                s.chars()
                    .next()
                    .filter(|ch| s[ch.len_utf8()..].starts_with('\''))
                    .map(|ch| i + 1 + ch.len_utf8())
            };
            match close {
                Some(e) => {
                    blank(&mut out, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    (
        String::from_utf8(out).expect("blanking keeps UTF-8"),
        strings,
    )
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `r"`, `r#"`, `br"`, `br#"` at `i`: (number of #, offset of the quote).
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    (b.get(j) == Some(&b'"')).then_some((hashes, j))
}

fn find_bytes(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n)
}

/// The offset just past the item that starts at `from` (after its matching `}` or its `;`).
fn item_end(code: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    let mut j = from;
    while j < code.len() {
        match code[j] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            b';' if depth == 0 => return j + 1,
            _ => {}
        }
        j += 1;
    }
    code.len()
}

/// Blanks every item under `#[cfg(test)]` (and the attribute).
fn drop_test_code(code: &mut String) {
    let mut bytes = std::mem::take(code).into_bytes();
    let needle = b"#[cfg(test)]";
    let mut from = 0;
    while let Some(at) = find_bytes(&bytes, from, needle) {
        let end = item_end(&bytes, at + needle.len());
        for c in &mut bytes[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    *code = String::from_utf8(bytes).expect("blanking keeps UTF-8");
}

fn read_sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    let mut out = Vec::new();
    for p in files {
        let rel = p
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "main.rs" {
            continue;
        }
        let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {rel}: {e}"));
        out.push(source(&rel, &text));
    }
    out
}

/// One file's text, reduced.
fn source(rel: &str, text: &str) -> Source {
    let (mut code, strings) = lex(text);
    drop_test_code(&mut code);
    // String literals inside test code are dropped with it.
    let strings = strings
        .into_iter()
        .filter(|(at, _)| code.as_bytes()[*at] == b'"')
        .collect();
    Source {
        rel: rel.to_string(),
        module: module_of(rel),
        code,
        strings,
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens, use trees and paths
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    PathSep,
}

/// Identifiers, `::` and single punctuation, with their offsets.
fn tokens(code: &str) -> Vec<(usize, Tok)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((s, Tok::Ident(code[s..i].to_string())));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((i, Tok::PathSep));
            i += 2;
        } else if c.is_ascii_whitespace() || !c.is_ascii() {
            i += 1;
        } else {
            out.push((i, Tok::Punct(c as char)));
            i += 1;
        }
    }
    out
}

/// One path a file refers to: its segments as written, where, and whether it is a re-export.
#[derive(Debug, Clone)]
struct Ref {
    segs: Vec<String>,
    offset: usize,
    reexport: bool,
    /// The module the path is relative to (inline modules count).
    module: Vec<String>,
    /// A `use` path (may start with a child module's name) or a path in code.
    in_use: bool,
}

/// Expands a use tree starting at `toks[i]`; returns the index after it.
fn use_tree(
    toks: &[(usize, Tok)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut path = prefix.to_vec();
    let start = toks.get(i).map_or(0, |t| t.0);
    loop {
        match toks.get(i) {
            Some((_, Tok::PathSep)) => i += 1,
            Some((_, Tok::Ident(s))) if s == "as" => {
                i += 2; // `as name`
                out.push((path, start));
                return i;
            }
            Some((_, Tok::Ident(s))) => {
                path.push(s.clone());
                i += 1;
            }
            Some((_, Tok::Punct('*'))) => {
                path.push("*".into());
                i += 1;
            }
            Some((_, Tok::Punct('{'))) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some((_, Tok::Punct('}'))) => return i + 1,
                        Some((_, Tok::Punct(','))) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => {
                if !path.is_empty() {
                    out.push((path, start));
                }
                return i;
            }
        }
    }
}

/// Every `use` and every `crate::`/`super::`/`self::`/child-module path in one file.
fn refs_of(src: &Source, children: &BTreeMap<Vec<String>, BTreeSet<String>>) -> Vec<Ref> {
    let toks = tokens(&src.code);
    let mut out = Vec::new();
    // Inline modules: (brace depth at which they close, their module path).
    let mut depth = 0usize;
    let mut inline: Vec<(usize, Vec<String>)> = Vec::new();
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < toks.len() {
        let here = inline
            .last()
            .map_or_else(|| src.module.clone(), |m| m.1.clone());
        let (off, tok) = &toks[i];
        match tok {
            Tok::Punct('{') => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    let mut m = here.clone();
                    m.push(name);
                    inline.push((depth, m));
                }
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last().is_some_and(|m| m.0 == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Punct(';') => {
                pending_mod = None;
                i += 1;
            }
            Tok::Ident(s) if s == "mod" => {
                if let Some((_, Tok::Ident(name))) = toks.get(i + 1) {
                    pending_mod = Some(name.clone());
                }
                i += 2;
            }
            Tok::Ident(s) if s == "use" => {
                // `pub use` / `pub(crate) use` / `pub(super) use` re-export.
                let reexport = i >= 1
                    && (matches!(&toks[i - 1].1, Tok::Ident(p) if p == "pub")
                        || matches!(&toks[i - 1].1, Tok::Punct(')')));
                let mut trees = Vec::new();
                let next = use_tree(&toks, i + 1, &[], &mut trees);
                for (segs, _) in trees {
                    out.push(Ref {
                        segs,
                        offset: *off,
                        reexport,
                        module: here.clone(),
                        in_use: true,
                    });
                }
                i = next.max(i + 1);
            }
            Tok::Ident(s) => {
                let after_sep = i >= 1 && matches!(toks[i - 1].1, Tok::PathSep | Tok::Punct('.'));
                let kids = children.get(&here);
                let starts_path = s == "crate"
                    || s == "super"
                    || s == "self"
                    || kids.is_some_and(|k| k.contains(s));
                if !after_sep && starts_path && matches!(toks.get(i + 1), Some((_, Tok::PathSep))) {
                    let mut segs = vec![s.clone()];
                    let mut j = i + 1;
                    while let (Some((_, Tok::PathSep)), Some((_, Tok::Ident(n)))) =
                        (toks.get(j), toks.get(j + 1))
                    {
                        segs.push(n.clone());
                        j += 2;
                    }
                    out.push(Ref {
                        segs,
                        offset: *off,
                        reexport: false,
                        module: here.clone(),
                        in_use: false,
                    });
                    i = j;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------------------------

struct Crate {
    sources: Vec<Source>,
    /// Module path → index into `sources` (file modules only).
    files: BTreeMap<Vec<String>, usize>,
    /// Module path → the names of its child modules (file and inline).
    children: BTreeMap<Vec<String>, BTreeSet<String>>,
    /// Inline modules → the file that holds them.
    inline_in: BTreeMap<Vec<String>, usize>,
    /// Per module: its re-exports, name → absolute target path, and its glob re-export sources.
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    refs: Vec<Vec<Ref>>,
}

/// `segs` (as written in module `here`) as an absolute path from the crate root, or None for a
/// path into another crate.
fn absolute(c: &Crate, here: &[String], segs: &[String], in_use: bool) -> Option<Vec<String>> {
    let first = segs.first()?;
    let mut base: Vec<String>;
    let mut rest = &segs[1..];
    match first.as_str() {
        "crate" => base = vec![],
        "self" => base = here.to_vec(),
        "super" => {
            base = here.to_vec();
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        name if c.children.get(here).is_some_and(|k| k.contains(name)) => {
            base = here.to_vec();
            rest = segs;
        }
        _ => {
            let _ = in_use;
            return None;
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Whether module `m`'s own file (or inline block) defines an item called `name`.
fn defines(c: &Crate, m: &[String], name: &str) -> bool {
    let Some(&fi) = c.files.get(m).or_else(|| c.inline_in.get(m)) else {
        return false;
    };
    let toks = tokens(&c.sources[fi].code);
    toks.windows(2).any(|w| {
        matches!(&w[0].1, Tok::Ident(k) if matches!(k.as_str(),
            "fn" | "struct" | "enum" | "const" | "static" | "type" | "trait" | "union" | "macro_rules"))
            && matches!(&w[1].1, Tok::Ident(n) if n == name)
    })
}

/// The file (index) that an absolute path ends in: the deepest module it names, following
/// re-exports to the defining module.
fn resolve(c: &Crate, path: &[String], depth: u32) -> Option<usize> {
    let mut m: Vec<String> = vec![];
    for (k, seg) in path.iter().enumerate() {
        if seg == "*" {
            break;
        }
        if c.children.get(&m).is_some_and(|kids| kids.contains(seg)) {
            m.push(seg.clone());
            continue;
        }
        // An item of module `m`: re-exported from elsewhere, or defined here.
        if depth < 8 {
            if let Some(target) = c.reexports.get(&m).and_then(|r| r.get(seg)) {
                let mut t = target.clone();
                t.extend(path[k + 1..].iter().cloned());
                return resolve(c, &t, depth + 1);
            }
            if !defines(c, &m, seg) {
                for g in c.globs.get(&m).into_iter().flatten() {
                    let mut t = g.clone();
                    t.push(seg.clone());
                    t.extend(path[k + 1..].iter().cloned());
                    if let Some(f) = resolve(c, &t, depth + 1)
                        && defines(c, &c.sources[f].module, seg)
                    {
                        return Some(f);
                    }
                }
            }
        }
        break;
    }
    // An inline module lives in its file.
    while !m.is_empty() && !c.files.contains_key(&m) {
        if let Some(&f) = c.inline_in.get(&m) {
            return Some(f);
        }
        m.pop();
    }
    c.files.get(&m).copied()
}

fn load() -> Crate {
    build(read_sources())
}

/// The crate's modules, re-exports and references, from its sources.
fn build(sources: Vec<Source>) -> Crate {
    let mut files = BTreeMap::new();
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (i, s) in sources.iter().enumerate() {
        files.insert(s.module.clone(), i);
        if let Some((last, parent)) = s.module.split_last() {
            children
                .entry(parent.to_vec())
                .or_default()
                .insert(last.clone());
        }
    }
    // Inline modules (`pub mod kind { … }`), found by the same scan that tracks them for refs.
    let mut inline_in = BTreeMap::new();
    for (i, s) in sources.iter().enumerate() {
        let toks = tokens(&s.code);
        for w in toks.windows(3) {
            if let (Tok::Ident(k), Tok::Ident(name), Tok::Punct('{')) = (&w[0].1, &w[1].1, &w[2].1)
                && k == "mod"
            {
                let mut m = s.module.clone();
                m.push(name.clone());
                children
                    .entry(s.module.clone())
                    .or_default()
                    .insert(name.clone());
                inline_in.insert(m, i);
            }
        }
    }
    let mut c = Crate {
        sources,
        files,
        children,
        inline_in,
        reexports: BTreeMap::new(),
        globs: BTreeMap::new(),
        refs: vec![],
    };
    let refs: Vec<Vec<Ref>> = c.sources.iter().map(|s| refs_of(s, &c.children)).collect();
    for r in refs.iter().flatten().filter(|r| r.reexport) {
        let Some(abs) = absolute(&c, &r.module, &r.segs, true) else {
            continue;
        };
        if abs.last().is_some_and(|l| l == "*") {
            c.globs
                .entry(r.module.clone())
                .or_default()
                .push(abs[..abs.len() - 1].to_vec());
        } else if let Some(name) = abs.last() {
            c.reexports
                .entry(r.module.clone())
                .or_default()
                .insert(name.clone(), abs.clone());
        }
    }
    c.refs = refs;
    c
}

// ---------------------------------------------------------------------------------------------
// The graph and the checks
// ---------------------------------------------------------------------------------------------

/// One use of file `to` by file `from`, first seen at `line` as `path`.
#[derive(Debug, Clone)]
struct Edge {
    line: usize,
    path: String,
}

type Graph = BTreeMap<String, BTreeMap<String, Edge>>;

fn top(rel: &str) -> String {
    let first = rel.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first).to_string()
}

fn file_graph(c: &Crate) -> Graph {
    let mut g: Graph = BTreeMap::new();
    for (fi, refs) in c.refs.iter().enumerate() {
        let src = &c.sources[fi];
        g.entry(src.rel.clone()).or_default();
        for r in refs.iter().filter(|r| !r.reexport) {
            let Some(abs) = absolute(c, &r.module, &r.segs, r.in_use) else {
                continue;
            };
            let Some(to) = resolve(c, &abs, 0) else {
                continue;
            };
            let to = &c.sources[to].rel;
            if to == &src.rel || to == "lib.rs" || is_parent_of(&src.rel, to) {
                continue;
            }
            g.entry(src.rel.clone())
                .or_default()
                .entry(to.clone())
                .or_insert_with(|| Edge {
                    line: src.line(r.offset),
                    path: r.segs.join("::"),
                });
        }
    }
    g
}

/// Whether `parent` is the `mod.rs` of a module that contains `child`: a module's own file using
/// its submodules (the parts it declares and re-exports) is not an edge; a submodule using its
/// parent's items is.
fn is_parent_of(parent: &str, child: &str) -> bool {
    parent
        .strip_suffix("mod.rs")
        .is_some_and(|dir| child.starts_with(dir) && child != parent)
}

/// The top-module graph: an edge per pair of top modules, with the file edge that makes it.
fn top_graph(files: &Graph) -> Graph {
    let mut g: Graph = BTreeMap::new();
    for (from, tos) in files {
        if from == "lib.rs" {
            continue;
        }
        g.entry(top(from)).or_default();
        for (to, e) in tos {
            if top(to) != top(from) {
                g.entry(top(from))
                    .or_default()
                    .entry(top(to))
                    .or_insert_with(|| Edge {
                        line: e.line,
                        path: format!("{from}:{}: {} -> {to}", e.line, e.path),
                    });
            }
        }
    }
    g
}

/// Strongly connected components with more than one node (Tarjan), each sorted.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        n: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.n);
        t.low.insert(v, t.n);
        t.n += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(tos) = t.g.get(v) {
            for w in tos.keys() {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        n: 0,
        out: vec![],
    };
    let nodes: Vec<&str> = g
        .iter()
        .flat_map(|(k, v)| std::iter::once(k.as_str()).chain(v.keys().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// A circle, with every edge inside it and where it is.
fn describe_circle(g: &Graph, comp: &[String], files: bool) -> String {
    let mut s = format!("circle {{{}}}:", comp.join(", "));
    for from in comp {
        for (to, e) in g.get(from).into_iter().flatten() {
            if comp.contains(to) {
                if files {
                    let _ = write!(s, "\n      {from}:{}: {} -> {to}", e.line, e.path);
                } else {
                    let _ = write!(s, "\n      {from} -> {to} (e.g. {})", e.path);
                }
            }
        }
    }
    s
}

fn layer(m: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l)
}

/// Layer violations: every file edge from a top module to one it may not use.
fn layer_violations(files: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    let mut unknown = BTreeSet::new();
    for (from, tos) in files {
        if from == "lib.rs" {
            continue;
        }
        let (tf, lf) = (top(from), layer(&top(from)));
        if lf.is_none() {
            unknown.insert(tf.clone());
        }
        for (to, e) in tos {
            let tt = top(to);
            if tt == tf {
                continue;
            }
            let lt = layer(&tt);
            if lt.is_none() {
                unknown.insert(tt.clone());
            }
            if let (Some(lf), Some(lt)) = (lf, lt)
                && lt >= lf
            {
                let how = if lt > lf { "upward" } else { "same layer" };
                out.push(format!(
                    "{how}: {from}:{}: {} -> {to} ({tf} is layer {lf}, {tt} is layer {lt})",
                    e.line, e.path
                ));
            }
        }
    }
    for m in unknown {
        out.push(format!(
            "top module {m} is in no layer: add it to LAYERS in tests/import_graph.rs"
        ));
    }
    out
}

fn outside(rel: &str, home: &str) -> bool {
    top(rel) != home
}

/// `wasmtime` named in code outside `home` ([`WASMTIME_ONLY_IN`]).
fn wasmtime_violations(c: &Crate, home: &str) -> Vec<String> {
    let mut out = Vec::new();
    for s in c.sources.iter().filter(|s| outside(&s.rel, home)) {
        for (off, t) in tokens(&s.code) {
            if matches!(&t, Tok::Ident(n) if n == "wasmtime" || n == "wasmtime_wasi") {
                out.push(format!("{}:{}: names wasmtime", s.rel, s.line(off)));
            }
        }
    }
    out
}

/// Reply-shaped JSON built outside `home` ([`REPLY_JSON_ONLY_IN`]). Precisely, in non-test code:
/// - the string literal `"request_id"` (the key that makes an object a reply to a request), or
/// - the string literal `"type"` followed (after only `:`, `,`, `(`, `)`, `.`, `into`, `to_string`,
///   `json`, `!`, `insert`, `Value`, `String`, `from`) by a string literal that is one of
///   [`WIRE_ONLY_TYPES`]: `json!({"type": "done", …})`, `m.insert("type".into(), json!("error"))`.
fn reply_json(c: &Crate, home: &str) -> Vec<String> {
    let filler = |s: &str| {
        s.chars()
            .all(|ch| ch.is_whitespace() || matches!(ch, ':' | ',' | '(' | ')' | '.' | '!' | '&'))
            || {
                let words = s
                    .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                    .filter(|w| !w.is_empty());
                let mut all = true;
                for w in words {
                    all &= matches!(
                        w,
                        "into"
                            | "to_string"
                            | "json"
                            | "insert"
                            | "Value"
                            | "String"
                            | "from"
                            | "to_owned"
                    );
                }
                all && s.chars().all(|ch| {
                    ch.is_whitespace()
                        || ch.is_ascii_alphanumeric()
                        || matches!(ch, ':' | ',' | '(' | ')' | '.' | '!' | '&' | '_')
                })
            }
    };
    let mut out = Vec::new();
    for s in c.sources.iter().filter(|s| outside(&s.rel, home)) {
        for (k, (at, lit)) in s.strings.iter().enumerate() {
            if lit == "request_id" {
                out.push(format!(
                    "{}:{}: the key \"request_id\" (a reply to a request)",
                    s.rel,
                    s.line(*at)
                ));
            }
            if lit == "type"
                && let Some((next_at, next)) = s.strings.get(k + 1)
            {
                let between = &s.code[at + lit.len() + 2..*next_at];
                if WIRE_ONLY_TYPES.contains(&next.as_str()) && filler(between) {
                    out.push(format!(
                        "{}:{}: an object of type \"{next}\" (a protocol reply or event)",
                        s.rel,
                        s.line(*at)
                    ));
                }
            }
        }
    }
    out
}

/// Everything the graph finds, as the failure message (empty: all rules hold).
fn report(c: &Crate) -> String {
    let files = file_graph(c);
    let tops = top_graph(&files);
    let mut sections = Vec::new();
    let file_circles: Vec<String> = circles(&files)
        .iter()
        .map(|comp| describe_circle(&files, comp, true))
        .collect();
    let top_circles: Vec<String> = circles(&tops)
        .iter()
        .map(|comp| describe_circle(&tops, comp, false))
        .collect();
    for (title, items) in [
        ("import circles between files", file_circles),
        ("import circles between top modules", top_circles),
        ("layer rule (LAYERS) broken", layer_violations(&files)),
        (
            "wasmtime named outside host/src/sandbox/",
            wasmtime_violations(c, WASMTIME_ONLY_IN),
        ),
        (
            "reply-shaped JSON built outside host/src/protocol/",
            reply_json(c, REPLY_JSON_ONLY_IN),
        ),
    ] {
        if !items.is_empty() {
            let mut s = format!("{title} ({}):", items.len());
            for i in items {
                let _ = write!(s, "\n  - {i}");
            }
            sections.push(s);
        }
    }
    sections.join("\n\n")
}

#[test]
fn the_host_s_import_graph_has_no_circles_and_keeps_its_layers() {
    let c = load();
    // Positive controls: the scan sees the crate and its edges (an empty graph passes nothing).
    assert!(c.sources.len() > 50, "too few sources: {}", c.sources.len());
    let files = file_graph(&c);
    let edges: usize = files.values().map(BTreeMap::len).sum();
    assert!(edges > 100, "too few imports found: {edges}");
    assert!(
        files["protocol/mod.rs"].contains_key("workspace/mod.rs"),
        "protocol/mod.rs uses the workspace: {:?}",
        files["protocol/mod.rs"].keys().collect::<Vec<_>>()
    );
    // The two content rules see what they look for where it is allowed.
    assert!(
        wasmtime_violations(&c, "-")
            .iter()
            .any(|v| v.starts_with("sandbox/")),
        "wasmtime is named in sandbox/"
    );
    let replies = reply_json(&c, "-");
    for f in ["protocol/events.rs", "protocol/mod.rs"] {
        assert!(
            replies.iter().any(|v| v.starts_with(f)),
            "reply JSON is built in {f}: {replies:#?}"
        );
    }
    let report = report(&c);
    assert!(report.is_empty(), "the host's import graph:\n\n{report}\n");
}

// ---------------------------------------------------------------------------------------------
// The checker's own tests: each rule fires on a small planted crate.
// ---------------------------------------------------------------------------------------------

/// A crate from (path, text) pairs.
fn planted(files: &[(&str, &str)]) -> Crate {
    let mut sources: Vec<Source> = files.iter().map(|(rel, text)| source(rel, text)).collect();
    sources.sort_by(|a, b| a.rel.cmp(&b.rel));
    build(sources)
}

#[test]
fn the_checker_finds_circles_layer_breaks_wasmtime_and_reply_json() {
    let c = planted(&[
        ("lib.rs", "pub mod store; pub mod sandbox; pub mod agent;"),
        (
            "store/mod.rs",
            "// use crate::agent::x; in a comment is nothing\nuse crate::sandbox::Engine;\npub fn f() { let s = \"crate::agent::y\"; }",
        ),
        ("sandbox/mod.rs", "pub struct Engine; use wasmtime::Store;"),
        (
            "agent/mod.rs",
            "mod a; mod b; pub use a::Thing;\n#[cfg(test)]\nmod tests { use crate::agent::b::Other; }",
        ),
        ("agent/a.rs", "pub struct Thing;\nfn g() { super::b::h(); }"),
        (
            "agent/b.rs",
            "pub fn h() { let _ = crate::agent::Thing; }\nfn r() -> serde_json::Value { serde_json::json!({\"type\": \"done\", \"x\": 1}) }",
        ),
    ]);
    let files = file_graph(&c);
    // The re-export resolves to the defining file; the test module and the comment and string
    // are not uses.
    assert!(files["agent/b.rs"].contains_key("agent/a.rs"), "{files:?}");
    assert!(
        !files["agent/b.rs"].contains_key("agent/mod.rs"),
        "{files:?}"
    );
    assert!(
        !files["agent/mod.rs"].contains_key("agent/b.rs"),
        "{files:?}"
    );
    assert!(
        !files["store/mod.rs"].contains_key("agent/mod.rs"),
        "{files:?}"
    );
    let r = report(&c);
    assert!(
        r.contains("circle {agent/a.rs, agent/b.rs}"),
        "file circle: {r}"
    );
    assert!(
        r.contains("agent/a.rs:2: super::b::h -> agent/b.rs"),
        "edge detail: {r}"
    );
    assert!(
        r.contains("upward: store/mod.rs:2: crate::sandbox::Engine -> sandbox/mod.rs"),
        "layer: {r}"
    );
    assert!(!r.contains("sandbox/mod.rs:1: names wasmtime"), "{r}");
    assert!(
        r.contains("agent/b.rs:2: an object of type \"done\""),
        "reply json: {r}"
    );
    // Outside sandbox/, wasmtime is named.
    let c = planted(&[
        ("lib.rs", "pub mod agent;"),
        ("agent/mod.rs", "fn f(e: &wasmtime::Engine) {}"),
    ]);
    assert!(
        report(&c).contains("agent/mod.rs:1: names wasmtime"),
        "{}",
        report(&c)
    );
    // Char literals with quotes and raw strings do not derail the lexer.
    let c = planted(&[
        ("lib.rs", "pub mod store; pub mod sandbox; pub mod agent;"),
        ("store/mod.rs", "pub fn w() {}"),
        ("sandbox/mod.rs", "pub struct E;"),
        (
            "agent/mod.rs",
            "fn f<'a>(x: &'a str) { let q = '\\''; let d = '\"'; let r = r#\"crate::sandbox::E \"\"#; }\nuse crate::store::w;",
        ),
    ]);
    let files = file_graph(&c);
    assert_eq!(
        files["agent/mod.rs"].keys().collect::<Vec<_>>(),
        ["store/mod.rs"],
        "{files:?}"
    );
    assert_eq!(files["agent/mod.rs"]["store/mod.rs"].line, 2);
    // A clean planted crate reports nothing.
    let c = planted(&[
        ("lib.rs", "pub mod store; pub mod agent;"),
        ("store/mod.rs", "pub fn w() {}"),
        (
            "agent/mod.rs",
            "use crate::store::w; fn f() { crate::store::w(); let t = \"type\"; }",
        ),
    ]);
    assert_eq!(report(&c), "");
}
