//! The mock over real sockets: exact bytes, HTTP chunk boundaries, connection behaviour, recording.

mod client;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bb7_mock_llm::{
    LineEnds, MockServer, OPENROUTER_PROCESSING, Outcome, Reply, Script, Step, ToolCall,
    ToolCallDelta, Usage, Weak, insufficient_credits_message,
};
use client::{Chunk, Conn, chat_body, get, post_chat};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn server(replies: impl IntoIterator<Item = Reply>) -> MockServer {
    MockServer::start(Script::new(replies))
}

/// The concatenated `function.arguments` of every tool-call delta with this index.
fn arguments_of(chunks: &[Value], index: u64) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter(|t| t["index"] == index)
        .filter_map(|t| t["function"]["arguments"].as_str())
        .collect()
}

#[test]
fn text_reply_streams_openrouter_chunks_then_usage_then_done() {
    let mock = server([Reply::text(["Hel", "lo"])]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.complete, "the body ends with the terminating chunk");
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    assert!(r.events().iter().all(|e| e.starts_with("data: ")));

    let data = r.data();
    assert_eq!(data.len(), 4, "two contents, finish, usage: {data:?}");
    for chunk in &data {
        assert_eq!(chunk["id"], "gen-mock-0");
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["created"], 1_700_000_000);
        assert_eq!(
            chunk["model"], "openai/gpt-test",
            "the request's model is echoed"
        );
    }
    let contents: Vec<&str> = data[..2]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Hel", "lo"]);
    assert!(data[0]["choices"][0]["finish_reason"].is_null());
    assert_eq!(data[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(data[2]["choices"][0]["native_finish_reason"], "stop");
    let usage = &data[3];
    assert_eq!(
        usage["choices"][0]["finish_reason"], "stop",
        "repeated in the usage chunk"
    );
    assert_eq!(usage["usage"]["prompt_tokens"], 100);
    assert_eq!(usage["usage"]["completion_tokens"], 20);
    assert_eq!(usage["usage"]["total_tokens"], 120);
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 40);
    assert_eq!(usage["usage"]["cost"], 0.00042);
    assert_eq!(mock.wait_for_outcome(0, WAIT), Some(Outcome::Completed));
}

