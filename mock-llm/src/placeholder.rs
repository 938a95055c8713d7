//! `{{file_id:PATH}}` placeholders: a script names a file by path and the mock fills in the id the
//! host showed the model for that file, read from the request being answered.
//!
//! The rule, exactly:
//!
//! 1. Take the request body's `messages` array and the **last** message whose `role` is `"user"`.
//!    Its text is `content` when that is a string, or the `text` of every `content` part that has one,
//!    joined with `"\n"`, when it is an array. When `tool` messages follow it (an agent's later
//!    steps), their contents come first, newest first, so an id a tool result showed (e.g. a
//!    `read_file` result's `file_id`) wins over the one in the user message.
//! 2. Find the **first** occurrence of PATH in that text (exact, case-sensitive substring).
//! 3. Look at the 200 characters (Unicode scalar values) right after that occurrence.
//! 4. The id is the first *token* lying wholly inside that window that is exactly 8 ASCII hex digits
//!    (`0-9a-fA-F`, case kept). A token is a maximal run of ASCII letters, digits and `_`, so
//!    `id="1a2b3c4d"`, `file_id: 1a2b3c4d` and `[1a2b3c4d]` match while `1a2b3c4d9` and `x1a2b3c4d` do not.
//!
//! When no id is found the placeholder is left in place (the host then sees a bad `file_id`, which is
//! itself a useful test), and the mock logs a warning.

use serde_json::Value;

use crate::script::{Reply, Step};

/// How many characters after the path are searched for the id.
pub const WINDOW_CHARS: usize = 200;

const OPEN: &str = "{{file_id:";
const CLOSE: &str = "}}";

