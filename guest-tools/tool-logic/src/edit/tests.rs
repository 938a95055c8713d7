//! Tests of the pure pipeline: every matching rule of EDITS.md.

use super::*;

fn ok(text: &str, old: &str, new: &str) -> Replaced {
    replace(text, old, new, false).unwrap_or_else(|e| panic!("replace failed: {e}"))
}

fn apply(text: &str, old: &str, new: &str) -> String {
    ok(text, old, new).text
}

fn err(text: &str, old: &str, new: &str) -> String {
    replace(text, old, new, false).unwrap_err().to_string()
}

fn change(start: &[&str], end: &[&str], content: &[&str]) -> Change {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
    Change {
        start: v(start),
        end: v(end),
        content: v(content),
    }
}

// ---- pass 1: exact lines --------------------------------------------------------------------

#[test]
fn exact_single_and_multi_line() {
    let r = ok("a\nb\nc\n", "b", "B");
    assert_eq!(
        (r.text.as_str(), r.pass, r.count),
        ("a\nB\nc\n", Pass::Exact, 1)
    );
    assert_eq!(apply("a\nb\nc\n", "a\nb\n", "x\n"), "x\nc\n");
    assert_eq!(apply("a\nb\nc\n", "b\nc", "y"), "a\ny\n");
    // deleting lines
    assert_eq!(apply("a\nb\nc\n", "b\n", ""), "a\nc\n");
}

#[test]
fn exact_line_pass_wins_over_substring() {
    // raw substring would find "foo" twice; the whole-line pass finds it once
    let r = ok("foo\nxfoo\n", "foo", "bar");
    assert_eq!(r.pass, Pass::Exact);
    assert_eq!(r.text, "bar\nxfoo\n");
}

// ---- pass 2: trailing whitespace ----------------------------------------------------------------

#[test]
fn trailing_whitespace_pass() {
    let r = ok("a  \nb\t\nc\n", "a\nb", "x\ny");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("x\ny\nc\n", Pass::TrailingWhitespace)
    );
    // model added trailing spaces the file does not have
    let r = ok("a\nb\n", "a   \n", "z\n");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("z\nb\n", Pass::TrailingWhitespace)
    );
}

#[test]
fn trailing_pass_wins_over_indentation_pass() {
    // pass 3 would match both lines; pass 2 matches only the first
    let r = ok("  a  \n a\n", "  a", "  b");
    assert_eq!(r.pass, Pass::TrailingWhitespace);
    assert_eq!(r.text, "  b\n a\n");
}

// ---- pass 3: indentation, re-indented ----------------------------------------------------------

const RUST: &str = "fn f() {\n    if x {\n        y();\n    }\n}\n";

#[test]
fn indentation_pass_reindents_line_by_line() {
    let r = ok(RUST, "if x {\n    y();\n}", "if x {\n    y();\n    z();\n}");
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(
        r.text,
        "fn f() {\n    if x {\n        y();\n        z();\n    }\n}\n"
    );
}

#[test]
fn indentation_pass_keeps_new_text_that_carries_file_indentation() {
    let r = ok(
        RUST,
        "if x {\n    y();\n}",
        "    if x {\n        w();\n    }",
    );
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(r.text, "fn f() {\n    if x {\n        w();\n    }\n}\n");
}

#[test]
fn indentation_pass_over_indented_model() {
    let r = ok("a\nb\n", "    a\n    b", "    a\n    c\n        d");
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(r.text, "a\nc\n    d\n");
}

#[test]
fn indentation_pass_single_line() {
    // (also a raw substring: pass 3 wins and replaces the whole line, re-indented)
    assert_eq!(
        apply("def f():\n    return 1\n", "return 1", "return 2"),
        "def f():\n    return 2\n"
    );
}

#[test]
fn tabs_file_with_space_indented_model() {
    let go = "func f() {\n\tif x {\n\t\ty()\n\t}\n}\n";
    let r = ok(
        go,
        "    if x {\n        y()\n    }",
        "    if x {\n        y()\n        if z {\n            w()\n        }\n    }",
    );
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(
        r.text,
        "func f() {\n\tif x {\n\t\ty()\n\t\tif z {\n\t\t\tw()\n\t\t}\n\t}\n}\n"
    );
}