#[test]
fn every_write_is_its_own_http_chunk_with_exact_bytes() {
    let mock = server([Reply::sse()
        .processing()
        .data_nospace(json!({"a": 1}))
        .data(json!({"b": [true]}))
        .comment("keep-alive")
        .delay_ms(20)
        .done()]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    let chunks: Vec<&[u8]> = r.chunks.iter().map(Vec::as_slice).collect();
    assert_eq!(
        chunks,
        [
            format!(": {OPENROUTER_PROCESSING}\n\n").as_bytes(),
            b"data:{\"a\":1}\n\n".as_slice(),
            b"data: {\"b\":[true]}\n\n".as_slice(),
            b": keep-alive\n\n".as_slice(),
            b"data: [DONE]\n\n".as_slice(),
        ]
    );
    assert!(r.complete);
}

#[test]
fn cr_line_ends_send_every_line_end_as_a_bare_cr() {
    let mock = server([Reply::sse()
        .data_nospace(json!({"a": 1}))
        .comment("keep-alive")
        .raw("data: x\n\n")
        .done()
        .line_ends(LineEnds::Cr)]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    let chunks: Vec<&[u8]> = r.chunks.iter().map(Vec::as_slice).collect();
    assert_eq!(
        chunks,
        [
            b"data:{\"a\":1}\r\r".as_slice(),
            b": keep-alive\r\r".as_slice(),
            b"data: x\r\r".as_slice(),
            b"data: [DONE]\r\r".as_slice(),
        ]
    );
    assert!(r.complete);
    // In a script: `"line_ends": "cr"`; the default is left out.
    let script = Script::from_json(r#"{"replies": [{"stream": ["done"], "line_ends": "cr"}]}"#)
        .expect("script");
    assert_eq!(script.replies[0].line_ends, LineEnds::Cr);
    let plain = serde_json::to_value(Reply::sse().done()).expect("json");
    assert!(plain.get("line_ends").is_none(), "{plain}");
}

#[test]
fn split_writes_arrive_as_separate_chunks_even_mid_line_and_mid_utf8() {
    let event = "data: {\"choices\":[{\"delta\":{\"content\":\"héllo\"}}]}\n\n";
    let mid_e = event.find('é').unwrap() + 1;
    let mock = server([Reply::sse()
        .raw("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}")
        .raw("\n\n")
        .split(Step::Raw(event.into()), [5, mid_e])
        .split(Step::Content("whole".into()), [1, 2, 3])]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert!(r.complete);
    assert_eq!(
        r.chunks.len(),
        9,
        "two raw writes, three pieces, four pieces"
    );
    assert_eq!(
        r.chunks[0],
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}"
    );
    assert_eq!(r.chunks[1], b"\n\n");
    assert_eq!(r.chunks[2], b"data:");
    assert!(
        std::str::from_utf8(&r.chunks[3]).is_err(),
        "cut between the bytes of é"
    );
    assert_eq!(
        [&r.chunks[2][..], &r.chunks[3], &r.chunks[4]].concat(),
        event.as_bytes()
    );
    assert_eq!(r.chunks[5], b"d");
    assert_eq!(r.chunks[6], b"a");
    assert_eq!(r.chunks[7], b"t");
    let contents: Vec<Value> = r
        .data()
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].clone())
        .collect();
    assert_eq!(contents, [json!("a"), json!("héllo"), json!("whole")]);
}

#[test]
fn truncate_closes_without_the_terminating_chunk() {
    let mock = server([
        Reply::sse()
            .content("Hel")
            .raw("data: {\"choi")
            .truncate()
            .content("never sent"),
        Reply::text(["after"]),
    ]);
    let mut conn = Conn::open(mock.addr());
    conn.send(
        "POST",
        "/api/v1/chat/completions",
        &[("Content-Type", "application/json")],
        chat_body("hi").to_string().as_bytes(),
    );
    let r = conn.read_response();
    assert_eq!(r.status, 200);
    assert!(!r.complete, "no terminating chunk");
    assert_eq!(r.chunks.len(), 2);
    assert_eq!(r.chunks[1], b"data: {\"choi");
    assert!(!r.text().contains("never sent"));
    assert!(
        conn.is_closed(),
        "the connection is closed although the client asked for keep-alive"
    );
    assert_eq!(mock.wait_for_outcome(0, WAIT), Some(Outcome::Truncated));

    // The server goes on serving.
    let next = post_chat(mock.addr(), &chat_body("again"));
    assert!(next.complete);
    assert_eq!(next.data()[0]["choices"][0]["delta"]["content"], "after");
}

#[test]
fn truncate_before_any_data_sends_only_the_head() {
    let mock = server([Reply::sse().truncate()]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.chunks.is_empty());
    assert!(!r.complete);
}

#[test]
fn rate_limited_with_retry_after_then_success() {
    let mock = server([Reply::rate_limited(2), Reply::text(["ok"])]);
    let first = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(first.status, 429);
    assert_eq!(first.header("retry-after"), Some("2"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    let error = first.json();
    assert_eq!(error["error"]["code"], 429);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Rate limit")
    );

    let second = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(second.status, 200);
    assert_eq!(second.data()[0]["choices"][0]["delta"]["content"], "ok");
    let requests = mock.requests();
    assert_eq!(requests[0].reply, Some(0));
    assert_eq!(requests[1].reply, Some(1));
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn error_statuses_carry_openrouter_error_bodies() {
    let mock = server([
        Reply::insufficient_credits(16384, 3919),
        Reply::unauthorized(),
        Reply::plain(502, "<html>Bad gateway</html>"),
        Reply::error(503, "No endpoints found").header("X-Extra", "yes"),
    ]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 402);
    assert_eq!(
        r.json(),
        json!({"error": {
            "code": 402,
            "message": "This request requires more credits, or fewer max_tokens. You requested up to 16384 tokens, but can only afford 3919. To increase, visit https://openrouter.ai/settings/credits and upgrade to a paid account",
            "metadata": {"provider_name": null}
        }})
    );
    assert_eq!(
        r.json()["error"]["message"],
        insufficient_credits_message(16384, 3919)
    );
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json(),
        json!({"error": {"code": 401, "message": "No auth credentials found"}})
    );
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 502);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.text(), "<html>Bad gateway</html>");
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 503);
    assert_eq!(r.header("x-extra"), Some("yes"));
    assert_eq!(r.json()["error"]["message"], "No endpoints found");
}

