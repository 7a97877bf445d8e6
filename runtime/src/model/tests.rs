//! Response limits: the assembler's content bound, and the client against
//! loopback servers that never stop.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn limits(max_bytes: usize) -> ResponseLimits {
    ResponseLimits {
        max_bytes,
        max_duration: Duration::from_secs(30),
    }
}

fn text(t: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": t}}]})
}

fn reasoning(t: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"reasoning_content": t}}]})
}

fn arguments(t: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "bash", "arguments": t}}
    ]}}]})
}

#[test]
fn the_assembler_counts_text_reasoning_and_arguments_together() {
    /// `Ok(())` when every chunk fits in `max` bytes, else the index of the
    /// chunk that went past it.
    fn check(chunks: &[Value], max: usize, expected: Result<(), usize>) {
        let mut assembler = Assembler::limited(limits(max));
        let got = match chunks.iter().position(|c| assembler.push(c).is_err()) {
            Some(at) => Err(at),
            None => Ok(()),
        };
        assert_eq!(got, expected, "{chunks:?} within {max}");
    }
    check(
        &[text("abcd"), reasoning("efgh"), arguments("ij")],
        10,
        Ok(()),
    );
    check(
        &[text("abcd"), reasoning("efgh"), arguments("ijk")],
        10,
        Err(2),
    );
    check(&[reasoning("0123456789a")], 10, Err(0));
    check(&[arguments("{\"a\":"), arguments("\"bcdef\"}")], 10, Err(1));
    let mut assembler = Assembler::limited(limits(3));
    assert_eq!(
        assembler.push(&text("abcd")),
        Err(ModelError::Limit(
            "the response carried more than 3 bytes of text, reasoning and tool-call arguments"
                .into()
        ))
    );
    // `new` has no limit.
    let mut unbounded = Assembler::new();
    assert!(unbounded.push(&text(&"x".repeat(1 << 20))).is_ok());
}

/// A loopback server that answers every request with an event stream whose
/// `n`th write is `piece(n)`, forever, `gap` apart, until the client leaves.
async fn endless_server(piece: fn(u64) -> String, gap: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            connection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for n in 0.. {
                    if socket.write_all(piece(n).as_bytes()).await.is_err() {
                        return;
                    }
                    if !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                }
            });
        }
    });
    url
}

fn request() -> ModelRequest {
    ModelRequest {
        system: "s".into(),
        history: Arc::from(Vec::new()),
        turn: vec![Arc::new(crate::message::Message::user("hi".to_string()))],
        reminder: None,
        tools: Arc::from(Vec::new()),
        context: RequestContext {
            agent_id: "main".into(),
            role: "main".into(),
            mode: crate::mode::Mode::Work,
            turn: 1,
            iteration: 1,
            session_id: "s".into(),
            workspace: "/w".into(),
            plan_file: "/p".into(),
        },
        model: None,
        single_attempt: false,
    }
}

/// Streams one request to `url` with `limits` behind the default retry
/// policy and returns how it ended.
async fn ask(url: &str, limits: ResponseLimits) -> Result<ModelResponse, ModelError> {
    let mut config = OpenAiConfig::new(url, "m");
    config.limits = limits;
    let client: Arc<dyn ModelClient> = Arc::new(OpenAiClient::new(config).unwrap());
    let retrying = Retrying::new(client, RetryPolicy::default());
    complete(retrying.stream(request())).await
}

fn sse(chunk: Value) -> String {
    format!("data: {chunk}\n\n")
}

#[tokio::test]
async fn regression_a_model_streaming_text_forever_is_cut_at_the_size_limit() {
    let url = endless_server(|_| sse(text(&"lorem ipsum ".repeat(100))), Duration::ZERO).await;
    assert_eq!(
        ask(&url, limits(64 * 1024)).await,
        Err(ModelError::Limit(
            "the response carried more than 64 KiB of text, reasoning and tool-call arguments"
                .into()
        ))
    );
}

