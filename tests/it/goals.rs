//! Goals driven to a verified end (G1–G8), against the mock server over
//! real HTTP: continuations, the verifier, budgets, the breaker.

use cadre::runtime::goal::{
    Budgets, GoalAction, GoalCommand, GoalSettings, GoalStatus, StatusReason, VerifyMode,
};
use cadre::runtime::protocol::{Event, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, contents};

fn text(text: &str) -> Reply {
    Reply::sse(&text_chunks(text))
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(&tool_call_chunks(id, name, &args))
}

fn write(id: &str, path: &str) -> Reply {
    call(id, "write_file", json!({"path": path, "content": id}))
}

fn claim(id: &str) -> Reply {
    call(
        id,
        "update_goal",
        json!({"status": "complete", "claim": "all files written"}),
    )
}

fn set(objective: &str, settings: GoalSettings) -> Op {
    Op::Goal {
        action: GoalAction::Set {
            objective: objective.into(),
            budgets: Budgets::default(),
            settings,
        },
    }
}

fn verify(mode: VerifyMode) -> GoalSettings {
    GoalSettings {
        verify: mode,
        ..GoalSettings::default()
    }
}

/// Events until the session has nothing left to do.
async fn until_idle(session: &mut TestSession) -> Vec<Event> {
    session
        .events_until(|e| matches!(e, Event::SessionIdle { .. }))
        .await
}

/// The last `goal.updated` as `status(reason)`.
fn last_goal(events: &[Event]) -> String {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::GoalUpdated { status, reason, .. } => {
                Some(format!("{}({})", status.as_str(), reason.as_str()))
            }
            _ => None,
        })
        .expect("a goal.updated event")
}

fn continuations(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::GoalContinuation { n } => Some(*n),
            _ => None,
        })
        .collect()
}

fn verdicts(events: &[Event]) -> Vec<(String, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::GoalVerification { verdict, gaps, .. } => Some((verdict.clone(), gaps.clone())),
            _ => None,
        })
        .collect()
}

fn is_verifier(request: &Value) -> bool {
    contents(request, "system")
        .first()
        .is_some_and(|s| s.contains("You are a goal verifier"))
}

#[tokio::test]
async fn a_three_turn_goal_reaches_a_verified_pass() {
    let mock = MockServer::start().await;
    mock.push([
        write("w1", "a.txt"),
        text("wrote a"),
        write("w2", "b.txt"),
        text("wrote b"),
        claim("c1"),
        text("Both files are there.\nVERDICT: PASS"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("write a.txt and b.txt", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(continuations(&events), [1, 2, 3]);
    assert_eq!(verdicts(&events), [("pass".to_string(), vec![])]);
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    assert!(is_verifier(&requests[5]));
    // The first continuation carries the whole contract.
    let first = contents(&requests[0], "user");
    assert!(
        first[0].contains("Objective:\nwrite a.txt and b.txt"),
        "{first:?}"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}
