//! The model client (`bb7::llm`) against the local OpenAI-compatible server, misbehaving the ways
//! OpenRouter does: comments, split and no-space `data:` lines, fragmented and interleaved tool calls,
//! error chunks after HTTP 200, truncation, stalls, 429 with `Retry-After`, 402, 401.

use std::time::Duration;

use bb7::llm::client::StreamSummary;
use bb7::llm::{ClientSettings, LlmClient, LlmError, StreamEvent};
use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use serde_json::json;

const KEY: &str = "sk-or-test-secret-key";

fn client(server: &MockServer) -> LlmClient {
    let mut s = ClientSettings::new(&server.base_url(), KEY);
    s.idle_timeout = Duration::from_millis(800);
    s.backoff_base = Duration::from_millis(20);
    s.backoff_cap = Duration::from_millis(1500);
    LlmClient::new(s).expect("client")
}

fn body() -> serde_json::Value {
    json!({"model": "mock/model", "messages": [{"role": "user", "content": "hi"}]})
}

/// Streams one reply; returns the events seen and the result.
fn run(server: &MockServer) -> (Vec<StreamEvent>, Result<StreamSummary, LlmError>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c = client(server);
    let mut events = Vec::new();
    let result = rt.block_on(c.stream(&body(), |e| events.push(e.clone())));
    (events, result)
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::Text(t) = e {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn text_reasoning_and_usage() {
    let server = MockServer::start(Script::new([Reply::reasoning_then_text(
        ["let me ", "think"],
        ["Hel", "lo"],
    )]));
    let (events, r) = run(&server);
    let summary = r.expect("stream");
    assert_eq!(text_of(&events), "Hello");
    let reasoning: String = events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::Reasoning(t) = e {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(reasoning, "let me think");
    assert_eq!(summary.finish_reason, "stop");
    // The usage frame repeats finish_reason: accounting only, and its numbers come through.
    assert_eq!(summary.usage.prompt_tokens, 100);
    assert_eq!(summary.usage.completion_tokens, 20);
    assert_eq!(summary.usage.cached_tokens, 40);
    assert!((summary.usage.cost - 0.00042).abs() < 1e-12);
    let req = &server.chat_requests()[0];
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.authorization(), Some(format!("Bearer {KEY}").as_str()));
}

#[test]
fn comments_no_space_data_and_events_split_mid_line() {
    let chunk = |t: &str| json!({"choices": [{"delta": {"content": t}, "finish_reason": null}]});
    let reply = Reply::sse()
        .processing()
        .comment("keep-alive")
        .data_nospace(chunk("A"))
        .raw("data: {\"choices\":[{\"delta\":{\"con")
        .raw("tent\":\"B\"},\"finish_reason\":null}]}\n\n")
        .processing()
        .content("C")
        .finish_ok("stop");
    let server = MockServer::start(Script::new([reply]));
    let (events, r) = run(&server);
    r.expect("stream");
    assert_eq!(text_of(&events), "ABC");
}

#[test]
fn tool_calls_fragmented_interleaved_repeated_and_whole() {
    let a = ToolCall::new(
        0,
        "call_a",
        "edit_file",
        r#"{"edits":[{"path":"a.rs","file_id":"1234abcd","old_string":"x","new_string":"y"}]}"#,
    )
    .fragments(7);
    let b = ToolCall::new(
        1,
        "call_b",
        "write_file",
        r#"{"path":"b.rs","content":"fn b() {}\n"}"#,
    )
    .fragments(5)
    .repeat_id_name();
    let server = MockServer::start(Script::new([
        Reply::interleaved_tool_calls([a, b]),
        Reply::tool_calls([ToolCall::new(
            0,
            "call_w",
            "write_file",
            r#"{"path":"w","content":""}"#,
        )]),
    ]));
    let (_, r) = run(&server);
    let s = r.expect("stream");
    assert_eq!(s.finish_reason, "tool_calls");
    assert_eq!(s.tool_calls.len(), 2);
    assert_eq!(
        (s.tool_calls[0].id.as_str(), s.tool_calls[0].name.as_str()),
        ("call_a", "edit_file")
    );
    assert_eq!(
        s.tool_calls[0].arguments.as_ref().unwrap()["edits"][0]["new_string"],
        "y"
    );
    assert_eq!(
        (s.tool_calls[1].id.as_str(), s.tool_calls[1].name.as_str()),
        ("call_b", "write_file")
    );
    assert_eq!(
        s.tool_calls[1].arguments.as_ref().unwrap()["content"],
        "fn b() {}\n"
    );
    let (_, r) = run(&server);
    let s = r.expect("whole call in one chunk");
    assert_eq!(s.tool_calls[0].arguments.as_ref().unwrap()["path"], "w");
}

#[test]
fn invalid_tool_arguments_are_a_tool_error_not_a_crash() {
    let server = MockServer::start(Script::new([Reply::tool_calls([ToolCall::new(
        0,
        "c",
        "write_file",
        "{\"path\": \"x\", oops",
    )
    .fragments(3)])]));
    let (_, r) = run(&server);
    let s = r.expect("the stream itself is fine");
    let err = s.tool_calls[0].arguments.as_ref().unwrap_err();
    assert!(
        matches!(err, bb7::llm::tool_calls::ArgumentsError::InvalidJson(_)),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("the arguments are not valid JSON: "),
        "{err}"
    );
    assert_eq!(s.tool_calls[0].arguments_raw, "{\"path\": \"x\", oops");
}

#[test]
fn an_error_chunk_after_200_is_a_failure() {
    let server = MockServer::start(Script::new([
        Reply::error_after_text(["partial "], 502, "Provider disconnected"),
        Reply::error_after_text([] as [&str; 0], "server_error", "overloaded"),
    ]));
    let (events, r) = run(&server);
    assert_eq!(text_of(&events), "partial ");
    match r {
        Err(LlmError::Stream { code, message }) => {
            assert_eq!(code, "502");
            assert_eq!(message, "Provider disconnected");
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    let (_, r) = run(&server);
    assert!(
        matches!(r, Err(LlmError::Stream { ref code, .. }) if code == "server_error"),
        "{r:?}"
    );
}

#[test]
fn truncated_and_unfinished_streams_are_failures() {
    let server = MockServer::start(Script::new([
        Reply::sse()
            .content("cut ")
            .raw("data: {\"choices\":[{\"del")
            .truncate(),
        Reply::without_finish(["no ", "finish"]),
    ]));
    let (events, r) = run(&server);
    assert_eq!(text_of(&events), "cut ");
    assert_eq!(r, Err(LlmError::Truncated));
    let (_, r) = run(&server);
    assert_eq!(
        r,
        Err(LlmError::Truncated),
        "[DONE] without a finish_reason is not a success"
    );
}

#[test]
fn a_stall_hits_the_idle_timeout() {
    let server = MockServer::start(
        Script::new([Reply::sse().content("waiting").stall()]).with_stall_timeout_ms(30_000),
    );
    let (events, r) = run(&server);
    assert_eq!(text_of(&events), "waiting");
    assert!(
        matches!(r, Err(LlmError::Timeout(ref m)) if m.contains("stalled")),
        "{r:?}"
    );
}

#[test]
fn rate_limits_are_retried_honouring_retry_after() {
    let server = MockServer::start(Script::new([Reply::rate_limited(1), Reply::text(["ok"])]));
    let t = std::time::Instant::now();
    let (events, r) = run(&server);
    r.expect("retried and succeeded");
    assert_eq!(text_of(&events), "ok");
    assert_eq!(server.chat_requests().len(), 2);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "Retry-After: 1 was honoured"
    );
}

#[test]
fn payment_and_auth_errors_are_clear_and_not_retried() {
    let server = MockServer::start(Script::new([
        Reply::insufficient_credits(4000, 1200),
        Reply::unauthorized(),
    ]));
    let (_, r) = run(&server);
    match &r {
        Err(LlmError::Http {
            status: 402,
            message,
        }) => assert!(message.contains("credits"), "{message}"),
        other => panic!("expected a 402, got {other:?}"),
    }
    let (_, r2) = run(&server);
    assert!(
        matches!(r2, Err(LlmError::Http { status: 401, .. })),
        "{r2:?}"
    );
    assert_eq!(server.chat_requests().len(), 2, "neither was retried");
    for e in [r.unwrap_err(), r2.unwrap_err()] {
        assert!(
            !e.to_string().contains(KEY),
            "the API key must never appear in an error: {e}"
        );
    }
}

#[test]
fn retries_are_bounded() {
    let server = MockServer::start(Script::new([]).with_fallback(Reply::error(503, "busy")));
    let (_, r) = run(&server);
    assert!(
        matches!(r, Err(LlmError::Http { status: 503, .. })),
        "{r:?}"
    );
    assert_eq!(server.chat_requests().len(), 4, "one try and three retries");
}
