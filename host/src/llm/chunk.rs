//! One streamed chunk (the JSON of an SSE `data:` line) → [`StreamEvent`]s.

use std::borrow::Cow;

use serde_json::Value;

use super::{StreamEvent, Usage};

/// What a chunk said besides events: a provider error reported inside the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkError {
    /// `error.code` as text (OpenRouter sends numbers or strings).
    pub code: String,
    /// `error.message`; empty when the provider sent none.
    pub message: String,
}

/// One chunk in its common shape (text, reasoning, a finish reason), read straight from the
/// payload: the text is borrowed from it and nothing else is kept. Fields it does not name are
/// skipped without being built.
#[derive(serde::Deserialize)]
struct Plain<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Obj<PlainChoice<'a>>>>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    usage: Option<serde::de::IgnoredAny>,
}

/// A `T` read only from a JSON object (a derived struct would also take an array, by position,
/// where [`parse`] sees no fields).
struct Obj<T>(T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct PlainChoice<'a> {
    #[serde(borrow, default)]
    delta: Option<Obj<PlainDelta<'a>>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct PlainDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    reasoning_details: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    tool_calls: Option<serde::de::IgnoredAny>,
}

/// Parses one `data:` payload of the common shape — text and reasoning deltas and a finish
/// reason, as nearly every chunk of a reply is — without building a JSON tree: the same events
/// [`parse`] gives the payload as a [`Value`]. `None` for anything else (not that shape, an
/// error, usage, tool calls, `reasoning_details`, more than one choice, not JSON): parse it as a
/// `Value` then. (Fields it does not read are only checked to be JSON, so one nested deeper than
/// the tree's depth limit or holding an out-of-range number does not fail the chunk.)
pub fn parse_plain(data: &str) -> Option<Vec<StreamEvent>> {
    let Obj(chunk): Obj<Plain<'_>> = serde_json::from_str(data).ok()?;
    if chunk.error.is_some() || chunk.usage.is_some() {
        return None;
    }
    let mut out = Vec::new();
    let choices = chunk.choices.unwrap_or_default();
    if choices.len() > 1 {
        return None;
    }
    let Some(Obj(choice)) = choices.into_iter().next() else {
        return Some(out);
    };
    if choice.error.is_some() || choice.finish_reason.as_deref() == Some("error") {
        return None;
    }
    if let Some(Obj(delta)) = choice.delta {
        if delta.reasoning_details.is_some() || delta.tool_calls.is_some() {
            return None;
        }
        if let Some(r) = delta.reasoning.filter(|r| !r.is_empty()) {
            out.push(StreamEvent::Reasoning(r.into_owned()));
        }
        if let Some(c) = delta.content.filter(|c| !c.is_empty()) {
            out.push(StreamEvent::Text(c.into_owned()));
        }
    }
    if let Some(reason) = choice.finish_reason {
        out.push(StreamEvent::Finish(reason.into_owned()));
    }
    Some(out)
}

/// Parses one chunk. An `error` object (sent after HTTP 200 when a provider fails mid-stream) or a
/// `finish_reason` of `error` is returned as `Err`.
pub fn parse(chunk: &Value) -> Result<Vec<StreamEvent>, ChunkError> {
    if let Some(err) = chunk.get("error").filter(|e| e.is_object()) {
        return Err(chunk_error(err));
    }
    let mut out = Vec::new();
    if let Some(choice) = chunk
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    {
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        // OpenRouter may send the same reasoning as `reasoning` and in `reasoning_details`: take one.
        match delta
            .get("reasoning")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(r) => out.push(StreamEvent::Reasoning(r.to_string())),
            None => {
                for d in delta
                    .get("reasoning_details")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let text = d
                        .get("text")
                        .or_else(|| d.get("summary"))
                        .and_then(Value::as_str);
                    if let Some(t) = text.filter(|t| !t.is_empty()) {
                        out.push(StreamEvent::Reasoning(t.to_string()));
                    }
                }
            }
        }
        if let Some(c) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.push(StreamEvent::Text(c.to_string()));
        }
        for (pos, tc) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(pos as u64);
            let f = tc.get("function").unwrap_or(&Value::Null);
            out.push(StreamEvent::ToolCall {
                index,
                id: tc
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
                arguments: f
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        }
        match choice.get("finish_reason").and_then(Value::as_str) {
            Some("error") => {
                let err = choice
                    .get("error")
                    .or_else(|| chunk.get("error"))
                    .unwrap_or(&Value::Null);
                let mut e = chunk_error(err);
                if e.message.is_empty() {
                    e.message = "the provider reported an error mid-stream".into();
                }
                return Err(e);
            }
            Some(reason) => out.push(StreamEvent::Finish(reason.to_string())),
            None => {}
        }
    }
    if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
        out.push(StreamEvent::Usage(usage(u)));
    }
    Ok(out)
}

