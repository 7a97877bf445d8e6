//! The OpenAI-compatible client over real HTTP: streamed tool calls, usage,
//! and the non-streaming path.

use cadre::runtime::protocol::{Event, Usage};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_calls_chunks};
use crate::support::{SessionBuilder, quick_retries, tool_results, turn_end};

fn tool_call_events(events: &[Event]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => Some((call_id.clone(), name.clone(), arguments.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn two_tool_calls_with_arguments_split_across_chunks_and_packets_are_assembled() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    std::fs::write(session.workspace_path().join("notes.md"), "ünïcode notes\n").expect("seed");
    let calls = [
        ("call_a", "read_file", json!({"path": "notes.md"})),
        ("call_b", "list_dir", json!({"path": "."})),
    ];
    // Arguments arrive in halves, interleaved between the two calls, and the
    // bytes arrive 7 at a time, splitting JSON and UTF-8 across packets.
    mock.push([
        Reply::sse_in_pieces(&tool_calls_chunks(&calls), 7),
        Reply::sse_in_pieces(&text_chunks("Both files are fine."), 7),
    ]);
    let events = session.turn("check the notes").await;

    assert_eq!(
        tool_call_events(&events),
        calls
            .iter()
            .map(|(id, name, args)| (id.to_string(), name.to_string(), args.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        tool_results(&events),
        [
            ("read_file".into(), "ok".into()),
            ("list_dir".into(), "ok".into())
        ]
    );
    // The next request carries the assembled calls and one answer to each.
    let second = &mock.requests()[1];
    let messages = second["messages"].as_array().expect("messages");
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant");
    let sent: Vec<(String, Value)> = assistant["tool_calls"]
        .as_array()
        .expect("tool_calls")
        .iter()
        .map(|c| {
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().expect("args"))
                    .expect("json");
            (c["id"].as_str().expect("id").to_string(), args)
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("call_a".to_string(), calls[0].2.clone()),
            ("call_b".to_string(), calls[1].2.clone())
        ]
    );
    let read = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_a")
        .expect("answer to call_a");
    assert_eq!(read["content"], "ünïcode notes\n");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Both files are fine."]);
    session.shutdown().await;
}

#[tokio::test]
async fn usage_chunks_are_summed_over_the_turn_and_requests_ask_for_them() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    mock.push([
        Reply::sse(&tool_calls_chunks(&[("u1", "list_dir", json!({}))])),
        Reply::sse(&text_chunks("done")),
    ]);
    let events = session.turn("count").await;
    // tool_calls_chunks reports 20/7 and text_chunks 10/5; the context is
    // the estimate of the whole request (system prompt and tools included).
    let Event::TurnCompleted { context, .. } = turn_end(&events) else {
        panic!("the turn did not complete: {events:?}");
    };
    let used = context.expect("the context").used;
    assert!(used > 1_000, "the tools' schemas alone are more: {used}");
    assert_eq!(
        turn_end(&events),
        &Event::TurnCompleted {
            turn_id: 1,
            usage: Usage {
                prompt_tokens: 30,
                completion_tokens: 12,
                ..Usage::default()
            },
            iterations: 2,
            context: Some(cadre::runtime::context::ContextUsage {
                used,
                window: cadre::runtime::context::DEFAULT_WINDOW
            }),
        }
    );
    let first = &mock.requests()[0];
    assert_eq!(first["stream"], true);
    assert_eq!(first["stream_options"]["include_usage"], true);
    assert_eq!(first["model"], "mock-model");
    session.shutdown().await;
}

#[tokio::test]
async fn the_non_streaming_path_runs_the_same_loop() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai_with(&mock.url, false, quick_retries(2))
        .start()
        .await;
    let completion = |message: Value, finish: &str| {
        json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
               "choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
    };
    mock.push([
        Reply::json(
            200,
            completion(
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "n1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}
                ]}),
                "tool_calls",
            ),
        ),
        Reply::json(200, completion(json!({"role": "assistant", "content": "All listed."}), "stop")),
    ]);
    let events = session.turn("list").await;

    assert_eq!(
        tool_results(&events),
        [("list_dir".to_string(), "ok".to_string())]
    );
    let Event::TurnCompleted { context, .. } = turn_end(&events) else {
        panic!("the turn did not complete: {events:?}");
    };
    assert_eq!(
        turn_end(&events),
        &Event::TurnCompleted {
            turn_id: 1,
            usage: Usage {
                prompt_tokens: 22,
                completion_tokens: 6,
                ..Usage::default()
            },
            iterations: 2,
            context: *context,
        }
    );
    let requests = mock.requests();
    assert_eq!(requests[0]["stream"], false);
    assert!(requests[0].get("stream_options").is_none());
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}
