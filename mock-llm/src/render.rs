//! Turns a reply's [`Step`]s into the exact bytes and pauses the server sends, shaping high-level
//! steps as OpenRouter `chat.completion.chunk` events.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::script::{ErrorChunk, Step, ToolCallDelta, Usage};

/// What the streaming body does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// One write, sent as its own HTTP chunk.
    Write(Vec<u8>),
    /// A pause.
    Delay(Duration),
    /// Close the connection without finishing the body.
    Truncate,
    /// Send nothing until the client leaves or the stall timeout passes, then truncate.
    Stall,
}

/// The fields every chunk of one reply shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `id`.
    pub id: String,
    /// `model`.
    pub model: String,
    /// `created`.
    pub created: u64,
    /// `provider`.
    pub provider: String,
}

impl Envelope {
    /// A chunk with one choice.
    fn chunk(&self, choice: Value) -> Map<String, Value> {
        let mut chunk = Map::new();
        chunk.insert("id".into(), json!(self.id));
        chunk.insert("provider".into(), json!(self.provider));
        chunk.insert("model".into(), json!(self.model));
        chunk.insert("object".into(), json!("chat.completion.chunk"));
        chunk.insert("created".into(), json!(self.created));
        chunk.insert("choices".into(), json!([choice]));
        chunk
    }

    /// A chunk whose only choice has this delta and finish reason.
    pub fn delta_chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        Value::Object(self.chunk(choice(delta, finish)))
    }

    /// The chunk for a content delta.
    pub fn content_chunk(&self, text: &str) -> Value {
        self.delta_chunk(json!({"role": "assistant", "content": text}), None)
    }

    /// The chunk for a reasoning delta.
    pub fn reasoning_chunk(&self, text: &str) -> Value {
        self.delta_chunk(
            json!({
                "role": "assistant",
                "content": "",
                "reasoning": text,
                "reasoning_details": [
                    {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
                ]
            }),
            None,
        )
    }

    /// The chunk for one tool-call delta.
    pub fn tool_call_chunk(&self, delta: &ToolCallDelta) -> Value {
        let mut call = Map::new();
        call.insert("index".into(), json!(delta.index));
        if let Some(id) = &delta.id {
            call.insert("id".into(), json!(id));
            call.insert("type".into(), json!("function"));
        }
        let mut function = Map::new();
        if let Some(name) = &delta.name {
            function.insert("name".into(), json!(name));
        }
        if let Some(arguments) = &delta.arguments {
            function.insert("arguments".into(), json!(arguments));
        }
        call.insert("function".into(), Value::Object(function));
        self.delta_chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            None,
        )
    }

    /// The chunk that ends a reply with `reason`.
    pub fn finish_chunk(&self, reason: &str) -> Value {
        self.delta_chunk(json!({"role": "assistant", "content": ""}), Some(reason))
    }

    /// The usage chunk.
    pub fn usage_chunk(&self, usage: &Usage) -> Value {
        let mut chunk = match &usage.finish_reason {
            Some(reason) => self.chunk(choice(
                json!({"role": "assistant", "content": ""}),
                Some(reason),
            )),
            None => {
                let mut map = self.chunk(Value::Null);
                map.insert("choices".into(), json!([]));
                map
            }
        };
        let total = usage
            .total_tokens
            .unwrap_or(usage.prompt_tokens + usage.completion_tokens);
        chunk.insert(
            "usage".into(),
            json!({
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": total,
                "cost": usage.cost,
                "is_byok": false,
                "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}
            }),
        );
        Value::Object(chunk)
    }

    /// The error chunk OpenRouter sends when generation fails after the 200.
    pub fn error_chunk(&self, error: &ErrorChunk) -> Value {
        let mut chunk = self.chunk(json!({
            "index": 0,
            "delta": {"content": ""},
            "finish_reason": "error",
            "native_finish_reason": "error"
        }));
        chunk.insert(
            "error".into(),
            json!({"code": error.code, "message": error.message}),
        );
        Value::Object(chunk)
    }
}