#[test]
fn spaces_file_with_tab_indented_model() {
    let py = "class A:\n    def f(self):\n        return 1\n";
    let r = ok(
        py,
        "\tdef f(self):\n\t\treturn 1",
        "\tdef f(self):\n\t\tif x:\n\t\t\treturn 2\n\t\treturn 1",
    );
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(
        r.text,
        "class A:\n    def f(self):\n        if x:\n            return 2\n        return 1\n"
    );
}

#[test]
fn mixed_tab_space_lines_in_one_file() {
    // a tab-indented file with a space-aligned continuation line
    let text = "\tcall(a,\n\t     b)\n";
    let r = ok(text, "call(a,\n     b)", "call(a,\n     c)");
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(r.text, "\tcall(a,\n\t     c)\n");
}

// ---- pass 4: truncated boundary line -----------------------------------------------------------

const LONG: &str = "fn main() {\n    let value = compute_something(alpha, beta, gamma);\n    println!(\"{}\", value);\n}\n";

#[test]
fn truncated_last_line_is_restored() {
    // (old_string is also a raw substring of the file: pass 4 comes first and wins)
    let r = ok(
        LONG,
        "fn main() {\n    let value = compute_something(",
        "fn main() {\n    // note\n    let value = compute_something(",
    );
    assert_eq!(r.pass, Pass::TruncatedBoundary);
    assert_eq!(
        r.text,
        "fn main() {\n    // note\n    let value = compute_something(alpha, beta, gamma);\n    println!(\"{}\", value);\n}\n"
    );
}

#[test]
fn truncated_first_line_with_interior() {
    let r = ok(
        LONG,
        "    let value = compute_something(alpha\n    println!(\"{}\", value);\n}",
        "    let value = compute_something(alpha\n    println!(\"value = {}\", value);\n}",
    );
    assert_eq!(r.pass, Pass::TruncatedBoundary);
    assert_eq!(
        r.text,
        "fn main() {\n    let value = compute_something(alpha, beta, gamma);\n    println!(\"value = {}\", value);\n}\n"
    );
}

#[test]
fn truncated_boundary_rewritten_by_model_is_refused() {
    // issue 32: replacing the whole file line would delete `alpha, beta, gamma);`, which the model
    // never showed; keeping it after `42;` would be a guess
    let e = err(
        LONG,
        "fn main() {\n    let value = compute_something(",
        "fn main() {\n    let value = 42;",
    );
    assert!(
        e.contains("last line `let value = compute_something(` is only the start of line 2"),
        "{e}"
    );
}

#[test]
fn truncated_boundary_needs_eight_chars_and_two_lines() {
    let text = "fn main() {\n    let val = 1;\n";
    // 6 characters: no pass 4 (and, indented differently, no substring either)
    assert!(err(text, "fn main() {\n  let va", "x").starts_with("old_string not found in file"),);
    // 9 characters: pass 4, re-indented, the truncated line restored
    let r = ok(
        text,
        "fn main() {\n  let val =",
        "fn start() {\n  let val =",
    );
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("fn start() {\n    let val = 1;\n", Pass::TruncatedBoundary)
    );
    // 7 chars that form a raw substring ending inside `val`: refused by the token guard (this
    // used to write `let vbl = 1;`, issue 13)
    let e = err(
        "a {\n    let val = 1;\n",
        "a {\n    let va",
        "a {\n    let vb",
    );
    assert!(
        e.contains("inside a longer word or number, at line 1"),
        "{e}"
    );
    // ... ending at a token boundary, the substring pass applies
    let r = ok(
        "a {\n    let val = 1;\n",
        "a {\n    let val",
        "a {\n    let vb",
    );
    assert_eq!(r.pass, Pass::Substring);
    assert_eq!(r.text, "a {\n    let vb = 1;\n");
    // a single truncated line is a substring match (pass 5), not pass 4
    let r = ok(
        LONG,
        "let value = compute_something(",
        "let v = compute_something(",
    );
    assert_eq!(r.pass, Pass::Substring);
    assert!(
        r.text
            .contains("    let v = compute_something(alpha, beta, gamma);")
    );
}

