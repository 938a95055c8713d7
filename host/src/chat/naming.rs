//! Chat names: what a valid one is, and which ones the user never chose (so an automatic title may
//! replace them).

use super::error::ChatError;

/// A chat name is one line of text: line breaks and other control characters are refused (every
/// client shows names in one line).
pub fn check_name(name: &str) -> Result<(), ChatError> {
    match name.chars().find(|c| c.is_control()) {
        Some(c) => Err(ChatError::BadName(c)),
        None => Ok(()),
    }
}

/// A name the user did not choose: empty, or what a client names a new chat (ours and bb7.nvim's).
pub fn is_default_name(name: &str) -> bool {
    /// `YYYY-MM-DD HH:MM`, the stamp both clients put in a new chat's name.
    fn stamp(s: &str) -> bool {
        let b = s.as_bytes();
        b.len() == 16
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b' ',
                13 => *c == b':',
                _ => c.is_ascii_digit(),
            })
    }
    let name = name.trim();
    name.is_empty()
        || name.eq_ignore_ascii_case("untitled chat")
        || name.eq_ignore_ascii_case("new chat")
        // Ours: `Chat 2026-01-31 14:05`; the bb7.nvim client's: `Untitled chat - 2026-01-31 14:05`.
        || name.strip_prefix("Chat ").is_some_and(stamp)
        || name.strip_prefix("Untitled chat - ").is_some_and(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_clients_default_names_are_default() {
        for n in [
            "",
            "Chat 2026-01-31 14:05",
            "Untitled chat - 2026-01-31 14:05",
            "Untitled chat",
            "New chat",
        ] {
            assert!(is_default_name(n), "{n:?}");
        }
        for n in [
            "Chat about parsing",
            "Untitled chat - my notes",
            "Chat 2026-01-31 14:0x",
            "Chat 2026:01-31 14:05",
            "Fix the parser",
        ] {
            assert!(!is_default_name(n), "{n:?}");
        }
    }

    #[test]
    fn names_are_one_line() {
        assert!(check_name("a name").is_ok());
        assert_eq!(
            check_name("a\nname").unwrap_err().to_string(),
            "Invalid chat name: it contains the control character '\\n' (a name is one line of text)"
        );
    }
}
