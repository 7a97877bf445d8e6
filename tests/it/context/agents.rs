//! Compaction by the same rule wherever an agent runs (CX4): a sub-agent
//! under its parent's window, and a workflow step run by the binary,
//! against a server that refuses past the window.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cadre::runtime::context::RECORD_TAG;
use cadre::runtime::protocol::Event;
use serde_json::{Value, json};

use super::{FILE_BYTES, compactions, is_summary};
use crate::support::cli::{cadre, dirs, of_type, s, workflow_events};
use crate::support::mock::{MockServer, Overflow, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, turn_end};

/// Files each reader reads, one per model request.
const READS: usize = 12;

/// Marks the reader's task, so its requests can be told from its parent's.
const TASK: &str = "READER-TASK: read part00.txt to part11.txt";

fn parts(dir: &std::path::Path) {
    let line = "a line of one part of a long document, read to fill the window.\n";
    for n in 0..READS {
        let text = format!("part {n}\n{}", line.repeat(FILE_BYTES / line.len() + 1));
        std::fs::write(dir.join(format!("part{n:02}.txt")), &text[..FILE_BYTES]).expect("part");
    }
}

/// Whether a user message of the request carries the reader's task (its
/// parent's carry it only inside the `agent` call's arguments).
fn is_reader(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains(TASK)))
}

/// The reader's reply: the next part, then its answer. It counts the
/// reads it has seen answered, so a retried request gets the same reply.
fn reader_reply(request: &Value, reads: &AtomicUsize) -> Reply {
    let n = reads.load(Ordering::SeqCst);
    if n < READS {
        reads.fetch_add(1, Ordering::SeqCst);
        Reply::sse(&tool_call_chunks(
            &format!("r{n}"),
            "read_file",
            &json!({"path": format!("part{n:02}.txt")}),
        ))
    } else {
        let _ = request;
        Reply::sse(&text_chunks("READER-ANSWER: all twelve parts read"))
    }
}

#[tokio::test]
async fn a_sub_agent_compacts_under_its_parents_window_and_its_report_is_whole() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    let reads = Arc::new(AtomicUsize::new(0));
    let parent = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| {
        if is_summary(request) {
            return Some(Reply::sse(&text_chunks(
                "Parts read so far, one per request.",
            )));
        }
        if is_reader(request) {
            return Some(reader_reply(request, &reads));
        }
        Some(if parent.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "prompt": TASK}),
            ))
        } else {
            Reply::sse(&text_chunks("The reader finished."))
        })
    });
    let mut session = SessionBuilder::openai(&mock.url)
        .context_window(8_000)
        .subagents(Default::default(), 4)
        .start()
        .await;
    parts(&session.workspace_path());
    let events = session.turn("delegate the reading").await;
    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    // The child's compactions reach the parent's stream under its name.
    let compacted: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::ContextCompacted { agent, .. } if agent == "1"))
        .collect();
    assert!(!compacted.is_empty(), "{:?}", compactions(&events));
    assert_eq!(mock.overflows(), 0);
    assert_eq!(mock.violations(), Vec::<String>::new());
    // The child kept its task after compacting.
    let requests = mock.requests();
    let child_compacted: Vec<&Value> = requests
        .iter()
        .filter(|r| is_reader(r) && r["messages"].to_string().contains(RECORD_TAG))
        .collect();
    assert!(!child_compacted.is_empty(), "the child never sent a record");
    // The child's calls are shown under its id, not as the parent's own.
    let shown = events
        .iter()
        .filter(|e| matches!(e, Event::AgentToolCall { agent_id, name, .. } if agent_id == "1" && name == "read_file"))
        .count();
    assert_eq!(shown, READS);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::ToolCall { name, .. } if name == "read_file")),
        "a child's call shown as the parent's"
    );
    // The parent got the child's whole answer as the tool's result.
    let result = events
        .iter()
        .find_map(|e| match e {
            Event::ToolResult { name, output, .. } if name == "agent" => Some(output.clone()),
            _ => None,
        })
        .expect("the agent call's result");
    assert!(
        result.contains("READER-ANSWER: all twelve parts read"),
        "{result}"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_workflow_step_compacts_under_the_configured_window_and_its_run_completes() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    let reads = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| {
        if is_summary(request) {
            return Some(Reply::sse(&text_chunks(
                "Parts read so far, one per request.",
            )));
        }
        Some(reader_reply(request, &reads))
    });
    let (ws, data) = dirs();
    parts(ws.path());
    let file = ws.path().join("wf.toml");
    std::fs::write(
        &file,
        format!(
            "[workflow]\nname = \"reading\"\n\n[[steps]]\nname = \"read\"\nprompt = \"{TASK}\"\n"
        ),
    )
    .expect("workflow");
    let config = data.path().join("cfg.toml");
    std::fs::write(&config, "[context]\nwindow = 8000\n").expect("config");
    let out = cadre(&[
        "workflow",
        "run",
        s(&file),
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--config",
        s(&config),
        "--output-format",
        "stream-json",
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = workflow_events(&out);
    assert_eq!(
        of_type(&events, "workflow.completed")[0]["status"],
        "completed"
    );
    assert_eq!(mock.overflows(), 0);
    assert_eq!(mock.violations(), Vec::<String>::new());
    let requests = mock.requests();
    assert!(requests.iter().any(is_summary), "the step never compacted");
    assert!(
        requests
            .iter()
            .any(|r| is_reader(r) && r["messages"].to_string().contains(RECORD_TAG)),
        "no request of the step sent a record with its task"
    );
    let compacted = of_type(&events, "context.compacted");
    assert!(!compacted.is_empty(), "the run's stream never said so");
}