/// The text of the last user message of an OpenAI-style chat request body (rule step 1).
pub fn last_user_text(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let message = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The id for `path` in `text` (rule steps 2–4).
pub fn find_file_id(text: &str, path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let start = text.find(path)? + path.len();
    let before = text[..start].chars().next_back();
    let window: Vec<char> = text[start..].chars().take(WINDOW_CHARS).collect();
    let mut i = 0;
    while i < window.len() {
        if !is_word(window[i]) {
            i += 1;
            continue;
        }
        let run_start = i;
        while i < window.len() && is_word(window[i]) {
            i += 1;
        }
        // A run touching the end of the window may continue past it: then it is not wholly inside.
        let cut_by_window =
            i == window.len() && text[start..].chars().nth(window.len()).is_some_and(is_word);
        // A run at the window's start that continues the path's last word is not a token of its own.
        let glued_to_path = run_start == 0 && before.is_some_and(is_word);
        let token = &window[run_start..i];
        if !cut_by_window
            && !glued_to_path
            && token.len() == 8
            && token.iter().all(|c| c.is_ascii_hexdigit())
        {
            return Some(token.iter().collect());
        }
    }
    None
}

/// The text placeholders are resolved against (rule step 1): the `tool` messages after the last user
/// message, newest first, then that user message.
pub fn placeholder_text(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let last_user = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    let mut parts: Vec<String> = messages
        .iter()
        .skip(last_user.map_or(0, |i| i + 1))
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .filter_map(|m| m.get("content").and_then(Value::as_str).map(str::to_string))
        .collect();
    parts.extend(last_user_text(body));
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// Replaces every `{{file_id:PATH}}` in `s` using `user_text`; returns the new string and the paths
/// that could not be resolved.
pub fn substitute(s: &str, user_text: Option<&str>) -> (String, Vec<String>) {
    let mut out = String::with_capacity(s.len());
    let mut unresolved = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find(OPEN) {
        let after_open = &rest[open + OPEN.len()..];
        let Some(close) = after_open.find(CLOSE) else {
            break;
        };
        let path = &after_open[..close];
        out.push_str(&rest[..open]);
        match user_text.and_then(|t| find_file_id(t, path)) {
            Some(id) => out.push_str(&id),
            None => {
                unresolved.push(path.to_string());
                out.push_str(&rest[open..open + OPEN.len() + close + CLOSE.len()]);
            }
        }
        rest = &after_open[close + CLOSE.len()..];
    }
    out.push_str(rest);
    (out, unresolved)
}

/// Cuts `s` into at most `n` pieces of roughly equal length in characters, never inside a
/// `{{file_id:…}}` placeholder, so that substitution still sees whole placeholders. The pieces
/// concatenate to `s`; an empty `s` gives one empty piece.
pub fn split_fragments(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    if n <= 1 || chars.len() <= 1 {
        return vec![s.to_string()];
    }
    // Byte ranges of placeholders, inside which no cut may fall.
    let mut protected = Vec::new();
    let mut from = 0;
    while let Some(open) = s[from..].find(OPEN).map(|o| o + from) {
        match s[open..].find(CLOSE) {
            Some(close) => {
                let end = open + close + CLOSE.len();
                protected.push((open, end));
                from = end;
            }
            None => break,
        }
    }
    let n = n.min(chars.len());
    let mut cuts = Vec::new();
    for k in 1..n {
        let mut byte = chars[k * chars.len() / n].0;
        if let Some(&(_, end)) = protected.iter().find(|(a, b)| *a < byte && byte < *b) {
            byte = end;
        }
        if byte > 0 && byte < s.len() && cuts.last().is_none_or(|&last| byte > last) {
            cuts.push(byte);
        }
    }
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut last = 0;
    for cut in cuts {
        pieces.push(s[last..cut].to_string());
        last = cut;
    }
    pieces.push(s[last..].to_string());
    pieces
}

/// Resolves the placeholders of every string in `reply` against `request_body`; returns the paths
/// left unresolved.
pub(crate) fn substitute_reply(reply: &mut Reply, request_body: &Value) -> Vec<String> {
    let text = placeholder_text(request_body);
    let mut sub = Substituter {
        text: text.as_deref(),
        unresolved: Vec::new(),
    };
    if let Some(body) = &mut reply.body {
        sub.value(body);
    }
    if let Some(text) = &mut reply.text {
        sub.string(text);
    }
    for step in reply.stream.iter_mut().flatten() {
        sub.step(step);
    }
    sub.unresolved
}

struct Substituter<'a> {
    text: Option<&'a str>,
    unresolved: Vec<String>,
}

impl Substituter<'_> {
    fn string(&mut self, s: &mut String) {
        if s.contains(OPEN) {
            let (new, missing) = substitute(s, self.text);
            *s = new;
            self.unresolved.extend(missing);
        }
    }

    fn value(&mut self, v: &mut Value) {
        match v {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.value(i)),
            _ => {}
        }
    }

    fn step(&mut self, step: &mut Step) {
        match step {
            Step::Data(v) | Step::DataNospace(v) => self.value(v),
            Step::Comment(s) | Step::Raw(s) | Step::Content(s) | Step::Reasoning(s) => {
                self.string(s)
            }
            Step::RawBytes(bytes) => {
                if let Ok(text) = std::str::from_utf8(bytes) {
                    let mut text = text.to_string();
                    self.string(&mut text);
                    *bytes = text.into_bytes();
                }
            }
            Step::ToolCall(call) => {
                self.string(&mut call.id);
                self.string(&mut call.name);
                self.string(&mut call.arguments);
            }
            Step::ToolCallDelta(delta) => {
                for s in [&mut delta.id, &mut delta.name, &mut delta.arguments]
                    .into_iter()
                    .flatten()
                {
                    self.string(s);
                }
            }
            Step::Error(e) => {
                self.string(&mut e.message);
                self.value(&mut e.code);
            }
            Step::Split(split) => self.step(&mut split.step),
            Step::Usage(u) => {
                if let Some(r) = &mut u.finish_reason {
                    self.string(r);
                }
            }
            Step::Finish(s) => self.string(s),
            Step::DelayMs(_) | Step::Done | Step::Truncate | Step::Stall => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body_with_user(text: &str) -> Value {
        json!({"model": "m", "messages": [
            {"role": "system", "content": "sys src/a.rs id=\"00000000\""},
            {"role": "user", "content": text}
        ]})
    }

    #[test]
    fn finds_the_id_in_an_xml_attribute_after_the_path() {
        let text = r#"<file path="src/main.rs" id="1a2b3c4d">fn main() {}</file>"#;
        assert_eq!(
            find_file_id(text, "src/main.rs").as_deref(),
            Some("1a2b3c4d")
        );
    }

    #[test]
    fn finds_a_json_file_id_and_keeps_case() {
        let text = r#"{"path":"lib/x.lua","file_id":"DEADbeef"}"#;
        assert_eq!(find_file_id(text, "lib/x.lua").as_deref(), Some("DEADbeef"));
    }

    #[test]
    fn skips_tokens_that_are_not_exactly_eight_hex_digits() {
        // 9 hex digits, 8 chars with a non-hex letter, 8 hex glued to a letter, then the real one.
        let text = "src/a.rs 1a2b3c4d9 1a2b3c4g x1a2b3c4d 7 deadbeef";
        assert_eq!(find_file_id(text, "src/a.rs").as_deref(), Some("deadbeef"));
    }

    #[test]
    fn uses_only_the_first_occurrence_of_the_path() {
        let far = "x".repeat(250);
        let text = format!("see src/a.rs {far} src/a.rs id=\"aaaaaaaa\"");
        assert_eq!(find_file_id(&text, "src/a.rs"), None);
        let text = "src/a.rs id=\"11111111\" … src/a.rs id=\"22222222\"";
        assert_eq!(find_file_id(text, "src/a.rs").as_deref(), Some("11111111"));
    }

    #[test]
    fn the_window_is_200_characters_and_the_token_must_lie_wholly_inside() {
        // Multi-byte padding: the window counts characters, not bytes.
        let pad = |n: usize| "é".repeat(n);
        let inside = format!("src/a.rs{} abcdef01", pad(191)); // token ends at char 200
        assert_eq!(
            find_file_id(&inside, "src/a.rs").as_deref(),
            Some("abcdef01")
        );
        let straddling = format!("src/a.rs{} abcdef01", pad(192)); // token ends at char 201
        assert_eq!(find_file_id(&straddling, "src/a.rs"), None);
        let outside = format!("src/a.rs{} abcdef01", pad(200));
        assert_eq!(find_file_id(&outside, "src/a.rs"), None);
    }

    #[test]
    fn a_run_continuing_the_path_is_not_a_token() {
        assert_eq!(find_file_id("dir/abc12345678 x", "dir/abc"), None);
        assert_eq!(
            find_file_id("dir/abc 12345678 x", "dir/abc").as_deref(),
            Some("12345678")
        );
    }

    #[test]
    fn missing_path_gives_none() {
        assert_eq!(find_file_id("nothing here 12345678", "src/a.rs"), None);
        assert_eq!(find_file_id("12345678", ""), None);
    }

    #[test]
    fn last_user_text_takes_the_last_user_message_and_joins_parts() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": [
                {"type": "text", "text": "part one"},
                {"type": "image_url", "image_url": {"url": "x"}},
                {"type": "text", "text": "part two"}
            ]},
            {"role": "tool", "content": "tool output", "tool_call_id": "c"}
        ]});
        assert_eq!(last_user_text(&body).as_deref(), Some("part one\npart two"));
        assert_eq!(last_user_text(&json!({"messages": []})), None);
        assert_eq!(last_user_text(&json!("not an object")), None);
    }

    #[test]
    fn substitute_replaces_resolvable_placeholders_and_keeps_the_rest() {
        let text = r#"<file path="a.rs" id="0badf00d"> <file path="b.rs" id="cafe1234">"#;
        let (out, missing) = substitute(
            "{{file_id:a.rs}}/{{file_id:b.rs}}/{{file_id:c.rs}}/{{file_id:",
            Some(text),
        );
        assert_eq!(out, "0badf00d/cafe1234/{{file_id:c.rs}}/{{file_id:");
        assert_eq!(missing, vec!["c.rs".to_string()]);
    }

    #[test]
    fn only_the_last_user_message_is_searched() {
        // The system message has src/a.rs followed by an id, the user message does not.
        let mut reply = Reply::sse().content("{{file_id:src/a.rs}}");
        let missing = substitute_reply(&mut reply, &body_with_user("edit src/a.rs please"));
        assert_eq!(missing, vec!["src/a.rs".to_string()]);
        let mut reply = Reply::sse().content("{{file_id:src/a.rs}}");
        let missing = substitute_reply(&mut reply, &body_with_user("src/a.rs id=12345678"));
        assert!(missing.is_empty());
        assert_eq!(reply.stream.unwrap()[0], Step::Content("12345678".into()));
    }

    #[test]
    fn split_fragments_never_cuts_a_placeholder_and_concatenates_back() {
        let s =
            r#"{"edits":[{"path":"src/a.rs","file_id":"{{file_id:src/a.rs}}","old_string":"é"}]}"#;
        for n in 1..=s.chars().count() + 3 {
            let pieces = split_fragments(s, n);
            assert_eq!(pieces.concat(), s, "n={n}");
            assert!(pieces.len() <= n.max(1), "n={n}");
            assert!(pieces.iter().all(|p| !p.is_empty()), "n={n}");
            let whole = pieces
                .iter()
                .filter(|p| p.contains("{{file_id:src/a.rs}}"))
                .count();
            assert_eq!(whole, 1, "placeholder cut with n={n}: {pieces:?}");
        }
        assert_eq!(split_fragments("abcdef", 3), vec!["ab", "cd", "ef"]);
        assert_eq!(split_fragments("", 4), vec![""]);
    }
}