#[test]
fn error_chunk_after_http_200_with_numeric_or_string_code() {
    let mock = server([
        Reply::error_after_text(["partial "], 502, "Provider returned error"),
        Reply::error_after_text(["x"], "server_error", "Provider disconnected unexpectedly"),
    ]);
    for (code, message) in [
        (json!(502), "Provider returned error"),
        (json!("server_error"), "Provider disconnected unexpectedly"),
    ] {
        let r = post_chat(mock.addr(), &chat_body("hi"));
        assert_eq!(r.status, 200);
        assert!(r.complete);
        let data = r.data();
        let last = data.last().unwrap();
        assert_eq!(last["error"], json!({"code": code, "message": message}));
        assert_eq!(last["choices"][0]["finish_reason"], "error");
        assert_eq!(last["choices"][0]["delta"], json!({"content": ""}));
        assert_eq!(last["object"], "chat.completion.chunk");
        assert!(!r.text().contains("[DONE]"));
    }
}

#[test]
fn stream_without_finish_reason_ends_with_done_only() {
    let mock = server([Reply::without_finish(["a", "b"])]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert!(r.complete);
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    assert!(
        r.data()
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null() && c.get("usage").is_none())
    );
}

#[test]
fn reasoning_deltas_carry_reasoning_and_reasoning_details() {
    let mock = server([Reply::reasoning_then_text(["Think", "ing"], ["Answer"])]);
    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    let delta = &data[0]["choices"][0]["delta"];
    assert_eq!(delta["reasoning"], "Think");
    assert_eq!(delta["content"], "");
    assert_eq!(
        delta["reasoning_details"],
        json!([{"type": "reasoning.text", "text": "Think", "format": "unknown", "index": 0}])
    );
    assert_eq!(data[1]["choices"][0]["delta"]["reasoning"], "ing");
    assert_eq!(data[2]["choices"][0]["delta"]["content"], "Answer");
}