#[test]
fn truncated_boundary_counts_characters_not_bytes() {
    // 7 characters but 14 bytes: not enough
    let text = "start\n  ééééééé and more\n";
    assert!(err(text, "start\nééééééé", "y").starts_with("old_string not found in file"));
    let text = "start\n  éééééééé and more\n";
    let r = ok(text, "start\néééééééé", "begin\néééééééé");
    assert_eq!(r.pass, Pass::TruncatedBoundary);
    assert_eq!(r.text, "begin\n  éééééééé and more\n");
}

// ---- pass 5: raw substring ----------------------------------------------------------------------

#[test]
fn raw_substring_pass() {
    let r = ok("    let x = foo(1);\n", "foo(1)", "bar(2)");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("    let x = bar(2);\n", Pass::Substring)
    );
    // spanning lines, starting mid-line
    let r = ok("let x = 1;\nfoo();\n", "= 1;\nfoo", "= 2;\nbar");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("let x = 2;\nbar();\n", Pass::Substring)
    );
}

// ---- uniqueness, overlap, replace_all -----------------------------------------------------------

#[test]
fn not_unique_lists_lines() {
    assert_eq!(
        err("x\ny\nx\n", "x", "z"),
        "old_string not unique (2 matches at lines 1, 3)"
    );
    let r = replace("x\ny\nx\n", "x", "z", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("z\ny\nz\n", 2));
}

#[test]
fn not_unique_substring_lines() {
    assert_eq!(
        err("ab ab\ncd ab\n", "ab", "z"),
        "old_string not unique (3 matches at lines 1, 1, 2)"
    );
}

#[test]
fn many_matches_are_elided() {
    let text = "k\n".repeat(12);
    assert_eq!(
        err(&text, "k", "z"),
        "old_string not unique (12 matches at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)"
    );
}

#[test]
fn overlapping_substring_matches() {
    // (punctuation: inside a word the token guard would refuse these, see `token_guard`)
    assert_eq!(
        replace("---", "--", "+", false).unwrap_err(),
        MatchError::NotUnique {
            count: 2,
            lines: vec![1, 1]
        }
    );
    let r = replace("---", "--", "+", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("+-", 1));
    let r = replace("----", "--", "+", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("++", 2));
}

#[test]
fn overlapping_line_matches() {
    assert_eq!(
        err("x\nx\nx\n", "x\nx", "y"),
        "old_string not unique (2 matches at lines 1, 2)"
    );
    let r = replace("x\nx\nx\n", "x\nx", "y", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("y\nx\n", 1));
    let r = replace("x\nx\nx\nx\n", "x\nx\n", "y\n", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("y\ny\n", 2));
}

#[test]
fn replace_all_in_reindent_pass() {
    let text = "  a()\n    a()\n";
    let r = replace(text, "a()", "b()\nc()", true).unwrap();
    assert_eq!(r.pass, Pass::Indentation);
    assert_eq!(r.text, "  b()\n  c()\n    b()\n    c()\n");
}

#[test]
fn not_found() {
    assert_eq!(err("a\nb\n", "c", "d"), "old_string not found in file");
    assert_eq!(err("", "c", "d"), "old_string not found in file");
}

// ---- empty old_string -----------------------------------------------------------------------------

#[test]
fn empty_old_string_only_for_empty_or_blank_files() {
    let r = ok("", "", "hello\n");
    assert_eq!((r.text.as_str(), r.pass), ("hello\n", Pass::EmptyFile));
    assert_eq!(apply("  \n\n", "", "hello"), "hello\n");
    assert_eq!(apply("   ", "", "hello\n"), "hello");
    assert_eq!(
        err("x\n", "", "y"),
        "old_string is empty; an empty old_string is only allowed when the file is empty or contains only whitespace"
    );
}

// ---- line endings and the final newline -----------------------------------------------------------

#[test]
fn crlf_file_stays_crlf() {
    let text = "a\r\nb\r\nc\r\n";
    assert_eq!(apply(text, "b", "x\ny"), "a\r\nx\r\ny\r\nc\r\n");
    assert_eq!(apply(text, "a\nb\n", "z\n"), "z\r\nc\r\n");
    // the model sent CRLF itself
    assert_eq!(apply(text, "a\r\nb\r\n", "z\r\n"), "z\r\nc\r\n");
    // whole lines across a CRLF line break
    assert_eq!(apply(text, "a\nb", "q\nr"), "q\r\nr\r\nc\r\n");
    // reindent pass in a CRLF file
    assert_eq!(
        apply("x\r\n    y\r\n", "y", "z\nw"),
        "x\r\n    z\r\n    w\r\n"
    );
}

