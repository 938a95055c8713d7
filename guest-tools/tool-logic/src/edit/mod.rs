//! The edit matching pipeline (EDITS.md). Being written.