#[test]
fn tool_calls_fragmented_interleaved_repeated_whole_and_invalid() {
    let a = ToolCall::new(
        0,
        "call_a",
        "write_file",
        r#"{"path":"a.txt","content":"A"}"#,
    )
    .fragments(4);
    let b = ToolCall::new(
        1,
        "call_b",
        "write_file",
        r#"{"path":"b.txt","content":"B"}"#,
    )
    .fragments(4)
    .repeat_id_name();
    let whole = ToolCall::new(0, "call_w", "list_files", r#"{"path":"."}"#);
    let invalid = ToolCall::new(0, "call_i", "edit_file", r#"{"edits": [{"path": "x"#).fragments(2);
    let mock = server([
        Reply::interleaved_tool_calls([a.clone(), b.clone()]),
        Reply::tool_calls([whole.clone()]),
        Reply::tool_calls([invalid.clone()]),
    ]);

    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    let calls: Vec<&Value> = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    let order: Vec<u64> = calls.iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(arguments_of(&data, 0), a.arguments);
    assert_eq!(arguments_of(&data, 1), b.arguments);
    let with_id = |index: u64| {
        calls
            .iter()
            .filter(|c| c["index"] == index && c.get("id").is_some())
            .count()
    };
    assert_eq!(with_id(0), 1, "call a names itself once");
    assert_eq!(
        with_id(1),
        4,
        "call b repeats id and name on every fragment"
    );
    assert!(
        calls
            .iter()
            .filter(|c| c["index"] == 1)
            .all(|c| c["function"]["name"] == "write_file")
    );
    let finish = data
        .iter()
        .find(|c| c["choices"][0]["finish_reason"].is_string())
        .unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");

    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    let call = &data[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["id"], "call_w");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "list_files");
    assert_eq!(call["function"]["arguments"], whole.arguments);

    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    let args = arguments_of(&data, 0);
    assert_eq!(args, invalid.arguments);
    assert!(serde_json::from_str::<Value>(&args).is_err());
}

#[test]
fn exact_tool_call_deltas_are_sent_as_given() {
    let mock = server([Reply::sse().tool_call_delta(ToolCallDelta {
        index: 3,
        id: None,
        name: Some("read_file".into()),
        arguments: None,
    })]);
    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    assert_eq!(
        data[0]["choices"][0]["delta"]["tool_calls"],
        json!([{"index": 3, "function": {"name": "read_file"}}])
    );
}

#[test]
fn file_id_placeholder_is_filled_from_the_last_user_message() {
    let call = ToolCall::edit_file(
        0,
        "call_1",
        &[
            ("src/main.rs", "{{file_id:src/main.rs}}", "a", "b"),
            ("src/missing.rs", "{{file_id:src/missing.rs}}", "c", "d"),
        ],
    )
    .fragments(7);
    let mock = server([Reply::tool_calls([call])]);
    let user = r#"Please edit.
<file path="src/main.rs" id="0a1b2c3d" tokens="12">
fn main() {}
</file>"#;
    let data = post_chat(mock.addr(), &chat_body(user)).data();
    let args: Value = serde_json::from_str(&arguments_of(&data, 0)).unwrap();
    assert_eq!(args["edits"][0]["path"], "src/main.rs");
    assert_eq!(args["edits"][0]["file_id"], "0a1b2c3d");
    assert_eq!(
        args["edits"][1]["file_id"], "{{file_id:src/missing.rs}}",
        "unresolved stays"
    );
    let recorded = &mock.requests()[0];
    assert_eq!(recorded.unresolved_placeholders, ["src/missing.rs"]);
}

#[test]
fn requests_are_recorded_with_headers_and_json_bodies() {
    let mock = server([Reply::text(["x"])]);
    let body = chat_body("record me");
    let mut conn = Conn::open(mock.addr());
    conn.send(
        "POST",
        "/api/v1/chat/completions?trace=1",
        &[
            ("Authorization", "Bearer sk-or-v1-abc"),
            ("HTTP-Referer", "https://github.com/bb7"),
            ("X-Title", "BB-7"),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    );
    assert!(conn.read_response().complete);
    let requests = mock.wait_for_requests(1, WAIT);
    let r = &requests[0];
    assert_eq!(r.index, 0);
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/api/v1/chat/completions");
    assert_eq!(r.query.as_deref(), Some("trace=1"));
    assert_eq!(r.authorization(), Some("Bearer sk-or-v1-abc"));
    assert_eq!(r.header("x-title"), Some("BB-7"));
    assert_eq!(r.header("HTTP-Referer"), Some("https://github.com/bb7"));
    assert_eq!(r.body, body);
    assert_eq!(r.body_text, body.to_string());
    assert!(r.is_chat());
    assert_eq!(mock.chat_requests().len(), 1);
}

#[test]
fn models_credits_and_key_have_defaults_and_can_be_replaced() {
    let mock = server([]);
    let models = get(mock.addr(), "/api/v1/models");
    assert_eq!(models.status, 200);
    let models = models.json();
    assert_eq!(models["data"][0]["id"], "mock/model");
    assert_eq!(models["data"][1]["context_length"], 200_000);
    assert!(models["data"][0]["pricing"]["prompt"].is_string());
    let credits = get(mock.addr(), "/api/v1/credits").json();
    assert_eq!(
        credits,
        json!({"data": {"total_credits": 10.0, "total_usage": 2.5}})
    );
    assert_eq!(
        get(mock.addr(), "/api/v1/key").json()["data"]["is_free_tier"],
        false
    );
    assert_eq!(get(mock.addr(), "/api/v1/auth/key").status, 200);
    assert_eq!(get(mock.addr(), "/v1/models").status, 200);

    mock.set_credits(Reply::unauthorized());
    mock.set_key(Reply::json(200, json!({"data": {"limit": 1.0}})));
    assert_eq!(get(mock.addr(), "/api/v1/credits").status, 401);
    assert_eq!(
        get(mock.addr(), "/api/v1/key").json(),
        json!({"data": {"limit": 1.0}})
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    assert!(
        requests
            .iter()
            .all(|r| r.method == "GET" && !r.is_chat() && r.reply.is_none())
    );
    assert_eq!(requests[1].authorization(), Some("Bearer sk-or-v1-test"));
}

#[test]
fn unknown_paths_and_wrong_methods_get_error_json_and_use_no_reply() {
    let mock = server([Reply::text(["kept"])]);
    let r = get(mock.addr(), "/api/v1/nowhere");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], 404);
    let r = get(mock.addr(), "/api/v1/chat/completions");
    assert_eq!(r.status, 405);
    assert_eq!(mock.remaining(), 1);
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn empty_queue_answers_500_and_a_fallback_is_served_every_time() {
    let mock = server([Reply::text(["one"])]);
    assert_eq!(post_chat(mock.addr(), &chat_body("1")).status, 200);
    let r = post_chat(mock.addr(), &chat_body("2"));
    assert_eq!(r.status, 500);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no reply left")
    );

    mock.set_fallback(Some(Reply::text(["again"])));
    for _ in 0..2 {
        let r = post_chat(mock.addr(), &chat_body("3"));
        assert_eq!(r.data()[0]["choices"][0]["delta"]["content"], "again");
    }
    mock.push(Reply::text(["pushed"]));
    let r = post_chat(mock.addr(), &chat_body("4"));
    assert_eq!(r.data()[0]["choices"][0]["delta"]["content"], "pushed");
    let replies: Vec<Option<usize>> = mock.requests().iter().map(|r| r.reply).collect();
    assert_eq!(replies, [Some(0), None, None, None, Some(1)]);
}

#[test]
fn invalid_json_body_is_refused_without_using_a_reply() {
    let mock = server([Reply::text(["kept"])]);
    let mut conn = Conn::open(mock.addr());
    conn.send(
        "POST",
        "/api/v1/chat/completions",
        &[("Connection", "close")],
        b"{not json",
    );
    let r = conn.read_response();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], 400);
    assert_eq!(mock.remaining(), 1);
    let recorded = &mock.requests()[0];
    assert_eq!(recorded.body, Value::Null);
    assert_eq!(recorded.body_text, "{not json");
}

