//! Cancel ends a turn promptly, whatever it is waiting on, and leaves the
//! session ready for the next message.

use std::path::Path;
use std::time::{Duration, Instant};

use cadre::runtime::protocol::{Event, FailureCategory, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, chunk, sse_body, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, tool_results, turn_end};

/// How long a cancelled turn may take to end.
const PROMPT: Duration = Duration::from_secs(3);

/// Waits (polling, bounded) until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn cancel_and_expect_cancelled(session: &mut TestSession) -> Vec<Event> {
    let asked = Instant::now();
    session.submit(Op::Cancel);
    let events = session.events_until(crate::support::is_turn_end).await;
    let took = asked.elapsed();
    assert!(took < PROMPT, "cancel took {took:?}");
    match turn_end(&events) {
        Event::TurnFailed { category, .. } => assert_eq!(*category, FailureCategory::Cancelled),
        other => panic!("expected a cancelled turn, got {other:?}"),
    }
    events
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// The host pid of the live process whose command line is exactly `argv`
/// (a command's own `$$` is its pid in the sandbox's PID namespace).
fn host_pid(argv: &[&str]) -> Option<u32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (cmdline == wanted && process_alive(pid)).then_some(pid)
        })
}

#[tokio::test]
async fn cancel_during_a_long_bash_call_kills_it_and_answers_the_call() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let ws = session.workspace_path();
    // The fraction of a second tags the sleep among the host's processes.
    let seconds = format!("30.{}", std::process::id());
    mock.push([Reply::sse(&tool_call_chunks(
        "long",
        "bash",
        &json!({"command": format!("echo $$ > child.pid && exec sleep {seconds}")}),
    ))]);
    session.submit(Op::user("run it"));
    session
        .events_until(|e| matches!(e, Event::ToolCall { .. }))
        .await;
    let pid_file = ws.join("child.pid");
    eventually("the command to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    eventually("the sleep to show", || {
        host_pid(&["sleep", &seconds]).is_some()
    })
    .await;
    let pid = host_pid(&["sleep", &seconds]).expect("the sleep's pid");
    assert!(process_alive(pid));

    let events = cancel_and_expect_cancelled(&mut session).await;
    assert_eq!(
        tool_results(&events),
        [("bash".to_string(), "cancelled".to_string())]
    );
    eventually("the command's process group to die", || !process_alive(pid)).await;

    // The next turn's request answers the cancelled call, so it is well-formed.
    mock.push([Reply::sse(&text_chunks("ready"))]);
    let next = session.turn("again").await;
    assert!(matches!(
        turn_end(&next),
        Event::TurnCompleted { turn_id: 2, .. }
    ));
    let last = mock.requests().pop().expect("request");
    let answer = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message")
        .clone();
    assert_eq!(answer["tool_call_id"], "long");
    assert!(
        answer["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("error (cancelled)"))
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}

#[tokio::test]
async fn cancel_during_a_stalled_stream_ends_the_turn_and_the_session_goes_on() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let first: Vec<Value> = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": "Thinking about "}, "finish_reason": null}]),
    )];
    let partial = sse_body(&first).replace("data: [DONE]\n\n", "");
    mock.push([Reply::HangAfter { body: partial }]);
    session.submit(Op::user("think"));
    session
        .events_until(|e| matches!(e, Event::AssistantDelta { .. }))
        .await;

    cancel_and_expect_cancelled(&mut session).await;
    let snapshot = session.handle().snapshot().await.expect("snapshot");
    assert_eq!(
        snapshot.conversation.len(),
        1,
        "only the user message is stored"
    );

    mock.push([Reply::sse(&text_chunks("fresh"))]);
    let next = session.turn("again").await;
    assert!(matches!(
        turn_end(&next),
        Event::TurnCompleted { turn_id: 2, .. }
    ));
    session.shutdown().await;
}

/// A session whose turn has streamed some text and waits on the rest.
async fn a_turn_mid_stream() -> (MockServer, TestSession) {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let first: Vec<Value> = vec![chunk(
        json!([{"index": 0, "delta": {"content": "Working"}, "finish_reason": null}]),
    )];
    mock.push([Reply::HangAfter {
        body: sse_body(&first).replace("data: [DONE]\n\n", ""),
    }]);
    session.submit(Op::user("work"));
    session
        .events_until(|e| matches!(e, Event::AssistantDelta { .. }))
        .await;
    (mock, session)
}

#[tokio::test]
async fn a_mode_change_while_a_turn_runs_is_refused_and_status_still_answers() {
    let (_mock, mut session) = a_turn_mid_stream().await;

    session.submit(Op::SetMode {
        mode: cadre::runtime::Mode::Plan,
    });
    session.submit(Op::Status);
    let refused = session.next_event().await;
    assert!(
        matches!(&refused, Event::OpRejected { op, message, .. } if op == "set_mode" && message.contains("cancel it first")),
        "{refused:?}"
    );
    let status = session.next_event().await;
    assert!(
        matches!(
            status,
            Event::SessionStatus {
                activity: cadre::runtime::protocol::Activity::Running,
                mode: cadre::runtime::Mode::Work,
                ..
            }
        ),
        "{status:?}"
    );
    cancel_and_expect_cancelled(&mut session).await;
    session.shutdown().await;
}

#[tokio::test]
async fn a_model_change_is_refused_while_a_turn_runs_and_the_next_turn_asks_the_new_model() {
    let (mock, mut session) = a_turn_mid_stream().await;

    session.submit(Op::SetModel {
        model: "other-model".into(),
    });
    let refused = session.next_event().await;
    assert!(
        matches!(&refused, Event::OpRejected { op, message, .. } if op == "set_model" && message.contains("cancel it first")),
        "{refused:?}"
    );
    cancel_and_expect_cancelled(&mut session).await;
    session
        .events_until(|e| matches!(e, Event::SessionIdle { .. }))
        .await;

    session.submit(Op::SetModel { model: "  ".into() });
    let empty = session.next_event().await;
    assert!(
        matches!(&empty, Event::OpRejected { op, message, .. } if op == "set_model" && message.contains("empty")),
        "{empty:?}"
    );
    session.submit(Op::SetModel {
        model: "other-model".into(),
    });
    assert_eq!(
        session.next_event().await,
        Event::ModelChanged {
            model: "other-model".into()
        }
    );
    mock.push([Reply::sse(&text_chunks("done"))]);
    session.turn("again").await;
    let models: Vec<Value> = mock.requests().iter().map(|r| r["model"].clone()).collect();
    let first_model = models[0].as_str().expect("a model name").to_string();
    assert_ne!(first_model, "other-model");
    assert_eq!(models, [json!(first_model), json!("other-model")]);
    session.shutdown().await;
}
