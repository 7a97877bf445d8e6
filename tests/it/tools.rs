//! Tool failures become observations the model reads, and the session keeps
//! working.

use std::sync::Arc;
use std::time::Duration;

use cadre::runtime::protocol::Event;
use cadre::runtime::tool::{Safety, Tool, ToolContext, ToolDefinition, ToolFuture};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{
    MockServer, Reply, raw_tool_call_chunks, text_chunks, tool_call_chunks,
};
use crate::support::{SessionBuilder, contents, tool_results, turn_end};

#[tokio::test]
async fn bad_arguments_come_back_naming_the_problem_and_the_turn_goes_on() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    mock.push([
        Reply::sse(&tool_call_chunks(
            "b1",
            "write_file",
            &json!({"path": "a.txt", "content": 5}),
        )),
        Reply::sse(&raw_tool_call_chunks(
            "b2",
            "write_file",
            "{\"path\": \"a.txt\", \"content\": ",
        )),
        Reply::sse(&tool_call_chunks(
            "b3",
            "write_file",
            &json!({"path": "a.txt"}),
        )),
        Reply::sse(&tool_call_chunks(
            "b4",
            "write_file",
            &json!({"path": "a.txt", "content": "fixed"}),
        )),
        Reply::sse(&text_chunks("Written after three corrections.")),
    ]);
    let events = session.turn("write a.txt").await;

    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    let codes: Vec<String> = tool_results(&events).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        codes,
        [
            "invalid_arguments",
            "invalid_arguments",
            "invalid_arguments",
            "ok"
        ]
    );
    let seen = contents(&mock.requests()[4], "tool");
    assert!(
        seen[0].contains("at '/content'") && seen[0].contains("not of type \"string\""),
        "{}",
        seen[0]
    );
    assert!(seen[1].contains("not valid JSON"), "{}", seen[1]);
    assert!(
        seen[2].contains("\"content\" is a required property"),
        "{}",
        seen[2]
    );
    assert_eq!(
        std::fs::read_to_string(session.workspace_path().join("a.txt")).expect("a.txt"),
        "fixed"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}

#[tokio::test]
async fn a_tool_that_outlives_its_timeout_is_stopped_and_reported() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    mock.push([
        Reply::sse(&tool_call_chunks(
            "t1",
            "bash",
            &json!({"command": "sleep 20; echo late > late.txt"}),
        )),
        Reply::sse(&text_chunks("It timed out.")),
    ]);
    let events = session.turn("run the slow thing").await;

    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    assert_eq!(
        tool_results(&events),
        [("bash".to_string(), "timeout".to_string())]
    );
    let seen = contents(&mock.requests()[1], "tool");
    assert!(
        seen[0].starts_with("error (timeout): 'bash' did not finish within 300 ms"),
        "{}",
        seen[0]
    );
    session.shutdown().await;
}

/// A tool that panics, registered like any host tool.
struct Panicky(ToolDefinition);

impl Tool for Panicky {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async { panic!("the index is corrupt") })
    }
}

#[tokio::test]
async fn a_panicking_tool_fails_its_call_only_and_the_session_keeps_working() {
    let mock = MockServer::start().await;
    let tool = Panicky(ToolDefinition::new(
        "reindex",
        "Rebuild the index.",
        json!({"type": "object", "properties": {}}),
        Safety::SideEffect,
    ));
    let mut session = SessionBuilder::openai(&mock.url)
        .tool(Arc::new(tool))
        .start()
        .await;
    mock.push([
        Reply::sse(&tool_call_chunks("p1", "reindex", &json!({}))),
        Reply::sse(&text_chunks("The tool crashed.")),
        Reply::sse(&tool_call_chunks("p2", "list_dir", &json!({}))),
        Reply::sse(&text_chunks("Still here.")),
    ]);
    let first = session.turn("reindex").await;
    assert!(matches!(turn_end(&first), Event::TurnCompleted { .. }));
    assert_eq!(
        tool_results(&first),
        [("reindex".to_string(), "failed".to_string())]
    );
    let seen = contents(&mock.requests()[1], "tool");
    assert!(
        seen[0].contains("'reindex' crashed: the index is corrupt"),
        "{}",
        seen[0]
    );

    let second = session.turn("and now?").await;
    assert!(matches!(
        turn_end(&second),
        Event::TurnCompleted { turn_id: 2, .. }
    ));
    assert_eq!(
        tool_results(&second),
        [("list_dir".to_string(), "ok".to_string())]
    );
    session.shutdown().await;
}