#[test]
fn garbage_and_half_sent_requests_do_not_stop_the_server() {
    let mock = server([Reply::text(["fine"])]);
    let mut conn = Conn::open(mock.addr());
    conn.write_raw(b"NOT HTTP AT ALL\r\n\r\n");
    let (status, _) = conn
        .read_head()
        .expect("hyper answers a request it cannot parse");
    assert_eq!(status, 400);
    assert!(conn.is_closed());
    // Headers promise 1000 bytes; the client sends 10 and leaves.
    let mut conn = Conn::open(mock.addr());
    conn.write_raw(
        b"POST /api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\":",
    );
    drop(conn);
    // A client that connects and leaves at once.
    drop(Conn::open(mock.addr()));

    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 200);
    assert_eq!(r.data()[0]["choices"][0]["delta"]["content"], "fine");
}

#[test]
fn keep_alive_serves_several_streams_on_one_connection() {
    let mock = server([Reply::text(["first"]), Reply::text(["second"])]);
    let mut conn = Conn::open(mock.addr());
    for expected in ["first", "second"] {
        conn.send(
            "POST",
            "/v1/chat/completions",
            &[("Content-Type", "application/json")],
            chat_body("hi").to_string().as_bytes(),
        );
        let r = conn.read_response();
        assert!(r.complete);
        assert_eq!(r.data()[0]["choices"][0]["delta"]["content"], expected);
    }
}