#[test]
fn mixed_line_endings_are_not_corrupted() {
    let text = "a\r\nb\nc\r\nd\n";
    assert_eq!(apply(text, "c", "C"), "a\r\nb\nC\r\nd\n");
    assert_eq!(apply(text, "b", "B1\nB2"), "a\r\nB1\nB2\nc\r\nd\n");
    assert_eq!(apply(text, "d", "D"), "a\r\nb\nc\r\nD\n");
}

#[test]
fn no_final_newline_is_kept() {
    assert_eq!(apply("a\nb", "b", "c"), "a\nc");
    assert_eq!(apply("a\nb", "b\n", "c\n"), "a\nc");
    assert_eq!(apply("a\nb", "b", "b\nc\n"), "a\nb\nc");
    assert_eq!(apply("a\r\nb", "b", "c\nd"), "a\r\nc\r\nd");
    // deleting the last line of such a file
    assert_eq!(apply("a\nb", "\nb", ""), "a");
}

#[test]
fn final_newline_is_kept() {
    assert_eq!(apply("a\nb\n", "b\n", "c"), "a\nc\n");
    assert_eq!(apply("a\r\nb\r\n", "b\n", "c"), "a\r\nc\r\n");
}

#[test]
fn an_edit_that_changes_nothing_is_byte_identical() {
    for text in [
        "a\r\nb\nc  \r\n",
        "x \r\ny\r\n",
        "p\nq",
        "\tz\r\n\tw\n",
        "m\r\nn",
    ] {
        let doc_lines: Vec<&str> = text.split('\n').map(|l| l.trim_end_matches('\r')).collect();
        for old in doc_lines.iter().filter(|l| !l.is_empty()) {
            let r = ok(text, old, old);
            assert_eq!(r.text, text, "{text:?} {old:?}");
        }
    }
    // pass 2: the model omitted a trailing space in old_string but kept it in new_string
    assert_eq!(apply("x \r\ny\r\n", "x", "x "), "x \r\ny\r\n");
    // a whole mixed region rewritten to the same text keeps its bytes
    assert_eq!(
        apply("a\r\nb\nc\r\n", "a\nb\nc\n", "a\nb\nc\n"),
        "a\r\nb\nc\r\n"
    );
}

#[test]
fn multibyte_text() {
    assert_eq!(
        apply("héllo wörld\n日本語\n", "wörld", "wereld"),
        "héllo wereld\n日本語\n"
    );
    assert_eq!(
        apply("héllo wörld\n  日本語\n", "日本語", "中文"),
        "héllo wörld\n  中文\n"
    );
}

// ---- anchored -----------------------------------------------------------------------------------

const PY: &str = "def a():\n    return 1\n\ndef b():\n    x = 2\n    return x\n";

#[test]
fn anchored_start_only_and_start_end() {
    let out = apply_anchored(PY, &[change(&["    return 1"], &[], &["    return 10"])]).unwrap();
    assert_eq!(out, PY.replace("return 1\n", "return 10\n"));
    let out = apply_anchored(
        PY,
        &[change(
            &["def b():"],
            &["    return x"],
            &["def b():", "    return 3"],
        )],
    )
    .unwrap();
    assert_eq!(out, "def a():\n    return 1\n\ndef b():\n    return 3\n");
}

#[test]
fn anchored_delete_and_several_changes() {
    let out = apply_anchored(PY, &[change(&["def b():"], &["    return x"], &[])]).unwrap();
    assert_eq!(out, "def a():\n    return 1\n\n");
    // changes refer to the original file and may come in any order
    let out = apply_anchored(
        PY,
        &[
            change(&["    x = 2"], &[], &["    x = 3"]),
            change(&["def a():"], &[], &["def a(): # first", "    pass"]),
        ],
    )
    .unwrap();
    assert_eq!(
        out,
        "def a(): # first\n    pass\n    return 1\n\ndef b():\n    x = 3\n    return x\n"
    );
    // content containing another change's anchor does not disturb it
    let out = apply_anchored(
        "p\nq\n",
        &[
            change(&["p"], &[], &["q", "p2"]),
            change(&["q"], &[], &["q2"]),
        ],
    )
    .unwrap();
    assert_eq!(out, "q\np2\nq2\n");
}