fn chunk_error(err: &Value) -> ChunkError {
    let code = match err.get("code") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    ChunkError { code, message }
}

fn usage(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = n(u.get("prompt_tokens"));
    let completion = n(u.get("completion_tokens"));
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_tokens: n(u
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))),
        total_tokens: u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion),
        cost: u.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
        ..Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_reasoning_tools_finish_usage() {
        let c = json!({"choices":[{"delta":{"content":"Hi","reasoning":"think","reasoning_details":[{"type":"reasoning.text","text":"think"}],
            "tool_calls":[{"index":1,"id":"c1","function":{"name":"edit_file","arguments":"{\"a\""}}]},"finish_reason":null}]});
        assert_eq!(
            parse(&c).unwrap(),
            vec![
                StreamEvent::Reasoning("think".into()),
                StreamEvent::Text("Hi".into()),
                StreamEvent::ToolCall {
                    index: 1,
                    id: Some("c1".into()),
                    name: Some("edit_file".into()),
                    arguments: "{\"a\"".into()
                },
            ]
        );
        let u = json!({"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,
            "prompt_tokens_details":{"cached_tokens":4},"cost":0.01}});
        let ev = parse(&u).unwrap();
        assert_eq!(ev[0], StreamEvent::Finish("stop".into()));
        assert_eq!(
            ev[1],
            StreamEvent::Usage(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_tokens: 4,
                total_tokens: 15,
                cost: 0.01,
                ..Usage::default()
            })
        );
        let details_only = json!({"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.summary","summary":"sum"}]}}]});
        assert_eq!(
            parse(&details_only).unwrap(),
            vec![StreamEvent::Reasoning("sum".into())]
        );
    }

    /// The plain-shape reader gives exactly what `parse` gives, and leaves every other shape to it.
    #[test]
    fn plain_chunks_read_as_parse_reads_them() {
        let same = [
            r#"{"id":"g","object":"chat.completion.chunk","created":1,"model":"m","provider":"p","choices":[{"index":0,"delta":{"role":"assistant","content":"word1 "},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":"esc\"aped\n\u00e9"}}]}"#,
            r#"{"choices":[{"delta":{"content":"","reasoning":"hmm"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":null,"finish_reason":""}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":null,"error":null,"usage":null}"#,
            r#"{}"#,
            r#"{"a":1,"a":2}"#,
        ];
        for data in same {
            let value: Value = serde_json::from_str(data).unwrap();
            assert_eq!(parse_plain(data), Some(parse(&value).unwrap()), "{data}");
        }
        let other = [
            r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}"#,
            r#"{"error":{"code":502,"message":"x"}}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"error"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[{"text":"t"}]}}]}"#,
            r#"{"choices":[{"delta":{"content":1}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
            r#"{"choices":[[{"content":"x"}]]}"#,
            r#"[[{"delta":{"content":"x"}}]]"#,
            r#"{"choices":{"0":{}}}"#,
            "not json",
        ];
        for data in other {
            assert_eq!(parse_plain(data), None, "{data}");
        }
    }

    #[test]
    fn errors_inside_the_stream() {
        let e = parse(&json!({"error":{"code":502,"message":"upstream died"},"choices":[{"delta":{"content":""},"finish_reason":"error"}]})).unwrap_err();
        assert_eq!(
            e,
            ChunkError {
                code: "502".into(),
                message: "upstream died".into()
            }
        );
        let e = parse(&json!({"choices":[{"delta":{},"finish_reason":"error"}]})).unwrap_err();
        assert!(!e.message.is_empty());
        let e = parse(&json!({"error":{"code":"rate_limited","message":"slow down"}})).unwrap_err();
        assert_eq!(e.code, "rate_limited");
    }
}
