//! Goals driven to a verified end (G1–G8), against the mock server over
//! real HTTP: continuations, the verifier, budgets, the breaker.

use cadre::runtime::goal::{Budgets, GoalAction, GoalCommand, GoalSettings, VerifyMode};
use cadre::runtime::protocol::{Event, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, contents};

mod checks;
mod cli;

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
        action: Box::new(GoalAction::Set {
            objective: objective.into(),
            budgets: Budgets::default(),
            settings,
        }),
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

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The last user message of a request (a continuation's text).
fn last_user(request: &Value) -> String {
    contents(request, "user").pop().unwrap_or_default()
}

#[tokio::test]
async fn a_fail_puts_its_gaps_into_the_next_continuation_then_a_pass_completes() {
    let mock = MockServer::start().await;
    mock.push([
        claim("c1"),
        text("GAP: b.txt is missing\nVERDICT: FAIL"),
        write("w1", "b.txt"),
        text("wrote b"),
        claim("c2"),
        text("VERDICT: PASS"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("write b.txt", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(
        verdicts(&events),
        [
            ("fail".to_string(), vec!["b.txt is missing".to_string()]),
            ("pass".to_string(), vec![])
        ]
    );
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    let requests = mock.requests();
    let after_fail = last_user(&requests[2]);
    assert!(
        after_fail.contains("found the goal not met yet. Gaps:\n- b.txt is missing"),
        "{after_fail}"
    );
    // Reported once: the next continuation does not repeat them.
    assert!(!last_user(&requests[4]).contains("b.txt is missing"));
    session.shutdown().await;
}

#[tokio::test]
async fn the_same_gaps_five_times_pause_the_goal_for_no_progress() {
    let mock = MockServer::start().await;
    for n in 0..5 {
        mock.push([
            claim(&format!("c{n}")),
            text("GAP: the tests still fail\nVERDICT: FAIL"),
        ]);
    }
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("make the tests pass", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(verdicts(&events).len(), 5);
    assert_eq!(last_goal(&events), "paused(no_progress)");
    assert_eq!(mock.requests().len(), 10);
    session.shutdown().await;
}

#[tokio::test]
async fn the_verifier_is_offered_only_read_only_tools_and_its_forged_write_is_refused() {
    let mock = MockServer::start().await;
    mock.push([
        claim("c1"),
        write("forged", "verdict.txt"),
        text("VERDICT: PASS"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("anything", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    let requests = mock.requests();
    let worker = offered(&requests[0]);
    assert!(worker.contains(&"write_file".to_string()), "{worker:?}");
    assert!(worker.contains(&"update_goal".to_string()), "{worker:?}");
    let verifier = offered(&requests[1]);
    assert!(is_verifier(&requests[1]));
    assert_eq!(
        verifier,
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "bash",
            "process",
            "run_check"
        ],
        "the verifier may only read (run_check runs a check: it cannot change the workspace; \
         process only lists and reads)"
    );
    let answers = contents(&requests[2], "tool");
    assert!(
        answers[0].starts_with("error (tool_not_allowed): Plan mode is read-only"),
        "{answers:?}"
    );
    assert!(!session.workspace_path().join("verdict.txt").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn a_budget_spent_mid_turn_refuses_tools_after_the_grace_step_then_one_summary_turn_runs_without_tools()
 {
    let mock = MockServer::start().await;
    // Each tool-call response costs 27 tokens; the budget is 60.
    mock.push([
        write("w1", "a.txt"),
        write("w2", "b.txt"),
        write("w3", "c.txt"),
        write("w4", "d.txt"),
        text("Done: a and b. Left: c and d. Raise the budget to go on."),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(Op::Goal {
        action: Box::new(GoalAction::Set {
            objective: "write four files".into(),
            budgets: Budgets {
                tokens: Some(60),
                ..Budgets::default()
            },
            settings: verify(VerifyMode::Subagent),
        }),
    });
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "budget_limited(tokens)");
    let results: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[2].starts_with("the goal's budget is spent: do not call"));
    assert!(results[3].starts_with("tools are disabled"));
    let ws = session.workspace_path();
    assert!(ws.join("b.txt").exists() && !ws.join("c.txt").exists());
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    assert!(
        offered(&requests[4]).is_empty(),
        "the summary turn has no tools"
    );
    assert!(last_user(&requests[4]).contains("Tools are disabled for this turn"));
    assert_eq!(continuations(&events), [1, 2]);
    session.shutdown().await;
}

#[tokio::test]
async fn identical_replies_three_times_pause_the_goal_with_a_nudge_before() {
    let mock = MockServer::start().await;
    mock.push([
        text("working on it"),
        text("working on it"),
        text("working on it"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("anything", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "paused(no_progress)");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(last_user(&requests[1]).contains("Do not spin: 1 of your last turns"));
    assert!(last_user(&requests[2]).contains("Do not spin: 2 of your last turns"));
    session.shutdown().await;
}

#[tokio::test]
async fn no_progress_after_a_rejected_claim_has_its_own_reason() {
    let mock = MockServer::start().await;
    mock.push([
        claim("c1"),
        text("GAP: nothing was done\nVERDICT: FAIL"),
        text("a"),
        text("b"),
        text("c"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("anything", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(
        last_goal(&events),
        "paused(no_progress_after_completion_claim)"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_user_message_goes_before_the_next_continuation() {
    let mock = MockServer::start().await;
    mock.push([
        write("w1", "a.txt"),
        text("wrote a"),
        text("hello to you"),
        claim("c1"),
        text("VERDICT: PASS"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("write a.txt", verify(VerifyMode::Subagent)));
    // Queued while the first continuation's turn runs.
    session.submit(Op::user("say hello"));
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    let requests = mock.requests();
    assert_eq!(last_user(&requests[2]), "say hello");
    assert!(last_user(&requests[3]).contains("Continue working on the goal"));
    assert_eq!(continuations(&events), [1, 2]);
    session.shutdown().await;
}

#[tokio::test]
async fn an_edit_during_a_turn_discards_its_completion_claim() {
    let mock = MockServer::start().await;
    mock.push([claim("c1"), claim("c2"), text("VERDICT: PASS")]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("write a.txt", verify(VerifyMode::Subagent)));
    // Edited while the first continuation's turn runs.
    session.submit(Op::Goal {
        action: Box::new(GoalAction::Command {
            command: GoalCommand::Edit {
                objective: "write a.txt and b.txt".into(),
            },
        }),
    });
    let events = until_idle(&mut session).await;
    assert_eq!(
        verdicts(&events).len(),
        1,
        "the stale claim was not verified"
    );
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    let requests = mock.requests();
    assert!(
        last_user(&requests[1])
            .contains("The goal was updated. Objective now:\nwrite a.txt and b.txt")
    );
    assert!(is_verifier(&requests[2]));
    assert!(last_user(&requests[2]).contains("write a.txt and b.txt"));
    session.shutdown().await;
}

#[tokio::test]
async fn token_budget_changes_only_in_a_turn_the_user_started() {
    let mock = MockServer::start().await;
    mock.push([
        call("t1", "update_goal", json!({"token_budget": "5K"})),
        call(
            "b1",
            "update_goal",
            json!({"status": "blocked", "reason": "need the user"}),
        ),
        call("t2", "update_goal", json!({"token_budget": 9000})),
        text("raised"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("anything", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "blocked(worker_reported)");
    let refused = contents(&mock.requests()[1], "tool");
    assert!(
        refused[0].starts_with(
            "error (tool_not_allowed): token_budget can change only in a turn the user started"
        ),
        "{refused:?}"
    );
    session.submit(Op::user("raise the goal's budget to 9000 tokens"));
    let events = until_idle(&mut session).await;
    let budgets: Vec<Option<u64>> = events
        .iter()
        .filter_map(|e| match e {
            Event::GoalUpdated { budgets, .. } => Some(budgets.tokens),
            _ => None,
        })
        .collect();
    assert!(budgets.contains(&Some(9000)), "{budgets:?}");
    session.shutdown().await;
}

#[tokio::test]
async fn command_verification_fails_with_the_output_tail_then_passes() {
    let mock = MockServer::start().await;
    mock.push([claim("c1"), write("w1", "done.txt"), claim("c2")]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set(
        "create done.txt",
        GoalSettings {
            verify: VerifyMode::Command,
            verify_command: Some(
                "test -f done.txt || { echo done.txt is missing; exit 1; }".into(),
            ),
            ..GoalSettings::default()
        },
    ));
    let events = until_idle(&mut session).await;
    let verdicts = verdicts(&events);
    assert_eq!(verdicts.len(), 2);
    assert_eq!(verdicts[0].0, "fail");
    assert!(
        verdicts[0].1[0].contains("exit 1") && verdicts[0].1[0].contains("done.txt is missing"),
        "{verdicts:?}"
    );
    assert_eq!(verdicts[1], ("pass".to_string(), vec![]));
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    // No model request verified anything: the command did.
    assert_eq!(mock.requests().len(), 3);
    assert!(last_user(&mock.requests()[1]).contains("done.txt is missing"));
    session.shutdown().await;
}

#[tokio::test]
async fn a_person_pauses_resumes_and_clears_the_goal() {
    let mock = MockServer::start().await;
    mock.push([
        claim("c1"),
        text("VERDICT: PARTIAL"),
        claim("c2"),
        text("VERDICT: PASS"),
    ]);
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(set("anything", verify(VerifyMode::Subagent)));
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "paused(verifier_partial)");
    session.submit(Op::Goal {
        action: Box::new(GoalAction::Command {
            command: GoalCommand::Resume,
        }),
    });
    let events = until_idle(&mut session).await;
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    assert!(last_user(&mock.requests()[2]).contains("Call get_goal first"));
    session.submit(Op::Goal {
        action: Box::new(GoalAction::Clear),
    });
    let cleared = session
        .events_until(|e| matches!(e, Event::GoalCleared {} | Event::OpRejected { .. }))
        .await;
    assert!(matches!(cleared.last(), Some(Event::GoalCleared {})));
    session.shutdown().await;
}