/// One choice of a chunk.
fn choice(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "index": 0,
        "delta": delta,
        "finish_reason": finish,
        "native_finish_reason": finish,
        "logprobs": null
    })
}

fn event(value: &Value) -> Vec<u8> {
    format!("data: {value}\n\n").into_bytes()
}

/// The actions of a whole stream.
pub(crate) fn render(steps: &[Step], envelope: &Envelope) -> Vec<Action> {
    let mut out = Vec::new();
    for step in steps {
        render_step(step, envelope, &mut out);
    }
    out
}

fn render_step(step: &Step, env: &Envelope, out: &mut Vec<Action>) {
    match step {
        Step::Data(v) => out.push(Action::Write(event(v))),
        Step::DataNospace(v) => out.push(Action::Write(format!("data:{v}\n\n").into_bytes())),
        Step::Comment(text) => out.push(Action::Write(format!(": {text}\n\n").into_bytes())),
        Step::Raw(text) => out.push(Action::Write(text.as_bytes().to_vec())),
        Step::RawBytes(bytes) => out.push(Action::Write(bytes.clone())),
        Step::DelayMs(ms) => out.push(Action::Delay(Duration::from_millis(*ms))),
        Step::Done => out.push(Action::Write(b"data: [DONE]\n\n".to_vec())),
        Step::Truncate => out.push(Action::Truncate),
        Step::Stall => out.push(Action::Stall),
        Step::Content(text) => out.push(Action::Write(event(&env.content_chunk(text)))),
        Step::Reasoning(text) => out.push(Action::Write(event(&env.reasoning_chunk(text)))),
        Step::ToolCall(call) => {
            for delta in call.deltas() {
                out.push(Action::Write(event(&env.tool_call_chunk(&delta))));
            }
        }
        Step::ToolCallDelta(delta) => out.push(Action::Write(event(&env.tool_call_chunk(delta)))),
        Step::Finish(reason) => out.push(Action::Write(event(&env.finish_chunk(reason)))),
        Step::Usage(usage) => out.push(Action::Write(event(&env.usage_chunk(usage)))),
        Step::Error(error) => out.push(Action::Write(event(&env.error_chunk(error)))),
        Step::Split(split) => {
            let mut inner = Vec::new();
            render_step(&split.step, env, &mut inner);
            let mut bytes = Vec::new();
            for action in inner {
                match action {
                    Action::Write(b) => bytes.extend(b),
                    other => out.push(other),
                }
            }
            let mut cuts: Vec<usize> = split
                .at
                .iter()
                .copied()
                .filter(|&c| c > 0 && c < bytes.len())
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut last = 0;
            for cut in cuts {
                out.push(Action::Write(bytes[last..cut].to_vec()));
                last = cut;
            }
            if last < bytes.len() {
                out.push(Action::Write(bytes[last..].to_vec()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Reply, ToolCall};

    fn env() -> Envelope {
        Envelope {
            id: "gen-1".into(),
            model: "m/x".into(),
            created: 7,
            provider: "Mock".into(),
        }
    }

    fn writes(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Write(b) => Some(String::from_utf8(b.clone()).unwrap()),
                _ => None,
            })
            .collect()
    }

    fn parse(event: &str) -> Value {
        serde_json::from_str(event.strip_prefix("data: ").unwrap().trim_end()).unwrap()
    }

    #[test]
    fn content_chunk_has_openrouter_fields() {
        let v = parse(&writes(&render(&[Step::Content("Hi".into())], &env()))[0]);
        assert_eq!(v["id"], "gen-1");
        assert_eq!(v["object"], "chat.completion.chunk");
        assert_eq!(v["created"], 7);
        assert_eq!(v["model"], "m/x");
        assert_eq!(v["choices"][0]["delta"]["content"], "Hi");
        assert_eq!(v["choices"][0]["delta"]["role"], "assistant");
        assert!(v["choices"][0]["finish_reason"].is_null());
        assert!(v["choices"][0]["native_finish_reason"].is_null());
    }

    #[test]
    fn usage_chunk_with_and_without_repeated_finish_reason() {
        let u = Usage::new(10, 5).cached(3).cost(0.25).finish("stop");
        let v = parse(&writes(&render(&[Step::Usage(u.clone())], &env()))[0]);
        assert_eq!(v["usage"]["prompt_tokens"], 10);
        assert_eq!(v["usage"]["completion_tokens"], 5);
        assert_eq!(v["usage"]["total_tokens"], 15);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
        assert_eq!(v["usage"]["cost"], 0.25);
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        let mut bare = u;
        bare.finish_reason = None;
        bare.total_tokens = Some(99);
        let v = parse(&writes(&render(&[Step::Usage(bare)], &env()))[0]);
        assert_eq!(v["choices"], json!([]));
        assert_eq!(v["usage"]["total_tokens"], 99);
    }

    #[test]
    fn tool_call_fragments_carry_id_and_name_once_or_always() {
        let call = ToolCall::new(1, "call_9", "write_file", r#"{"path":"a","content":"b"}"#);
        let once = writes(&render(
            &[Step::ToolCall(call.clone().fragments(3))],
            &env(),
        ));
        assert_eq!(once.len(), 3);
        let deltas: Vec<Value> = once
            .iter()
            .map(|e| parse(e)["choices"][0]["delta"]["tool_calls"][0].clone())
            .collect();
        assert_eq!(deltas[0]["id"], "call_9");
        assert_eq!(deltas[0]["type"], "function");
        assert_eq!(deltas[0]["function"]["name"], "write_file");
        assert!(deltas[1].get("id").is_none() && deltas[1]["function"].get("name").is_none());
        let args: String = deltas
            .iter()
            .map(|d| d["function"]["arguments"].as_str().unwrap())
            .collect();
        assert_eq!(args, call.arguments);
        assert!(deltas.iter().all(|d| d["index"] == 1));

        let always = writes(&render(
            &[Step::ToolCall(call.fragments(3).repeat_id_name())],
            &env(),
        ));
        assert!(always.iter().all(|e| {
            let d = &parse(e)["choices"][0]["delta"]["tool_calls"][0];
            d["id"] == "call_9" && d["function"]["name"] == "write_file"
        }));
    }

    #[test]
    fn interleaved_calls_alternate_by_index() {
        let a = ToolCall::new(0, "a", "write_file", "aaaaaa").fragments(3);
        let b = ToolCall::new(1, "b", "edit_file", "bbbb").fragments(2);
        let reply = Reply::sse().interleave([a, b]);
        let events = writes(&render(reply.stream.as_ref().unwrap(), &env()));
        let order: Vec<u64> = events
            .iter()
            .map(|e| {
                parse(e)["choices"][0]["delta"]["tool_calls"][0]["index"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(order, vec![0, 1, 0, 1, 0]);
    }

    #[test]
    fn error_chunk_keeps_numeric_or_string_code() {
        for code in [json!(502), json!("server_error")] {
            let step = Step::Error(ErrorChunk {
                code: code.clone(),
                message: "Provider disconnected".into(),
            });
            let v = parse(&writes(&render(&[step], &env()))[0]);
            assert_eq!(v["error"]["code"], code);
            assert_eq!(v["error"]["message"], "Provider disconnected");
            assert_eq!(v["choices"][0]["finish_reason"], "error");
            assert_eq!(v["choices"][0]["delta"], json!({"content": ""}));
        }
    }

    #[test]
    fn split_cuts_bytes_at_offsets_in_order() {
        let step = Step::Split(crate::script::Split {
            at: vec![9, 3, 3, 0, 1000],
            step: Box::new(Step::Raw("data: {\"a\":1}\n\n".into())),
        });
        assert_eq!(
            writes(&render(&[step], &env())),
            vec!["dat", "a: {\"a", "\":1}\n\n"]
        );
    }
}