#[tokio::test]
async fn tool_call_arguments_streaming_forever_are_cut_at_the_size_limit() {
    let url = endless_server(|_| sse(arguments("\"aaaaaaaaaaaaaaaa")), Duration::ZERO).await;
    let got = ask(&url, limits(64 * 1024)).await;
    assert!(
        matches!(&got, Err(ModelError::Limit(m)) if m.contains("64 KiB")),
        "{got:?}"
    );
}

#[tokio::test]
async fn one_line_that_never_ends_is_cut_on_the_wire() {
    let url = endless_server(
        |n| match n {
            0 => "data: {\"choices\": [{\"delta\": {\"content\": \"".into(),
            _ => "x".repeat(8192),
        },
        Duration::ZERO,
    )
    .await;
    let got = ask(&url, limits(16 * 1024)).await;
    assert_eq!(
        got,
        Err(ModelError::Limit(
            "one event of the response took more than 96 KiB on the wire".into()
        ))
    );
}

#[tokio::test]
async fn a_response_that_never_ends_is_cut_at_the_wall_time_limit() {
    // Keep-alive comments: the connection is never idle, the answer never comes.
    let url = endless_server(|_| ": ping\n\n".into(), Duration::from_millis(20)).await;
    let started = std::time::Instant::now();
    let got = ask(
        &url,
        ResponseLimits {
            max_bytes: 1024,
            max_duration: Duration::from_millis(300),
        },
    )
    .await;
    assert_eq!(
        got,
        Err(ModelError::Limit(
            "the response took longer than 0.3 s".into()
        ))
    );
    // Not retried: one attempt's worth of time.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_key_that_cannot_be_a_header_is_refused_at_build_not_a_panic() {
    for key in ["sk-abc\n", "sk-\u{7f}", "sk-\r"] {
        let mut config = OpenAiConfig::new("http://127.0.0.1:9/v1", "m");
        config.api_key = Some(key.into());
        match OpenAiClient::new(config) {
            Err(ModelError::Request(message)) => {
                assert!(message.contains("API key"), "{message}");
            }
            other => panic!("{key:?}: {other:?}"),
        }
    }
}

#[test]
fn usage_details_are_read_in_every_shape_and_never_exceed_their_totals() {
    // (cached, reasoning, completion as budgets count it)
    fn check(usage: Value, expected: (u64, u64, u64)) {
        let mut assembler = Assembler::new();
        assembler.push(&json!({ "usage": usage.clone() })).unwrap();
        let got = assembler.finish().usage.map(crate::protocol::Usage::from);
        let got = got.map(|u| (u.cached_tokens, u.reasoning_tokens, u.completion_tokens));
        assert_eq!(got, Some(expected), "{usage}");
    }
    // OpenAI (and most servers).
    check(
        json!({"prompt_tokens": 100, "completion_tokens": 50,
               "prompt_tokens_details": {"cached_tokens": 64},
               "completion_tokens_details": {"reasoning_tokens": 30}}),
        (64, 30, 50),
    );
    // DeepSeek with only its own fields.
    check(
        json!({"prompt_tokens": 100, "completion_tokens": 5,
               "prompt_cache_hit_tokens": 96, "prompt_cache_miss_tokens": 4}),
        (96, 0, 5),
    );
    // Mistral's non-streaming API, Together's top level.
    check(
        json!({"prompt_tokens": 77, "completion_tokens": 1, "num_cached_tokens": 76}),
        (76, 0, 1),
    );
    check(
        json!({"prompt_tokens": 10, "completion_tokens": 1, "cached_tokens": 8}),
        (8, 0, 1),
    );
    // Nulls; a cache count past its prompt; reasoning counted apart
    // (xAI: the total is the sum of all three).
    check(
        json!({"prompt_tokens": 40, "completion_tokens": 2,
               "prompt_tokens_details": null, "completion_tokens_details": null}),
        (0, 0, 2),
    );
    check(
        json!({"prompt_tokens": 10, "completion_tokens": 2,
               "prompt_tokens_details": {"cached_tokens": 99},
               "completion_tokens_details": {"reasoning_tokens": 1}}),
        (10, 1, 2),
    );
    check(
        json!({"prompt_tokens": 291, "completion_tokens": 26, "total_tokens": 513,
               "completion_tokens_details": {"reasoning_tokens": 196}}),
        (0, 196, 222),
    );
}
