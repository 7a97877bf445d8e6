//! The agent kernel through the whole system: a read-only (Plan) child of a
//! Work session, and a parent's narrowing reaching a running child.

use std::collections::BTreeMap;
use std::sync::Arc;

use cadre::runtime::Mode;
use cadre::runtime::config::RoleConfig;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{Event, Op, ToolStatus};
use cadre::runtime::tool::{Safety, Tool, ToolContext, ToolDefinition, ToolFuture};
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, contents, turn_end};

fn is_reminder(message: &Value) -> bool {
    message["content"]
        .as_str()
        .is_some_and(|c| c.starts_with("<plan-mode-reminder>"))
}

/// The last user message of a request (not a Plan reminder): whose
/// conversation it is.
fn asker(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user" && !is_reminder(m))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Model requests so far in the asker's current turn.
fn assistant_turns(request: &Value) -> usize {
    let messages = request["messages"].as_array().expect("messages");
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user" && !is_reminder(m))
        .unwrap_or(0);
    messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_work_session_starts_a_read_only_plan_child_that_cannot_write() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(match (asker(request).as_str(), assistant_turns(request)) {
            ("check the change", 0) => Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "role": "verifier", "prompt": "verify"}),
            )),
            ("check the change", _) => Reply::sse(&text_chunks("verified by the child")),
            // The child, hostile: it calls a tool it was never offered.
            ("verify", 0) => Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "forged.txt", "content": "pwned"}),
            )),
            ("verify", _) => Reply::sse(&text_chunks("VERDICT: PASS")),
            _ => return None,
        })
    });
    let mut roles = BTreeMap::new();
    roles.insert(
        "verifier".to_string(),
        RoleConfig {
            mode: Some(Mode::Plan),
            description: Some("reads and reports".into()),
            ..RoleConfig::default()
        },
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(roles, 4)
        .start()
        .await;
    let events = session.turn("check the change").await;
    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));

    let requests = mock.requests();
    let parent = requests
        .iter()
        .find(|r| asker(r) == "check the change")
        .expect("the parent asked");
    assert!(offered(parent).contains(&"write_file".to_string()));
    let child = requests
        .iter()
        .find(|r| asker(r) == "verify")
        .unwrap_or_else(|| panic!("the child asked: {events:#?}"));
    let mut child_tools = offered(child);
    child_tools.sort();
    assert_eq!(
        child_tools,
        [
            "agent",
            "bash",
            "glob",
            "grep",
            "list_dir",
            "process",
            "read_file"
        ],
        "a Plan child is offered read-only tools only (bash for proven read-only commands, \
         agent for read-only grandchildren), and no plan file writer"
    );
    let system = contents(child, "system").join("\n");
    assert!(system.contains("# Mode: Plan (read-only)"), "{system}");

    let forged: Vec<(ToolStatus, Option<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionDecision { agent_id, tool, .. } if agent_id == "1" => {
                Some((ToolStatus::Error, Some(tool.clone())))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        forged,
        [(ToolStatus::Error, Some("write_file".to_string()))]
    );
    let answer = mock
        .requests()
        .iter()
        .filter(|r| asker(r) == "verify")
        .flat_map(|r| contents(r, "tool"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        answer.contains("tool_not_allowed") && answer.contains("Plan mode"),
        "{answer}"
    );
    assert!(!session.workspace_path().join("forged.txt").exists());
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}

/// A read-only tool that blocks until the test lets it go, telling the test
/// when it has started.
struct Hold {
    definition: ToolDefinition,
    entered: mpsc::UnboundedSender<()>,
    release: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Tool for Hold {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn run<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let _ = self.entered.send(());
            if let Some(release) = self.release.lock().await.take() {
                let _ = release.await;
            }
            Ok("held".to_string())
        })
    }
}

/// S2, the bug pinned: a background sub-agent kept Work + Full Access and
/// kept writing after its parent switched to Plan.
#[tokio::test]
async fn a_background_child_stops_writing_once_its_parent_enters_plan() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(match (asker(request).as_str(), assistant_turns(request)) {
            ("boss", 0) => Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "prompt": "writer", "background": true}),
            )),
            ("boss", _) => Reply::sse(&text_chunks("spawned")),
            ("writer", 0) => Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "before.txt", "content": "1"}),
            )),
            ("writer", 1) => Reply::sse(&tool_call_chunks("h1", "hold", &json!({}))),
            ("writer", 2) => Reply::sse(&tool_call_chunks(
                "w2",
                "write_file",
                &json!({"path": "after.txt", "content": "2"}),
            )),
            ("writer", _) => Reply::sse(&text_chunks("done writing")),
            _ => return None,
        })
    });
    let (entered, mut held) = mpsc::unbounded_channel();
    let (release, released) = oneshot::channel();
    let hold = Hold {
        definition: ToolDefinition::new(
            "hold",
            "Wait.",
            json!({"type": "object", "properties": {}}),
            Safety::ReadOnly,
        ),
        entered,
        release: Mutex::new(Some(released)),
    };
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(BTreeMap::new(), 4)
        .tool(Arc::new(hold))
        .start()
        .await;
    let events = session.turn("boss").await;
    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    held.recv().await.expect("the child reached its hold");
    assert!(session.workspace_path().join("before.txt").exists());

    // The parent is idle: the switch is accepted while the child works.
    session.submit(Op::SetMode { mode: Mode::Plan });
    session
        .events_until(|e| matches!(e, Event::ModeChanged { mode: Mode::Plan }))
        .await;
    release.send(()).expect("release the hold");
    let log = session
        .events_until(|e| matches!(e, Event::AgentCompleted { agent_id, .. } if agent_id == "1"))
        .await;

    assert!(
        !session.workspace_path().join("after.txt").exists(),
        "the child wrote after its parent entered Plan"
    );
    let refused = log.iter().any(|e| {
        matches!(e, Event::PermissionDecision { agent_id, tool, decision, .. }
            if agent_id == "1" && tool == "write_file"
                && decision.verdict == cadre::runtime::permission::Verdict::Deny)
    });
    assert!(refused, "{log:#?}");
    let observed = mock
        .requests()
        .iter()
        .rfind(|r| asker(r) == "writer")
        .map(|r| contents(r, "tool"))
        .unwrap_or_default();
    assert_eq!(
        observed.first().map(String::as_str),
        Some("wrote 1 bytes to before.txt")
    );
    assert_eq!(
        observed.get(1).map(String::as_str),
        Some("held"),
        "the running call finished"
    );
    assert!(
        observed
            .get(2)
            .is_some_and(|o| o.contains("Plan mode is read-only")),
        "{observed:?}"
    );
    session.shutdown().await;
}