#[test]
fn anchored_line_endings_and_final_newline() {
    let out = apply_anchored("a\r\nb\r\nc\r\n", &[change(&["b"], &[], &["x", "y"])]).unwrap();
    assert_eq!(out, "a\r\nx\r\ny\r\nc\r\n");
    let out = apply_anchored("a\nb", &[change(&["b"], &[], &["c"])]).unwrap();
    assert_eq!(out, "a\nc");
    let out = apply_anchored("a\nb", &[change(&["b"], &[], &[])]).unwrap();
    assert_eq!(out, "a");
    let out = apply_anchored("a\nb\n", &[change(&["a"], &[], &["a"])]).unwrap();
    assert_eq!(out, "a\nb\n");
    // an anchor line given with its newline, or several lines in one element
    let out = apply_anchored("a\nb\nc\n", &[change(&["a\n", "b\r\n"], &[], &["x\ny"])]).unwrap();
    assert_eq!(out, "x\ny\nc\n");
}

#[test]
fn anchored_tiers_and_reindent() {
    let text = "class A:\n    def f(self):  \n        return 1\n";
    // trailing whitespace tier: no re-indentation
    let out = apply_anchored(
        text,
        &[change(&["    def f(self):"], &[], &["    def g(self):"])],
    )
    .unwrap();
    assert_eq!(out, "class A:\n    def g(self):\n        return 1\n");
    // trimmed tier: content re-indented by the first anchor line's difference
    let out = apply_anchored(
        text,
        &[change(
            &["def f(self):", "    return 1"],
            &[],
            &["def f(self):", "    return 2"],
        )],
    )
    .unwrap();
    assert_eq!(out, "class A:\n    def f(self):\n        return 2\n");
    // tabs in the file, spaces from the model
    let out = apply_anchored(
        "f {\n\tx\n}\n",
        &[change(&["x"], &[], &["x", "if y {", "    z", "}"])],
    )
    .unwrap();
    assert_eq!(out, "f {\n\tx\n\tif y {\n\t\tz\n\t}\n}\n");
    // exact tier wins over trimmed
    let out = apply_anchored("  k\nk\n", &[change(&["k"], &[], &["m"])]).unwrap();
    assert_eq!(out, "  k\nm\n");
}

#[test]
fn anchored_errors() {
    let e = |c: Change| apply_anchored(PY, &[c]).unwrap_err();
    assert_eq!(
        e(change(&[], &[], &["x"])).kind.to_string(),
        "empty start anchor"
    );
    assert_eq!(
        e(change(&["", "  "], &[], &["x"])).kind.to_string(),
        "empty start anchor"
    );
    let eleven: Vec<&str> = vec!["l"; 11];
    assert_eq!(
        e(change(&eleven, &[], &[])).kind.to_string(),
        "start anchor too long (11 lines, max 10)"
    );
    assert_eq!(
        e(change(&["def a():"], &eleven, &[])).kind.to_string(),
        "end anchor too long (11 lines, max 10)"
    );
    let nf = e(change(&["nope"], &[], &[]));
    assert_eq!(
        (nf.kind.to_string(), nf.anchor()),
        ("anchor not found".to_string(), Some(Anchor::Start))
    );
    let nf = e(change(&["def a():"], &["nope"], &[]));
    assert_eq!(
        (nf.kind.to_string(), nf.anchor()),
        ("anchor not found".to_string(), Some(Anchor::End))
    );
    let nu = e(change(&["def b():"], &["def a():"], &[]));
    assert_eq!(
        nu.kind.to_string(),
        "end anchor (line 1) must come after the start anchor (lines 4-4)"
    );
    let nu = apply_anchored("x\ny\nx\n", &[change(&["x"], &[], &[])]).unwrap_err();
    assert_eq!(
        (nu.kind.to_string(), nu.anchor()),
        (
            "anchor not unique (lines 1, 3)".to_string(),
            Some(Anchor::Start)
        )
    );
    let nu = apply_anchored("a\nx\ny\nx\n", &[change(&["a"], &["x"], &[])]).unwrap_err();
    assert_eq!(
        (nu.kind.to_string(), nu.anchor()),
        (
            "anchor not unique (lines 2, 4)".to_string(),
            Some(Anchor::End)
        )
    );
}