#[test]
fn client_cancelling_a_slow_stream_is_recorded_and_the_server_goes_on() {
    let parts: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let mock = server([Reply::slow_text(parts, 50), Reply::text(["next"])]);
    let mut conn = Conn::open(mock.addr());
    conn.send(
        "POST",
        "/api/v1/chat/completions",
        &[("Content-Type", "application/json")],
        chat_body("hi").to_string().as_bytes(),
    );
    let (status, _) = conn.read_head().unwrap();
    assert_eq!(status, 200);
    let Chunk::Data(first) = conn.read_chunk() else {
        panic!("expected a first chunk");
    };
    assert!(String::from_utf8(first).unwrap().contains("w0 "));
    drop(conn);
    assert_eq!(mock.wait_for_outcome(0, WAIT), Some(Outcome::ClientGone));
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.data()[0]["choices"][0]["delta"]["content"], "next");
}

#[test]
fn stall_holds_the_connection_until_the_client_gives_up() {
    let mock = server([Reply::sse().content("a").stall().content("never")]);
    let mut conn = Conn::open(mock.addr());
    conn.send(
        "POST",
        "/api/v1/chat/completions",
        &[("Content-Type", "application/json")],
        chat_body("hi").to_string().as_bytes(),
    );
    conn.read_head().unwrap();
    assert!(matches!(conn.read_chunk(), Chunk::Data(_)));
    // The stream neither ends nor goes on while it stalls.
    let settled = |r: &[bb7_mock_llm::RecordedRequest]| {
        r.first().is_some_and(|r| r.outcome != Outcome::Responding)
    };
    assert!(!mock.wait_until(Duration::from_millis(300), settled));
    drop(conn);
    assert_eq!(mock.wait_for_outcome(0, WAIT), Some(Outcome::ClientGone));
}

#[test]
fn stall_times_out_into_a_truncated_body() {
    let mock = MockServer::start(
        Script::new([Reply::sse().content("a").stall().content("never").done()])
            .with_stall_timeout_ms(200),
    );
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.chunks.len(), 1);
    assert!(!r.complete);
    assert!(!r.text().contains("never"));
    assert_eq!(mock.wait_for_outcome(0, WAIT), Some(Outcome::Truncated));
}

#[test]
fn reply_envelope_and_custom_usage_are_honoured() {
    let usage = Usage {
        total_tokens: Some(999),
        ..Usage::new(7, 3).cached(5).reasoning(2).cost(1.5)
    };
    let mock = server([Reply::sse()
        .id("gen-xyz")
        .model("anthropic/claude-test")
        .content("x")
        .usage(usage)
        .done()]);
    let data = post_chat(mock.addr(), &chat_body("hi")).data();
    assert!(
        data.iter()
            .all(|c| c["id"] == "gen-xyz" && c["model"] == "anthropic/claude-test")
    );
    let u = &data[1];
    assert_eq!(
        u["choices"],
        json!([]),
        "no finish reason repeated: empty choices"
    );
    assert_eq!(u["usage"]["total_tokens"], 999);
    assert_eq!(u["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
    assert_eq!(
        u["usage"]["completion_tokens_details"]["reasoning_tokens"],
        2
    );
    assert_eq!(u["usage"]["cost"], 1.5);
}

#[test]
fn non_streaming_completion_body() {
    let mock = server([Reply::completion("A title")]);
    let r = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(r.body().len().to_string().as_str())
    );
    let body = r.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "A title");
}