/// Events echo the id of the submission that caused them, even when two
/// submissions are in flight at once.
#[tokio::test]
async fn every_event_echoes_the_id_of_the_submission_that_caused_it() {
    let mock = MockServer::start().await;
    mock.push([
        Reply::sse(&tool_call_chunks("c1", "list_dir", &json!({}))),
        Reply::sse(&text_chunks("listed")),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session
        .handle()
        .submit_as("req-7", Op::user("list the files"))
        .expect("submit");
    session
        .handle()
        .submit_as("req-8", Op::SetMode { mode: Mode::Plan })
        .expect("submit");
    let mut seen = Vec::new();
    loop {
        let envelope = session.next_envelope().await;
        let end = matches!(envelope.event, Event::TurnCompleted { .. });
        seen.push(envelope);
        if end {
            break;
        }
    }
    let untagged: Vec<&Event> = seen
        .iter()
        .filter(|e| e.op_id.is_none())
        .map(|e| &e.event)
        .collect();
    assert!(
        untagged
            .iter()
            .all(|e| matches!(e, Event::SessionStarted { .. })),
        "only session.started has no cause: {untagged:#?}"
    );
    let of = |id: &str| -> Vec<&str> {
        seen.iter()
            .filter(|e| e.op_id.as_deref() == Some(id))
            .map(|e| match &e.event {
                Event::InputAdmitted { .. } => "input.admitted",
                Event::TurnStarted { .. } => "turn.started",
                Event::ToolCall { .. } => "tool.call",
                Event::ToolResult { .. } => "tool.result",
                Event::TurnCompleted { .. } => "turn.completed",
                Event::OpRejected { .. } => "op.rejected",
                Event::PermissionDecision { .. } => "permission.decision",
                Event::AssistantDelta { .. } => "assistant.delta",
                Event::AssistantMessage { .. } => "assistant.message",
                _ => "other",
            })
            .filter(|kind| *kind != "assistant.delta")
            .collect()
    };
    assert_eq!(of("req-8"), ["op.rejected"], "the refused mode change");
    let turn = of("req-7");
    assert_eq!(turn.first(), Some(&"input.admitted"));
    assert_eq!(turn.last(), Some(&"turn.completed"));
    for kind in [
        "turn.started",
        "tool.call",
        "tool.result",
        "assistant.message",
    ] {
        assert!(turn.contains(&kind), "{kind} missing from {turn:?}");
    }
    // A plain submission's events carry no id.
    session.submit(Op::Status);
    let status = loop {
        let envelope = session.next_envelope().await;
        if matches!(envelope.event, Event::SessionStatus { .. }) {
            break envelope;
        }
    };
    assert_eq!(status.op_id, None);
    session.shutdown().await;
}

/// A host made with a few built-in tools offers those and no others, and
/// refuses a name that is no built-in.
#[tokio::test]
async fn a_host_offers_only_the_built_in_tools_it_was_given() {
    use cadre::actors::host::{Host, HostError, ModelChoice, SessionOptions};
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("done"))]);
    let (data, workspace) = (
        tempfile::TempDir::new().expect("data"),
        tempfile::TempDir::new().expect("workspace"),
    );
    let server = || ModelChoice::Server {
        base_url: mock.url.clone(),
        model: "mock-model".into(),
        api_key: None,
        stream: true,
        options: Default::default(),
    };
    let refused = Host::builder(data.path())
        .model(server())
        .builtins(&["read_file", "rm_rf"])
        .build()
        .await;
    assert!(
        matches!(&refused, Err(HostError::UnknownBuiltin(name)) if name == "rm_rf"),
        "an unknown built-in is refused by name"
    );
    let host = Host::builder(data.path())
        .model(server())
        .builtins(&["list_dir", "read_file"])
        .build()
        .await
        .expect("host");
    let mut session = host
        .start(SessionOptions::new(workspace.path()))
        .await
        .expect("session");
    session
        .handle
        .submit(Op::user("look around"))
        .expect("submit");
    while let Some(envelope) = session.events.recv().await {
        if matches!(envelope.event, Event::TurnCompleted { .. }) {
            break;
        }
    }
    let requests = mock.requests();
    assert_eq!(offered(&requests[0]), ["read_file", "list_dir"]);
    session.handle.submit(Op::Shutdown).expect("shutdown");
    session.handle.stopped().await;
    host.close().await;
}