#[test]
fn anchored_overlap_is_refused() {
    let e = apply_anchored(
        PY,
        &[
            change(&["def b():"], &["    return x"], &[]),
            change(&["    x = 2"], &[], &["y"]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.change, 1);
    assert_eq!(
        e.kind.to_string(),
        "region (lines 5-5) overlaps the region of changes[0] (lines 4-6); changes must not overlap"
    );
    // the same start anchor twice
    let e = apply_anchored(
        PY,
        &[
            change(&["def a():"], &[], &["x"]),
            change(&["def a():"], &[], &["y"]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.change, 1);
    // adjacent regions are fine
    let out = apply_anchored(
        "a\nb\n",
        &[change(&["b"], &[], &["B"]), change(&["a"], &[], &["A"])],
    )
    .unwrap();
    assert_eq!(out, "A\nB\n");
}

// ---- robustness and performance -----------------------------------------------------------------

/// A small deterministic generator (no extra dependencies).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
    fn text(&mut self, max: usize) -> String {
        const PIECES: [&str; 12] = [
            "a",
            "b",
            " ",
            "\t",
            "\n",
            "\r\n",
            "\r",
            "é",
            "日",
            "ab\n",
            "    ",
            "aaaaaaaaab",
        ];
        let n = self.next() % max;
        (0..n).map(|_| PIECES[self.next() % PIECES.len()]).collect()
    }
}

#[test]
fn never_panics_on_arbitrary_input() {
    let mut g = Lcg(7);
    for _ in 0..4000 {
        let text = g.text(40);
        let old = g.text(12);
        let new = g.text(12);
        let all = g.next().is_multiple_of(2);
        let _ = replace(&text, &old, &new, all);
        let c = Change {
            start: vec![g.text(6), g.text(6)],
            end: if g.next().is_multiple_of(2) {
                vec![]
            } else {
                vec![g.text(6)]
            },
            content: vec![g.text(6)],
        };
        let _ = apply_anchored(&text, &[c]);
    }
}

/// The results on a large file and pathological repetitions; their timings are in the host's
/// bench (`cargo bench -p bb7 --bench edit`).
#[test]
fn large_file_is_linear() {
    let mut text = String::new();
    let mut i: usize = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!(
            "    let value_{i} = compute(value_{}, {i});\n",
            i.saturating_sub(1)
        ));
        i += 1;
    }
    let target = format!(
        "    let value_{} = compute(value_{}, {});\n",
        i - 3,
        i - 4,
        i - 3
    );
    let r = ok(&text, &target, "    // replaced\n");
    assert_eq!(r.pass, Pass::Exact);
    // falls through all passes to the raw substring pass
    let r = ok(&text, &format!("value_{}, {}", i - 5, i - 4), "x");
    assert_eq!(r.pass, Pass::Substring);
    // not found: every pass runs over the whole file
    assert_eq!(
        err(&text, "not\nthere\nat all", "x"),
        "old_string not found in file"
    );
    // pathological repetition: KMP keeps it linear
    let same = "x\n".repeat(200_000);
    let mut old = "x\n".repeat(500);
    old.push_str("y\n");
    assert!(err(&same, &old, "z").starts_with("old_string not found in file"));
    let aa = "-".repeat(1 << 20);
    let needle = "-".repeat(1000);
    let r = replace(&aa, &needle, "b", true).unwrap();
    assert_eq!(r.count, (1 << 20) / 1000);
}

// ---- issue 13: token guard, prefix rule, newline asymmetry, repairs, hints ----------------------
// (the corpus in tests/corpus/edits.txt covers these case by case; these pin the mechanics)

#[test]
fn token_guard() {
    // a stale value inside a longer number is never matched
    let e = err("retries = 30\n", "retries = 3", "retries = 5");
    assert!(
        e.contains("inside a longer word or number, at line 1"),
        "{e}"
    );
    // a name inside a longer name
    assert!(err("max_count = 1\n", "count = 1", "count = 2").contains("inside a longer word"));
    // a truncated boundary line may not end inside a number either
    assert!(
        err(
            "[db]\ntimeout = 100\n",
            "[db]\ntimeout = 10",
            "[db]\ntimeout = 20"
        )
        .starts_with("old_string not found in file")
    );
    // edges that are punctuation or whitespace are fine
    assert_eq!(apply("f(a).unwrap();\n", ".unwrap()", "?"), "f(a)?;\n");
    assert_eq!(
        apply("x = max_count + 1\n", "max_count + 1", "0"),
        "x = 0\n"
    );
    // with replace_all, blocked occurrences are skipped, the others replaced
    let r = replace("id idx id\n", "id", "key", true).unwrap();
    assert_eq!((r.text.as_str(), r.count), ("key idx key\n", 2));
}

#[test]
fn prefix_rule() {
    let text = "    let x = compute(a, b);\n";
    // retyped rest: the whole line is replaced, nothing duplicated
    assert_eq!(
        apply(text, "let x = compute(", "let y = compute(a, b);"),
        "    let y = compute(a, b);\n"
    );
    // a whole line with another tail: refused
    let e = err(text, "let x = compute(", "let x = compute(a, b, c);");
    assert!(
        e.starts_with("old_string matches only part of line 1"),
        "{e}"
    );
    // prefix edits and insertions still apply
    assert_eq!(
        apply(text, "let x", "let mut x"),
        "    let mut x = compute(a, b);\n"
    );
    assert_eq!(
        apply(text, "(a", "(z, a"),
        "    let x = compute(z, a, b);\n"
    );
}

#[test]
fn newline_asymmetry_on_whole_lines() {
    let text = "[server]\nport = 8080\n[client]\n";
    assert_eq!(
        apply(text, "port = 8080\n", "port = 9090"),
        "[server]\nport = 9090\n[client]\n"
    );
    assert_eq!(
        apply(text, "port = 8080", "port = 9090\n"),
        "[server]\nport = 9090\n[client]\n"
    );
    assert_eq!(apply(text, "port = 8080", ""), "[server]\n[client]\n");
    // a deliberate blank line is still possible
    assert_eq!(
        apply(text, "port = 8080", "port = 9090\n\n"),
        "[server]\nport = 9090\n\n[client]\n"
    );
    // a partial-line match is not a whole line: a new_string ending in a newline is refused
    // rather than guessed
    assert!(
        err("a = f(1);\n", "f(1)", "g(1)\n").starts_with("old_string matches only part of line 1")
    );
}

#[test]
fn repairs_report_their_pass() {
    let py = "def f():\n    return 1\n";
    let r = ok(py, "2:     return 1", "2:     return 2");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("def f():\n    return 2\n", Pass::LineNumbers)
    );
    let r = ok(py, "def f():\\n    return 1", "def f():\\n    return 3");
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("def f():\n    return 3\n", Pass::Unescaped)
    );
    let r = ok("a < b\n", "a &lt; b", "a &gt; b");
    assert_eq!((r.text.as_str(), r.pass), ("a > b\n", Pass::HtmlEntities));
    let r = ok("s = 'x'\n", "s = ‘x’", "s = ‘y’");
    assert_eq!((r.text.as_str(), r.pass), ("s = 'y'\n", Pass::Typography));
    let r = ok("a\n\nb\n", "a\nb", "a\nc");
    assert_eq!((r.text.as_str(), r.pass), ("a\n\nc\n", Pass::BlankLines));
    let r = ok(
        "f {\n  x\n  y\n}\n",
        "f {\n// ...\n}",
        "f {\n// ...\n  z\n}",
    );
    assert_eq!(
        (r.text.as_str(), r.pass),
        ("f {\n  x\n  y\n  z\n}\n", Pass::Elision)
    );
    assert!(Pass::Elision.is_repair() && !Pass::Substring.is_repair());
}

