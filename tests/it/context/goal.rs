//! A long goal in a small window (CX2, CX3): forty worker turns, each
//! reading a fresh 5 KB file, against a server that refuses past an 8k
//! window. The goal compacts turn after turn and still completes through
//! its verifier, and what a compaction must keep — the objective, the
//! verifier's gaps — reaches the worker and the verifier after compacting.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cadre::runtime::context::RECORD_TAG;
use cadre::runtime::goal::{Budgets, GoalAction, GoalSettings, VerifyMode};
use cadre::runtime::protocol::{Event, Op};
use serde_json::{Value, json};

use super::{FILE_BYTES, compactions, is_summary};
use crate::support::mock::{MockServer, Overflow, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, contents};

/// Worker turns before the first claim.
const TURNS: usize = 40;

const OBJECTIVE: &str = "Read part00.txt to part39.txt and write notes.md";

/// The gap the verifier reports on the first claim.
const GAP: &str = "notes.md does not exist yet";

fn text(text: &str) -> Reply {
    Reply::sse(&text_chunks(text))
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(&tool_call_chunks(id, name, &args))
}

fn is_verifier(request: &Value) -> bool {
    contents(request, "system")
        .first()
        .is_some_and(|s| s.contains("You are a goal verifier"))
}

/// Whether the last message of a request is a tool's result: the worker
/// then ends its turn with a line of text.
fn answers_a_call(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool")
}

/// The mock's side of the run. The worker reads one new file per turn
/// for `TURNS` turns, then claims; the verifier fails the first claim
/// with `GAP`; the worker writes notes.md and claims again; the verifier
/// passes. Every reply is derived from the request, so a retried request
/// gets the same answer.
fn script(mock: &MockServer) {
    let reads = Arc::new(AtomicUsize::new(0));
    let claims = Arc::new(AtomicUsize::new(0));
    let verdicts = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| {
        if is_summary(request) {
            return Some(text(
                "The worker is reading the parts one per turn and summarizing each.",
            ));
        }
        if is_verifier(request) {
            // (A Plan-mode reminder may follow the read's result.)
            let read = request["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
            if read {
                return Some(text("VERDICT: PASS"));
            }
            return Some(if verdicts.fetch_add(1, Ordering::SeqCst) == 0 {
                text(&format!("GAP: {GAP}\nVERDICT: FAIL"))
            } else {
                call("v1", "read_file", json!({"path": "notes.md"}))
            });
        }
        if answers_a_call(request) {
            let n = reads.load(Ordering::SeqCst);
            return Some(text(&format!("Part {n} read; {TURNS} parts in all.")));
        }
        let n = reads.load(Ordering::SeqCst);
        if n < TURNS {
            reads.fetch_add(1, Ordering::SeqCst);
            return Some(call(
                &format!("r{n}"),
                "read_file",
                json!({"path": format!("part{n:02}.txt")}),
            ));
        }
        let claim = claims.fetch_add(1, Ordering::SeqCst);
        let last_user = contents(request, "user").pop().unwrap_or_default();
        Some(if claim == 0 {
            call(
                "c1",
                "update_goal",
                json!({"status": "complete", "claim": "all parts read"}),
            )
        } else if last_user.contains(GAP) {
            call(
                "w1",
                "write_file",
                json!({"path": "notes.md", "content": "forty parts, read"}),
            )
        } else {
            call(
                &format!("c{}", claim + 1),
                "update_goal",
                json!({"status": "complete", "claim": "notes.md written"}),
            )
        })
    });
}

#[tokio::test]
async fn a_forty_turn_goal_with_5kb_reads_in_an_8k_window_completes_and_keeps_its_contract() {
    let mock = MockServer::start().await;
    // 8k tokens as the mock counts them (bytes / 4).
    mock.enforce_window(32_000, Overflow::OpenAi);
    script(&mock);
    let mut session = SessionBuilder::openai(&mock.url)
        .context_window(8_000)
        .start()
        .await;
    let line = "a line of one part of a long document, read to fill the window.\n";
    for n in 0..TURNS {
        let text = format!("part {n}\n{}", line.repeat(FILE_BYTES / line.len() + 1));
        std::fs::write(
            session.workspace_path().join(format!("part{n:02}.txt")),
            &text[..FILE_BYTES],
        )
        .expect("part");
    }
    session.submit(Op::Goal {
        action: Box::new(GoalAction::Set {
            objective: OBJECTIVE.into(),
            budgets: Budgets::default(),
            settings: GoalSettings {
                verify: VerifyMode::Subagent,
                ..GoalSettings::default()
            },
        }),
    });
    let events = session
        .events_until(|e| {
            matches!(
                e,
                Event::GoalUpdated { status, .. } if status.as_str() != "active"
            )
        })
        .await;
    let last = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::GoalUpdated { status, reason, .. } => {
                Some(format!("{}({})", status.as_str(), reason.as_str()))
            }
            _ => None,
        })
        .expect("goal.updated");
    assert_eq!(last, "complete(verifier_met)");
    let turns = events
        .iter()
        .filter(|e| matches!(e, Event::TurnCompleted { .. }))
        .count();
    assert!(turns > TURNS, "{turns} turns");
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::TurnFailed { .. })),
        "a turn failed"
    );
    let done = compactions(&events);
    assert!(done.len() >= 5, "compacted only {} times", done.len());
    // The threshold came first: the window never refused a request.
    assert_eq!(mock.overflows(), 0);
    assert_eq!(mock.violations(), Vec::<String>::new());

    let requests = mock.requests();
    let largest = requests
        .iter()
        .map(|r| r.to_string().len())
        .max()
        .unwrap_or(0);
    assert!(largest <= 32_000, "a request of {largest} bytes");
    let compacted: Vec<&Value> = requests
        .iter()
        .filter(|r| !is_summary(r) && r["messages"].to_string().contains(RECORD_TAG))
        .collect();
    assert!(!compacted.is_empty(), "no request sent a compaction record");
    // Every compacted worker request still carries the objective.
    for request in compacted.iter().filter(|r| !is_verifier(r)) {
        assert!(
            request["messages"].to_string().contains(OBJECTIVE),
            "a compacted request lost the objective"
        );
    }
    // After the failed verdict, the worker's requests carry its gap, the
    // compacted ones included, until the gap is dealt with.
    let after_fail: Vec<&Value> = requests
        .iter()
        .skip_while(|r| !is_verifier(r))
        .filter(|r| !is_verifier(r) && !is_summary(r))
        .collect();
    assert!(
        after_fail
            .first()
            .is_some_and(|r| r["messages"].to_string().contains(GAP)),
        "the gap never reached the worker"
    );
    // Both verifications were given the objective.
    let verifications: Vec<&Value> = requests.iter().filter(|r| is_verifier(r)).collect();
    assert!(
        verifications.len() >= 2,
        "{} verifier requests",
        verifications.len()
    );
    for request in verifications {
        assert!(
            request["messages"].to_string().contains(OBJECTIVE),
            "the verifier lost the objective"
        );
    }
    assert!(session.workspace_path().join("notes.md").exists());
    session.shutdown().await;
}
