//! The edit matching pipeline of EDITS.md, pure (no I/O): the tools in [`crate::tools::edit_file`]
//! read the file, call [`replace`] or [`apply_anchored`], and write the result.
//!
//! Search/replace ([`replace`]): `old_string` is located by the first of five passes that finds
//! anything — exact lines, lines equal after trimming trailing whitespace, lines equal after trimming
//! all surrounding whitespace (the replacement is re-indented), a truncated first/last line (prefix of
//! at least 8 characters, for two or more lines), and finally a raw substring. Line passes compare
//! whole lines: `old_string` ending in `\n` covers the last line's terminator, otherwise the match
//! ends at the last line's content. More than one match fails unless `replace_all`; overlapping
//! matches (e.g. `aa` in `aaa`) count as separate matches, and `replace_all` replaces the leftmost of
//! overlapping ones (like `str::replace`).
//!
//! Anchored ([`apply_anchored`]): see [`anchored`].
//!
//! Line endings: matching happens with `\r\n` read as `\n` (module `text`); replacements are written
//! back into the original bytes with the line endings of the region they replace, so a CRLF file stays
//! CRLF, and lines a replacement leaves unchanged keep their bytes, so every untouched line of a mixed
//! file keeps its ending (issue 32). A file without a final newline keeps it that
//! way (and one with a final newline keeps it), and an edit that changes nothing yields the original
//! bytes.
//!
//! Safety and repairs (issue 13, doc/edit-repairs.md): the inexact passes never match inside an
//! identifier or number, a partial-line match whose replacement retypes the whole line is widened
//! or refused (never duplicated), whole-line matches ignore a trailing-newline asymmetry of
//! old/new, and when nothing is found the repair passes of [`repair`] undo common model mistakes
//! (line numbers, escapes, HTML entities, typography, squeezed spaces, blank lines, elision
//! markers). Errors name the closest region and what differs ([`diagnose`]). A successful
//! [`Replaced`] also counts the occurrences of a one-line `old_string` left inside longer words
//! ([`InWords`]), which the tool reports. Issue 32's rules (truncated boundary lines refused unless
//! kept, one consistent re-indentation per block) are in doc/edit-repairs.md.
//!
//! Everything is linear in the file size (KMP over lines and bytes, one pass to splice), so a 1 MiB
//! file is edited in milliseconds.

pub mod anchored;
mod diagnose;
pub mod encoding;
mod find;
mod indent;
mod repair;
pub(crate) mod scan;
mod search;
mod text;

pub use anchored::{
    Anchor, AnchorErrorKind, AnchoredError, Change, MAX_ANCHOR_LINES, apply_anchored,
};
pub use search::{
    InWords, MAX_LISTED_LINES, MIN_PREFIX_CHARS, MatchError, Pass, Replaced, list_lines, replace,
};

/// Whether replacing `old` by `new` is a no-op (equal once `\r\n` is read as `\n`).
pub fn is_noop(old: &str, new: &str) -> bool {
    text::to_lf(old) == text::to_lf(new)
}

#[cfg(test)]
mod tests;