#[test]
fn repairs_need_a_unique_match() {
    // numbered old_string matching two places once the numbers are dropped
    let e = err("x = 1\ny\nx = 1\n", "7: x = 1", "7: x = 2");
    assert!(e.contains("matches 2 places (lines 1, 3)"), "{e}");
}

#[test]
fn typography_keeps_the_files_characters_outside_the_change() {
    // the file's curly quotes on an unchanged line of the block and around the change stay
    let text = "a = “one”\nb = “two” + x\n";
    let r = ok(
        text,
        "a = \"one\"\nb = \"two\" + x",
        "a = \"one\"\nb = \"two\" + y",
    );
    assert_eq!(r.text, "a = “one”\nb = “two” + y\n");
}

#[test]
fn hints_name_the_closest_region() {
    let text = "fn f() {\n\tlet a = 1;\n\tlet b = 2;\n}\n";
    let e = err(text, "    let a = 1;\n    let b = 3;", "x");
    assert!(e.contains("the closest text is at lines 2-3"), "{e}");
    assert!(
        e.contains("indentation differs: the file has 1 tab(s), old_string has 4 space(s)"),
        "{e}"
    );
    assert!(e.contains("the file says 2 where old_string says 3"), "{e}");
    let e = err("x = “a”\ny = 1\n", "x = \"a\"\ny = 2", "z");
    assert!(e.contains("quotes or dashes differ"), "{e}");
}

