//! Postures, the Auto-Review guardian, the denial ledger and the audit log,
//! against the mock server.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cadre::runtime::Mode;
use cadre::runtime::ToolCall;
use cadre::runtime::model::{
    ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream,
};
use cadre::runtime::permission::guardian::GuardianConfig;
use cadre::runtime::permission::{Layer, Posture, Risk, Verdict};
use cadre::runtime::protocol::{ApprovalDecision, Envelope, Event, FailureCategory, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{
    MockServer, Reply, chunk, text_chunks, tool_call_chunks, tool_calls_chunks, usage_chunk,
};
use crate::support::{SessionBuilder, TestSession, is_turn_end, tool_results, tree, turn_end};

/// Whether a request is a guardian review (its system prompt says so).
fn is_review(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You review one tool call"))
}

/// A one-chunk streamed text answer: what a guardian sends.
fn answer(text: &str) -> Reply {
    Reply::sse(&[
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]),
        ),
        usage_chunk(50, 20),
    ])
}

const ALLOW_LOW: &str =
    r#"{"risk":"low","decision":"allow","reason":"writes a source file in the workspace"}"#;
const DENY_MEDIUM: &str =
    r#"{"risk":"medium","decision":"deny","reason":"not needed for the task"}"#;

/// A mock that answers the agent from a queue and every review with `review`.
fn mock_with_reviews(
    mock: &MockServer,
    agent: Vec<Reply>,
    review: impl Fn() -> Reply + Send + Sync + 'static,
) {
    let agent = Mutex::new(VecDeque::from(agent));
    mock.respond_with(move |request| {
        if is_review(request) {
            Some(review())
        } else {
            agent.lock().expect("lock").pop_front()
        }
    });
}

fn decisions(events: &[Event]) -> Vec<(String, Verdict, Layer, Option<Risk>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionDecision { tool, decision, .. } => Some((
                tool.clone(),
                decision.verdict,
                decision.layer,
                decision.risk,
            )),
            _ => None,
        })
        .collect()
}

fn lines(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionDecision { line, .. } => Some(line.clone()),
            _ => None,
        })
        .collect()
}

async fn auto_session(mock: &MockServer) -> TestSession {
    SessionBuilder::openai(&mock.url)
        .posture(Posture::Auto)
        .interactive(false)
        .start()
        .await
}

/// One turn in which the agent writes `src/a.rs` once, under Auto-Review
/// with the guardian answering `review`.
async fn reviewed_write(review: Reply) -> (MockServer, TestSession, Vec<Event>) {
    let mock = MockServer::start().await;
    let agent = vec![
        Reply::sse(&tool_call_chunks(
            "w1",
            "write_file",
            &json!({"path": "src/a.rs", "content": "fn a() {}\n"}),
        )),
        Reply::sse(&text_chunks("done")),
    ];
    mock_with_reviews(&mock, agent, move || review.clone());
    let mut session = auto_session(&mock).await;
    let events = session.turn("SECRET-PROMPT-MARKER write a.rs").await;
    (mock, session, events)
}

#[tokio::test]
async fn auto_review_allows_a_low_risk_call_after_exactly_one_review_without_history() {
    let (mock, session, events) = reviewed_write(answer(ALLOW_LOW)).await;
    assert_eq!(
        tool_results(&events),
        [("write_file".to_string(), "ok".to_string())]
    );
    assert!(session.workspace_path().join("src/a.rs").exists());
    assert_eq!(
        decisions(&events),
        [(
            "write_file".into(),
            Verdict::Allow,
            Layer::Guardian,
            Some(Risk::Low)
        )]
    );
    assert_eq!(
        lines(&events),
        [
            "Auto-Review allowed 'write_file' (low risk, model guardian): writes a source file in the workspace"
        ]
    );

    let requests = mock.requests();
    let reviews: Vec<&Value> = requests.iter().filter(|r| is_review(r)).collect();
    assert_eq!(reviews.len(), 1, "exactly one review per held call");
    let review = reviews[0];
    let messages = review["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        2,
        "the guardian prompt and the held call, nothing else"
    );
    assert!(review.get("tools").is_none(), "the guardian has no tools");
    let body: Value =
        serde_json::from_str(messages[1]["content"].as_str().expect("text")).expect("json");
    assert_eq!(
        body["held_call"],
        json!({"tool": "write_file", "arguments": {"path": "src/a.rs", "content": "fn a() {}\n"}})
    );
    assert!(body["observations"].is_array());
    assert!(
        !review.to_string().contains("SECRET-PROMPT-MARKER"),
        "conversation history leaked into the review"
    );
    session.shutdown().await;
}