#[test]
fn json_scripts_parse_check_and_round_trip() {
    let demo = Script::load(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.json")).unwrap();
    assert_eq!(demo.replies.len(), 2);
    assert!(demo.fallback.is_some());
    let first = demo.replies[0].stream.as_ref().unwrap();
    assert!(first.contains(&Step::Comment(OPENROUTER_PROCESSING.into())));
    assert!(first.iter().any(|s| matches!(s, Step::Reasoning(_))));
    let Some(Step::ToolCall(call)) = first.iter().find(|s| matches!(s, Step::ToolCall(_))) else {
        panic!("the demo has an edit_file call");
    };
    assert_eq!(call.name, "edit_file");
    let args: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(args["edits"][0]["file_id"], "{{file_id:src/main.rs}}");
    assert_eq!(
        args["edits"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["file_id", "new_string", "old_string", "path"]
    );

    let text = r#"{"replies": [
        {"status": 429, "headers": {"Retry-After": "2"}, "body": {"error": {"code": 429, "message": "slow down"}}},
        {"stream": [{"comment": "OPENROUTER PROCESSING"}, {"data_nospace": {"x": 1}}, {"raw_bytes": [255]},
                    {"split": {"at": [3], "step": {"content": "hi"}}}, {"delay_ms": 5}, "stall", "truncate", "done",
                    {"tool_call_delta": {"index": 0, "arguments": "{"}}, {"error": {"code": "server_error", "message": "m"}}]}
    ], "stall_timeout_ms": 10}"#;
    let script = Script::from_json(text).unwrap();
    assert_eq!(script.replies[0].status, 429);
    assert_eq!(script.replies[1].stream.as_ref().unwrap().len(), 10);
    assert_eq!(script.stall_timeout_ms, 10);
    assert_eq!(
        script.models,
        Reply::default_models(),
        "defaults fill the fixed endpoints"
    );
    let again = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(again, script);

    let unknown = Script::from_json(r#"{"replies": [{"stream": [], "sttus": 200}]}"#);
    assert!(unknown.unwrap_err().to_string().contains("sttus"));
    let both = Script::from_json(r#"{"replies": [{"body": {}, "stream": []}]}"#);
    assert!(both.unwrap_err().to_string().contains("replies[0]"));
    assert!(Script::from_json(r#"{"replies": [{"status": 42}]}"#).is_err());
}

#[test]
fn binary_serves_a_script_and_exits_when_stdin_closes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bb7-mock-llm"))
        .args([
            "--script",
            concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.json"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start bb7-mock-llm");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let port: u16 = line
        .trim_end()
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    let addr = ([127, 0, 0, 1], port).into();

    let user = r#"<file path="src/main.rs" id="5eedf00d">fn main() {}</file> make it greet BB-7"#;
    let r = post_chat(addr, &chat_body(user));
    assert!(r.complete);
    assert!(r.text().starts_with(": OPENROUTER PROCESSING\n\n"));
    let data = r.data();
    let args: Value = serde_json::from_str(&arguments_of(&data, 0)).unwrap();
    assert_eq!(args["edits"][0]["file_id"], "5eedf00d");
    assert!(
        data.iter()
            .any(|c| c["choices"][0]["delta"]["reasoning"].is_string())
    );
    assert_eq!(get(addr, "/api/v1/credits").status, 200);

    child.stdin.take().unwrap().flush().unwrap(); // dropping it closes the pipe
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bb7-mock-llm did not exit after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
}

#[test]
fn binary_reports_a_bad_script() {
    let dir = std::env::temp_dir().join(format!("bb7-mock-llm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"replies": [{"stream": [{"nope": 1}]}]}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bb7-mock-llm"))
        .arg("--script")
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.json") && stderr.contains("nope"),
        "{stderr}"
    );
}

#[test]
fn a_weak_model_gets_a_call_wrong_once_and_overflows_a_small_context() {
    let call = ToolCall::new(0, "c1", "read_file", r#"{"file_path":"a.txt"}"#);
    let mock = MockServer::start(
        Script::new([Reply::tool_calls([call]), Reply::text(["ok"])]).with_weak(Weak {
            schema_mistakes: 1,
            context_tokens: None,
        }),
    );
    let first = post_chat(mock.addr(), &chat_body("hi"));
    let broken = arguments_of(&first.data(), 0);
    assert!(
        serde_json::from_str::<Value>(&broken).is_err(),
        "cut in half: {broken}"
    );
    let second = post_chat(mock.addr(), &chat_body("hi"));
    assert_eq!(
        arguments_of(&second.data(), 0),
        r#"{"file_path":"a.txt"}"#,
        "the same reply, whole"
    );
    assert_eq!(
        mock.remaining(),
        1,
        "the mistake took nothing from the queue"
    );

    let small = MockServer::start(Script::new([Reply::text(["ok"])]).with_weak(Weak {
        schema_mistakes: 0,
        context_tokens: Some(10),
    }));
    let r = post_chat(small.addr(), &chat_body(&"word ".repeat(20)));
    assert_eq!(r.status, 400);
    assert!(r.text().contains("context length exceeded"), "{}", r.text());
    assert_eq!(small.remaining(), 1);
}