#[test]
fn anchored_repairs_and_hints() {
    let text = "def a():\n    return 1\n";
    let out = apply_anchored(
        text,
        &[change(&["2:     return 1"], &[], &["2:     return 5"])],
    )
    .unwrap();
    assert_eq!(out, "def a():\n    return 5\n");
    let out = apply_anchored("s = \"q\"\n", &[change(&["s = “q”"], &[], &["s = “r”"])]).unwrap();
    assert_eq!(out, "s = \"r\"\n");
    let e = apply_anchored(text, &[change(&["    return 2"], &[], &["x"])]).unwrap_err();
    assert_eq!(e.kind.to_string(), "anchor not found");
    let hint = e.hint.unwrap_or_default();
    assert!(
        hint.contains("the file says 1 where old_string says 2"),
        "{hint}"
    );
}

/// Pieces that trigger the guard, the prefix rule and every repair.
fn repair_text(g: &mut Lcg, max: usize) -> String {
    const PIECES: [&str; 24] = [
        "a",
        "b1",
        " ",
        "\t",
        "\n",
        "\r\n",
        "x = 10",
        "0",
        "(",
        ");",
        "{",
        "}",
        "“",
        "”",
        "’",
        "—",
        "&lt;",
        "\\n",
        "\\\"",
        "// ... existing code ...\n",
        "...\n",
        "12: ",
        "     3→",
        "\n\n",
    ];
    let n = g.next() % max;
    (0..n).map(|_| PIECES[g.next() % PIECES.len()]).collect()
}

#[test]
fn repairs_never_panic_and_a_same_text_edit_changes_nothing() {
    let mut g = Lcg(13);
    for _ in 0..6000 {
        let text = repair_text(&mut g, 30);
        let old = repair_text(&mut g, 8);
        let new = if g.next().is_multiple_of(3) {
            old.clone()
        } else {
            repair_text(&mut g, 8)
        };
        let all = g.next().is_multiple_of(4);
        if let Ok(r) = replace(&text, &old, &new, all) {
            // (repairs must give back the file's own text when nothing changes; the line passes
            // write new_string as given, e.g. pass 2 keeps the model's trailing spaces)
            // (modulo trailing whitespace, which the line passes take from new_string)
            if is_noop(&old, &new) && r.pass.is_repair() {
                let norm = |s: &str| {
                    s.split('\n')
                        .map(|l| l.trim_end().to_string())
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    norm(&r.text),
                    norm(&text),
                    "{text:?} {old:?} ({:?})",
                    r.pass
                );
            }
        }
        let c = Change {
            start: vec![repair_text(&mut g, 4)],
            end: vec![],
            content: vec![repair_text(&mut g, 4)],
        };
        let _ = apply_anchored(&text, &[c]);
    }
}

#[test]
fn widened_matches_never_overlap() {
    // two occurrences on one line, new_string retyping the line's start: refused, not spliced twice
    let e = replace("let a = f(x) + f(x);\n", "f(x)", "let a = f(y)", true).unwrap_err();
    assert!(
        e.to_string().contains("cannot replace every occurrence"),
        "{e}"
    );
    // one occurrence: the retyped start is not duplicated
    assert_eq!(
        apply("let a = f(x) + 1;\n", "f(x)", "let a = f(y)"),
        "let a = f(y) + 1;\n"
    );
}
