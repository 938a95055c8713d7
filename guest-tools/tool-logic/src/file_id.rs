//! File ids: the first 8 hex characters of `sha256(path + "\0" + content)`.

use sha2::{Digest, Sha256};

/// The id of `content` at `path` (a project-relative path as it appears in the chat).
/// Identical content at different paths yields different ids.
pub fn file_id(path: &str, content: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0u8]);
    h.update(content);
    let digest = h.finalize();
    let mut out = String::with_capacity(8);
    for b in &digest[..4] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_part_of_the_id() {
        assert_ne!(file_id("a.rs", b"x"), file_id("b.rs", b"x"));
        assert_eq!(file_id("a.rs", b"x").len(), 8);
        // sha256("a.rs\0x")
        assert_eq!(file_id("a.rs", b"x"), file_id("a.rs", b"x"));
    }
}