/// Every way a review can go wrong denies the call, and the file stays unwritten.
#[tokio::test]
async fn auto_review_fails_closed_on_bad_answers_and_high_risk() {
    let cases: Vec<(&str, Reply, &str)> = vec![
        (
            "malformed json",
            answer("{risk: low, decision: allow"),
            "malformed",
        ),
        (
            "missing field",
            answer(r#"{"risk":"low","decision":"allow"}"#),
            "malformed",
        ),
        (
            "json wrapped in prose",
            answer(&format!("Here is my verdict: {ALLOW_LOW} Thanks!")),
            "malformed",
        ),
        (
            "high risk allowed",
            answer(r#"{"risk":"high","decision":"allow","reason":"force-pushes"}"#),
            "never runs automatically",
        ),
        (
            "critical risk allowed",
            answer(r#"{"risk":"critical","decision":"allow","reason":"wipes data"}"#),
            "never runs automatically",
        ),
        (
            "server error",
            Reply::error(500, "guardian down"),
            "model failed",
        ),
        (
            "rate limited",
            Reply::error(429, "slow down"),
            "model failed",
        ),
    ];
    let mut wrong = Vec::new();
    for (name, review, reason) in cases {
        let (mock, session, events) = reviewed_write(review).await;
        let got = decisions(&events);
        let denied = got
            == [(
                "write_file".to_string(),
                Verdict::Deny,
                Layer::Guardian,
                got.first().and_then(|d| d.3),
            )];
        let said = lines(&events).first().is_some_and(|l| l.contains(reason));
        let reviews = mock.requests().iter().filter(|r| is_review(r)).count();
        let written = session.workspace_path().join("src/a.rs").exists();
        if !denied
            || !said
            || reviews != 1
            || written
            || tool_results(&events)
                != [("write_file".to_string(), "permission_denied".to_string())]
        {
            wrong.push(format!(
                "{name}: decisions {got:?}, lines {:?}, reviews {reviews}, written {written}",
                lines(&events)
            ));
        }
        session.shutdown().await;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn a_call_too_large_to_review_is_denied_without_a_request() {
    let mock = MockServer::start().await;
    let big = "x".repeat(20_000);
    let agent = vec![
        Reply::sse(&tool_call_chunks(
            "big",
            "write_file",
            &json!({"path": "big.txt", "content": big}),
        )),
        Reply::sse(&text_chunks("done")),
    ];
    mock_with_reviews(&mock, agent, || answer(ALLOW_LOW));
    let mut session = auto_session(&mock).await;
    let events = session.turn("write it").await;
    assert_eq!(mock.requests().iter().filter(|r| is_review(r)).count(), 0);
    assert_eq!(
        tool_results(&events),
        [("write_file".to_string(), "permission_denied".to_string())]
    );
    assert!(
        lines(&events)[0].contains("too large to review"),
        "{:?}",
        lines(&events)
    );
    session.shutdown().await;
}

#[tokio::test]
async fn cancelling_the_turn_during_a_review_denies_the_held_call() {
    let mock = MockServer::start().await;
    let agent = vec![Reply::sse(&tool_call_chunks(
        "w1",
        "write_file",
        &json!({"path": "a.txt", "content": "x"}),
    ))];
    mock_with_reviews(&mock, agent, || Reply::HangAfter {
        body: String::new(),
    });
    let mut session = auto_session(&mock).await;
    session.submit(Op::user("write"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.requests().iter().filter(|r| is_review(r)).count() == 0 {
        assert!(Instant::now() < deadline, "the review never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    session.submit(Op::Cancel);
    let events = session.events_until(is_turn_end).await;
    assert!(matches!(
        turn_end(&events),
        Event::TurnFailed {
            category: FailureCategory::Cancelled,
            ..
        }
    ));
    assert_eq!(
        decisions(&events),
        [("write_file".into(), Verdict::Deny, Layer::Guardian, None)]
    );
    assert!(
        lines(&events)[0].contains("cancelled"),
        "{:?}",
        lines(&events)
    );
    assert!(!session.workspace_path().join("a.txt").exists());
    session.shutdown().await;
}

/// A model client that scripts the agent and never answers the guardian,
/// with no sockets, so the paused clock is the only clock.
struct SilentGuardian {
    calls: Mutex<u32>,
}

impl ModelClient for SilentGuardian {
    fn model(&self) -> &str {
        "silent"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if &*request.context.role == "guardian" {
            return Box::pin(futures::stream::pending());
        }
        let mut calls = self.calls.lock().expect("lock");
        *calls += 1;
        let response = if *calls == 1 {
            ModelResponse {
                tool_calls: vec![ToolCall {
                    id: "w1".into(),
                    name: "write_file".into(),
                    arguments: json!({"path": "a.txt", "content": "x"}).to_string(),
                }],
                ..ModelResponse::default()
            }
        } else {
            ModelResponse {
                text: "gave up".into(),
                ..ModelResponse::default()
            }
        };
        Box::pin(futures::stream::iter([Ok::<_, ModelError>(
            ModelEvent::Completed(response),
        )]))
    }
}

#[tokio::test(start_paused = true)]
async fn a_guardian_that_never_answers_is_denied_after_its_90_second_deadline() {
    let model = Arc::new(SilentGuardian {
        calls: Mutex::new(0),
    });
    let mut session = SessionBuilder::model(model)
        .posture(Posture::Auto)
        .interactive(false)
        .guardian(GuardianConfig::default())
        .start()
        .await;
    let started = tokio::time::Instant::now();
    session.submit(Op::user("write"));
    // No test timeout here: on the paused clock it would fire first.
    let mut events = Vec::new();
    while let Some(Envelope { event, .. }) = session.events.recv().await {
        let done = is_turn_end(&event);
        events.push(event);
        if done {
            break;
        }
    }
    assert!(
        started.elapsed() >= Duration::from_secs(90),
        "denied before the deadline"
    );
    assert_eq!(
        decisions(&events),
        [("write_file".into(), Verdict::Deny, Layer::Guardian, None)]
    );
    assert!(
        lines(&events)[0].contains("did not answer within 90 s"),
        "{:?}",
        lines(&events)
    );
    assert!(!session.workspace_path().join("a.txt").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn plan_mode_under_full_access_still_executes_nothing_but_the_plan() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .posture(Posture::Bypass)
        .start()
        .await;
    let ws = session.workspace_path();
    std::fs::write(ws.join("a.txt"), "keep\n").expect("seed");
    let before = tree(&ws);
    let plan = session.plan_file.display().to_string();
    mock.push([
        Reply::sse(&tool_calls_chunks(&[
            (
                "f1",
                "write_file",
                json!({"path": "a.txt", "content": "forged"}),
            ),
            ("f2", "bash", json!({"command": "touch forged && rm a.txt"})),
            (
                "f3",
                "write_file",
                json!({"path": plan, "content": "## Summary\n\nok\n"}),
            ),
        ])),
        Reply::sse(&text_chunks("planned")),
    ]);
    let events = session.turn("plan").await;
    let codes: Vec<String> = tool_results(&events).into_iter().map(|(_, c)| c).collect();
    assert_eq!(codes, ["tool_not_allowed", "tool_not_allowed", "ok"]);
    assert_eq!(tree(&ws), before);
    let layers: Vec<(Verdict, Layer)> =
        decisions(&events).into_iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(
        layers,
        [
            (Verdict::Deny, Layer::Mode),
            (Verdict::Deny, Layer::Mode),
            (Verdict::Allow, Layer::Floor)
        ]
    );
    session.shutdown().await;
}

#[tokio::test]
async fn every_automatic_decision_has_one_audit_record_and_one_event_line() {
    let mock = MockServer::start().await;
    let agent = vec![
        Reply::sse(&tool_calls_chunks(&[
            ("a1", "read_file", json!({"path": "README.md"})),
            ("a2", "bash", json!({"command": "git push origin main"})),
            (
                "a3",
                "write_file",
                json!({"path": "notes.txt", "content": "x"}),
            ),
            ("a4", "bash", json!({"command": "rm -rf build"})),
        ])),
        Reply::sse(&text_chunks("done")),
    ];
    mock_with_reviews(&mock, agent, || answer(DENY_MEDIUM));
    let rules = {
        let mut set = cadre::runtime::permission::rules::RuleSet::new();
        set.add(
            cadre::runtime::permission::rules::RuleKind::Allow,
            cadre::runtime::permission::rules::Scope::Project,
            "write_file(notes.txt)",
        )
        .expect("rule");
        set
    };
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Auto)
        .interactive(false)
        .rules(rules)
        .start()
        .await;
    std::fs::write(session.workspace_path().join("README.md"), "hi").expect("seed");
    let events = session.turn("go").await;
    let expected = [
        ("read_file".to_string(), Verdict::Allow, Layer::Floor, None),
        ("bash".into(), Verdict::Deny, Layer::Floor, None),
        ("write_file".into(), Verdict::Allow, Layer::Rule, None),
        (
            "bash".into(),
            Verdict::Deny,
            Layer::Guardian,
            Some(Risk::Medium),
        ),
    ];
    assert_eq!(decisions(&events), expected);

    // The audit is in the session's store.
    let records = session.audit().await;
    let audited: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap_or_default().to_string(),
                r["verdict"].as_str().unwrap_or_default().to_string(),
                r["layer"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        audited,
        [
            ("a1".to_string(), "allow".to_string(), "floor".to_string()),
            ("a2".into(), "deny".into(), "floor".into()),
            ("a3".into(), "allow".into(), "rule".into()),
            ("a4".into(), "deny".into(), "guardian".into()),
        ]
    );
    assert_eq!(records[2]["rule"], "write_file(notes.txt)");
    assert_eq!(records[2]["scope"], "project");
    for (record, line) in records.iter().zip(lines(&events)) {
        assert_eq!(record["line"], line.as_str());
    }
    session.shutdown().await;
}

/// Calls that each need a review: the agent writes `n` files in one response.
fn writes(ids: impl Iterator<Item = usize>) -> Vec<(String, &'static str, Value)> {
    ids.map(|i| {
        (
            format!("w{i}"),
            "write_file",
            json!({"path": format!("f{i}.txt"), "content": "x"}),
        )
    })
    .collect()
}

fn batch(calls: &[(String, &'static str, Value)]) -> Reply {
    let refs: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, n, a)| (id.as_str(), *n, a.clone()))
        .collect();
    Reply::sse(&tool_calls_chunks(&refs))
}

#[tokio::test]
async fn three_denials_in_a_row_end_a_headless_turn_with_paused_by_denials() {
    let mock = MockServer::start().await;
    mock_with_reviews(
        &mock,
        vec![batch(&writes(1..=5)), Reply::sse(&text_chunks("never"))],
        || answer(DENY_MEDIUM),
    );
    let mut session = auto_session(&mock).await;
    let events = session.turn("write five").await;

    assert!(
        events.iter().any(|e| matches!(e, Event::AutonomyPaused { fallback: None, reason } if reason.contains("3 automatic denials in a row"))),
        "{events:?}"
    );
    match turn_end(&events) {
        Event::TurnFailed {
            category, message, ..
        } => {
            assert_eq!(*category, FailureCategory::PausedByDenials);
            assert!(message.starts_with("paused_by_denials"), "{message}");
        }
        other => panic!("expected paused_by_denials, got {other:?}"),
    }
    assert_eq!(
        mock.requests().iter().filter(|r| is_review(r)).count(),
        3,
        "no review after the pause"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn three_denials_in_a_row_fall_back_to_ask_in_an_interactive_host() {
    let mock = MockServer::start().await;
    mock_with_reviews(
        &mock,
        vec![batch(&writes(1..=4)), Reply::sse(&text_chunks("asked"))],
        || answer(DENY_MEDIUM),
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Auto)
        .interactive(true)
        .start()
        .await;
    session.submit(Op::user("write four"));
    let events = session
        .events_until(|e| matches!(e, Event::ApprovalRequested { .. }))
        .await;
    assert!(events.iter().any(|e| matches!(
        e,
        Event::AutonomyPaused {
            fallback: Some(Posture::Suggest),
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::PostureChanged {
            posture: Posture::Suggest
        }
    )));
    let Some(Event::ApprovalRequested { id, call_id, .. }) = events.last() else {
        panic!("no approval prompt");
    };
    assert_eq!((id.as_str(), call_id.as_str()), ("approval:1", "w4"));
    session.submit(Op::Approve {
        id: id.clone(),
        decision: ApprovalDecision::AllowOnce,
        reason: None,
    });
    let rest = session.events_until(is_turn_end).await;
    assert!(matches!(turn_end(&rest), Event::TurnCompleted { .. }));
    assert!(
        session.workspace_path().join("f4.txt").exists(),
        "the person's approval ran the call"
    );
    assert_eq!(mock.requests().iter().filter(|r| is_review(r)).count(), 3);
    session.shutdown().await;
}

/// Twenty denials with an allowed read between every two of them.
fn interleaved() -> Vec<(String, &'static str, Value)> {
    let mut calls = Vec::new();
    for i in 0..10 {
        calls.extend(writes([2 * i, 2 * i + 1].into_iter()));
        calls.push((format!("r{i}"), "list_dir", json!({})));
    }
    calls
}

#[tokio::test]
async fn twenty_denials_in_a_session_end_a_headless_turn() {
    let mock = MockServer::start().await;
    mock_with_reviews(
        &mock,
        vec![batch(&interleaved()), Reply::sse(&text_chunks("never"))],
        || answer(DENY_MEDIUM),
    );
    let mut session = auto_session(&mock).await;
    let events = session.turn("write twenty").await;
    assert!(
        events.iter().any(|e| matches!(e, Event::AutonomyPaused { reason, .. } if reason.contains("20 automatic denials in this session"))),
        "{events:?}"
    );
    assert!(matches!(
        turn_end(&events),
        Event::TurnFailed {
            category: FailureCategory::PausedByDenials,
            ..
        }
    ));
    assert_eq!(mock.requests().iter().filter(|r| is_review(r)).count(), 20);
    session.shutdown().await;
}

#[tokio::test]
async fn twenty_denials_in_a_session_fall_back_to_ask_interactively_and_a_user_message_resets_the_streak()
 {
    let mock = MockServer::start().await;
    // Two denials, then a new user message, then two more: no trip (the
    // streak was reset). Then the rest of the twenty.
    let agent = vec![
        batch(&writes(0..2)),
        Reply::sse(&text_chunks("first turn over")),
        batch(&writes(2..4)),
        Reply::sse(&text_chunks("second turn over")),
        batch(&interleaved()[6..]),
        Reply::sse(&text_chunks("third")),
    ];
    mock_with_reviews(&mock, agent, || answer(DENY_MEDIUM));
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Auto)
        .interactive(true)
        .start()
        .await;
    let first = session.turn("one").await;
    let second = session.turn("two").await;
    for events in [&first, &second] {
        assert!(matches!(turn_end(events), Event::TurnCompleted { .. }));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::AutonomyPaused { .. }))
        );
    }
    session.submit(Op::user("three"));
    let third = session
        .events_until(|e| matches!(e, Event::AutonomyPaused { .. }))
        .await;
    match third.last() {
        Some(Event::AutonomyPaused { reason, fallback }) => {
            assert!(
                reason.contains("20 automatic denials in this session"),
                "{reason}"
            );
            assert_eq!(*fallback, Some(Posture::Suggest));
        }
        other => panic!("{other:?}"),
    }
    session.submit(Op::Cancel);
    session.events_until(is_turn_end).await;
    assert_eq!(mock.requests().iter().filter(|r| is_review(r)).count(), 20);
    session.shutdown().await;
}

#[tokio::test]
async fn allow_for_session_answers_the_same_call_again_without_asking() {
    let mock = MockServer::start().await;
    let write = json!({"path": "log.txt", "content": "x"});
    mock.push([
        Reply::sse(&tool_call_chunks("s1", "write_file", &write)),
        Reply::sse(&tool_call_chunks("s2", "write_file", &write)),
        Reply::sse(&tool_call_chunks(
            "s3",
            "write_file",
            &json!({"path": "other.txt", "content": "x"}),
        )),
        Reply::sse(&text_chunks("done")),
    ]);
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(true)
        .start()
        .await;
    session.submit(Op::user("write"));
    let first = session
        .events_until(|e| matches!(e, Event::ApprovalRequested { .. }))
        .await;
    let Some(Event::ApprovalRequested { id, .. }) = first.last() else {
        panic!("no prompt")
    };
    session.submit(Op::Approve {
        id: id.clone(),
        decision: ApprovalDecision::AllowSession,
        reason: None,
    });
    // The identical second call runs without a prompt; a different one asks.
    let next = session
        .events_until(|e| matches!(e, Event::ApprovalRequested { .. }))
        .await;
    let Some(Event::ApprovalRequested { id, call_id, .. }) = next.last() else {
        panic!("no prompt")
    };
    assert_eq!((id.as_str(), call_id.as_str()), ("approval:2", "s3"));
    assert_eq!(
        tool_results(&next),
        [
            ("write_file".to_string(), "ok".to_string()),
            ("write_file".to_string(), "ok".to_string())
        ]
    );
    session.submit(Op::Approve {
        id: id.clone(),
        decision: ApprovalDecision::Deny,
        reason: None,
    });
    let rest = session.events_until(is_turn_end).await;
    assert_eq!(
        tool_results(&rest),
        [("write_file".to_string(), "permission_denied".to_string())]
    );
    assert!(!session.workspace_path().join("other.txt").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn without_a_model_of_its_own_the_guardian_asks_the_model_the_agent_asks() {
    let mock = MockServer::start().await;
    let agent = vec![
        Reply::sse(&tool_call_chunks(
            "w1",
            "write_file",
            &json!({"path": "src/a.rs", "content": "fn a() {}\n"}),
        )),
        Reply::sse(&text_chunks("done")),
    ];
    mock_with_reviews(&mock, agent, || answer(ALLOW_LOW));
    let mut session = auto_session(&mock).await;
    session.submit(Op::SetModel {
        model: "chosen-model".into(),
    });
    session
        .events_until(|e| matches!(e, Event::ModelChanged { .. }))
        .await;
    session.turn("write a.rs").await;

    let requests = mock.requests();
    let (reviews, turns): (Vec<&Value>, Vec<&Value>) = requests.iter().partition(|r| is_review(r));
    assert_eq!(reviews.len(), 1);
    assert_eq!(turns.len(), 2);
    for request in reviews.iter().chain(&turns) {
        assert_eq!(request["model"], "chosen-model", "{request}");
    }
    session.shutdown().await;
}

/// Issue 26, item 5: a person asked about a file change sees its diff, not
/// raw JSON; a call with no diff (bash) shows none.
#[tokio::test]
async fn an_approval_prompt_carries_the_diff_of_a_write_and_of_an_edit() {
    let mock = MockServer::start().await;
    mock.push([
        batch(&[
            (
                "w1".to_string(),
                "write_file",
                json!({"path": "notes.txt", "content": "one\n2\nthree\n"}),
            ),
            (
                "e1".to_string(),
                "edit_file",
                json!({"path": "notes.txt", "old_string": "three", "new_string": "THREE"}),
            ),
            ("b1".to_string(), "bash", json!({"command": "touch x"})),
        ]),
        Reply::sse(&text_chunks("asked")),
    ]);
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(true)
        .start()
        .await;
    std::fs::write(
        session.workspace_path().join("notes.txt"),
        "one\ntwo\nthree\n",
    )
    .expect("file");
    session.submit(Op::user("change the notes"));
    let mut previews = Vec::new();
    for _ in 0..3 {
        let events = session
            .events_until(|e| matches!(e, Event::ApprovalRequested { .. }))
            .await;
        let Some(Event::ApprovalRequested { id, preview, .. }) = events.last() else {
            panic!("no approval prompt");
        };
        previews.push(preview.clone());
        session.submit(Op::Approve {
            id: id.clone(),
            decision: ApprovalDecision::AllowOnce,
            reason: None,
        });
    }
    assert_eq!(
        previews[0].as_deref(),
        Some(
            "notes.txt: +1 -1 lines\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
        )
    );
    // The edit is shown against the file as the approved write left it.
    assert_eq!(
        previews[1].as_deref(),
        Some(
            "notes.txt: +1 -1 lines\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n 2\n-three\n+THREE\n"
        )
    );
    assert_eq!(previews[2], None);
    let rest = session.events_until(is_turn_end).await;
    assert!(matches!(turn_end(&rest), Event::TurnCompleted { .. }));
    session.shutdown().await;
}

/// Issue 26, item 5: a denial can say what to do instead, and the model
/// reads it with the decision.
#[tokio::test]
async fn a_denials_reason_reaches_the_model() {
    let mock = MockServer::start().await;
    mock.push([
        batch(&writes(1..=1)),
        Reply::sse(&text_chunks("understood")),
    ]);
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(true)
        .start()
        .await;
    session.submit(Op::user("write"));
    let events = session
        .events_until(|e| matches!(e, Event::ApprovalRequested { .. }))
        .await;
    let Some(Event::ApprovalRequested { id, .. }) = events.last() else {
        panic!("no approval prompt");
    };
    session.submit(Op::Approve {
        id: id.clone(),
        decision: ApprovalDecision::Deny,
        reason: Some("put it in notes/ instead".into()),
    });
    let rest = session.events_until(is_turn_end).await;
    assert!(matches!(turn_end(&rest), Event::TurnCompleted { .. }));
    let requests = mock.requests();
    let result = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the call's result")
        .to_string();
    assert!(
        result.contains("denied by the user; the user says: put it in notes/ instead"),
        "{result}"
    );
    assert!(!session.workspace_path().join("f1.txt").exists());
    session.shutdown().await;
}
