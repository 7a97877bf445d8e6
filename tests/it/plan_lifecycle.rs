//! Plan → approve → implement, end to end against the mock server, asserting
//! on what the model was actually sent.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cadre::runtime::Mode;
use cadre::runtime::plan::{SNAPSHOT_LIMIT, backup_path, snapshot_of};
use cadre::runtime::protocol::{Event, Op, PlanAction};
use cadre::runtime::store::{
    IMPLEMENT_INSTRUCTION, ModeIntent, QuestionnaireAnswer, QuestionnaireKind,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, contents, is_turn_end, tool_results, turn_end};

const PLAN: &str =
    "## Summary\n\nAdd a `greeting` module with `greet()`.\n\n## Approach\n\n1. Write it.\n";

fn has_reminder(request: &Value) -> bool {
    request.to_string().contains("<plan-mode-reminder>")
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Sends a message that enters Plan with it, and runs the turn in which
/// the model writes `plan` and submits it; returns the questionnaire id.
async fn plan_and_submit(mock: &MockServer, session: &mut TestSession, plan: &str) -> String {
    let plan_file = session.plan_file.display().to_string();
    mock.push([
        Reply::sse(&tool_call_chunks(
            "w1",
            "write_file",
            &json!({"path": plan_file, "content": plan}),
        )),
        Reply::sse(&tool_call_chunks("x1", "exit_plan_mode", &json!({}))),
    ]);
    session.submit(Op::UserInput {
        text: "plan a greeting module".into(),
        intent: Some(ModeIntent::PlanEntry),
    });
    let events = session.events_until(is_turn_end).await;
    assert!(
        matches!(
            turn_end(&events),
            Event::TurnCompleted { iterations: 2, .. }
        ),
        "{:?}",
        turn_end(&events)
    );
    assert!(events.contains(&Event::ModeChanged { mode: Mode::Plan }));
    let opened = events.iter().find_map(|e| match e {
        Event::QuestionnaireOpened {
            id,
            kind: QuestionnaireKind::PlanApproval,
            sha256,
            head,
            ..
        } => Some((id.clone(), sha256.clone(), head.clone())),
        _ => None,
    });
    let (id, sha256, head) = opened.expect("a questionnaire opened");
    // The person asked to approve it sees its first lines.
    let first: Vec<&str> = plan.lines().take(40).collect();
    assert!(head.starts_with(&first.join("\n")), "{head}");
    assert_eq!(
        sha256,
        snapshot_of(plan.to_string()).sha256,
        "the hash is of the frozen plan"
    );
    id
}

async fn answer(session: &mut TestSession, id: &str, answer: QuestionnaireAnswer) -> Vec<Event> {
    session.submit(Op::Answer {
        id: id.into(),
        answer,
    });
    session
        .events_until(|e| {
            matches!(
                e,
                Event::QuestionnaireAnswered { .. } | Event::OpRejected { .. }
            )
        })
        .await
}

#[tokio::test]
async fn an_approved_plan_is_implemented_from_its_frozen_snapshot_in_work_mode() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let id = plan_and_submit(&mock, &mut session, PLAN).await;
    assert_eq!(
        mock.requests().len(),
        2,
        "the turn ends at exit_plan_mode: no third request"
    );
    assert!(
        mock.requests().iter().all(has_reminder),
        "both planning requests were in Plan mode"
    );

    // The implementation edits the plan file half-way; the next request must
    // still carry only the snapshot approved.
    let plan_file = session.plan_file.clone();
    mock.respond_with(move |request| {
        let n = request["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        Some(if n < 3 {
            std::fs::write(&plan_file, "## Summary\n\nEDITED AFTER APPROVAL\n").ok()?;
            Reply::sse(&tool_call_chunks("r1", "list_dir", &json!({})))
        } else {
            Reply::sse(&text_chunks("implemented"))
        })
    });
    let answered = answer(&mut session, &id, QuestionnaireAnswer::Approve).await;
    assert_eq!(
        answered.last(),
        Some(&Event::QuestionnaireAnswered {
            id: id.clone(),
            answer: QuestionnaireAnswer::Approve,
            mode: Mode::Work
        })
    );
    let implementing = session.events_until(is_turn_end).await;
    assert!(matches!(
        turn_end(&implementing),
        Event::TurnCompleted { turn_id: 2, .. }
    ));

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests[2..] {
        assert!(
            !has_reminder(request),
            "the implementation runs in Work mode"
        );
        let tools = offered(request);
        assert!(
            tools.contains(&"bash".to_string()) && !tools.contains(&"exit_plan_mode".to_string()),
            "{tools:?}"
        );
        let users = contents(request, "user");
        let instruction = users.last().expect("a user message");
        assert_eq!(instruction, &format!("{IMPLEMENT_INSTRUCTION}{PLAN}"));
        assert!(
            !request.to_string().contains("EDITED AFTER APPROVAL"),
            "a later edit reached the model"
        );
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    // Approving again changes nothing: one implementation message.
    let again = answer(&mut session, &id, QuestionnaireAnswer::Approve).await;
    assert!(
        matches!(again.last(), Some(Event::OpRejected { message, .. }) if message.contains("already answered"))
    );
    let session_id = session.session_id.clone();
    let admitted = session
        .store
        .ask(|reply| cadre::actors::store::StoreRequest::Admitted { session_id, reply })
        .await
        .expect("admitted");
    let implementations = admitted
        .iter()
        .filter(|(_, _, c)| c.starts_with(IMPLEMENT_INSTRUCTION))
        .count();
    assert_eq!(implementations, 1);
    session.shutdown().await;
}

#[tokio::test]
async fn defer_changes_nothing_revise_runs_a_plan_turn_with_the_feedback_and_withdraw_returns_to_work()
 {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let first = plan_and_submit(&mock, &mut session, PLAN).await;

    let deferred = answer(&mut session, &first, QuestionnaireAnswer::Defer).await;
    assert!(matches!(
        deferred.last(),
        Some(Event::QuestionnaireAnswered {
            mode: Mode::Plan,
            ..
        })
    ));
    session
        .events_until(|e| matches!(e, Event::SessionIdle { .. }))
        .await;
    assert_eq!(mock.requests().len(), 2, "defer runs nothing");

    // A new submission, sent back with feedback: a follow-up turn in Plan.
    mock.push([Reply::sse(&tool_call_chunks(
        "x2",
        "exit_plan_mode",
        &json!({}),
    ))]);
    let events = session.turn("submit it again").await;
    let second = events
        .iter()
        .find_map(|e| match e {
            Event::QuestionnaireOpened { id, .. } => Some(id.clone()),
            _ => None,
        })
        .expect("a second questionnaire");
    mock.push([Reply::sse(&tool_call_chunks(
        "x3",
        "exit_plan_mode",
        &json!({}),
    ))]);
    let revised = answer(
        &mut session,
        &second,
        QuestionnaireAnswer::Revise {
            feedback: "cover the error cases".into(),
        },
    )
    .await;
    assert!(matches!(
        revised.last(),
        Some(Event::QuestionnaireAnswered {
            mode: Mode::Plan,
            ..
        })
    ));
    let follow_up = session.events_until(is_turn_end).await;
    assert!(matches!(turn_end(&follow_up), Event::TurnCompleted { .. }));
    let request = mock.requests().pop().expect("the follow-up request");
    assert!(
        has_reminder(&request),
        "the follow-up turn runs in Plan mode"
    );
    assert!(
        contents(&request, "user")
            .last()
            .is_some_and(|t| t.contains("cover the error cases"))
    );
    let third = follow_up
        .iter()
        .find_map(|e| match e {
            Event::QuestionnaireOpened { id, .. } => Some(id.clone()),
            _ => None,
        })
        .expect("a third questionnaire");

    let before = mock.requests().len();
    let withdrawn = answer(&mut session, &third, QuestionnaireAnswer::Withdraw).await;
    assert!(matches!(
        withdrawn.last(),
        Some(Event::QuestionnaireAnswered {
            mode: Mode::Work,
            ..
        })
    ));
    session
        .events_until(|e| matches!(e, Event::SessionIdle { .. }))
        .await;
    assert_eq!(mock.requests().len(), before, "withdraw implements nothing");
    session.shutdown().await;
}

#[tokio::test]
async fn the_plan_tools_exist_only_where_they_belong() {
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("a")), Reply::sse(&text_chunks("b"))]);
    let mut plain = SessionBuilder::openai(&mock.url).start().await;
    plain.turn("work").await;
    let mut entry = SessionBuilder::openai(&mock.url)
        .plan_agent_entry()
        .start()
        .await;
    entry.turn("work").await;
    let requests = mock.requests();
    let (work, work_with_entry) = (offered(&requests[0]), offered(&requests[1]));
    assert!(
        !work.contains(&"enter_plan_mode".into()) && !work.contains(&"exit_plan_mode".into()),
        "{work:?}"
    );
    assert!(
        work_with_entry.contains(&"enter_plan_mode".into())
            && !work_with_entry.contains(&"exit_plan_mode".into())
    );

    // Forged calls outside their mode are refused without running.
    mock.push([
        Reply::sse(&tool_call_chunks("f1", "exit_plan_mode", &json!({}))),
        Reply::sse(&text_chunks("ok")),
    ]);
    let forged = plain.turn("forge").await;
    assert_eq!(
        tool_results(&forged),
        [("exit_plan_mode".to_string(), "tool_not_allowed".to_string())]
    );
    plain.submit(Op::Plan {
        action: PlanAction::On,
    });
    plain
        .events_until(|e| matches!(e, Event::ModeChanged { .. }))
        .await;
    mock.push([
        Reply::sse(&tool_call_chunks("f2", "enter_plan_mode", &json!({}))),
        Reply::sse(&text_chunks("ok")),
    ]);
    let inside = plain.turn("forge in plan").await;
    assert_eq!(
        tool_results(&inside),
        [(
            "enter_plan_mode".to_string(),
            "tool_not_allowed".to_string()
        )]
    );
    assert!(offered(mock.requests().last().expect("request")).contains(&"exit_plan_mode".into()));
    plain.shutdown().await;
    entry.shutdown().await;
}

#[tokio::test]
async fn the_models_request_to_plan_waits_for_the_user_and_blocks_entry_until_answered() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .plan_agent_entry()
        .start()
        .await;
    mock.push([Reply::sse(&tool_call_chunks(
        "e1",
        "enter_plan_mode",
        &json!({"reason": "this needs a design first"}),
    ))]);
    let events = session.turn("build the feature").await;
    let id = events
        .iter()
        .find_map(|e| match e {
            Event::QuestionnaireOpened {
                id,
                kind: QuestionnaireKind::PlanEntry,
                ..
            } => Some(id.clone()),
            _ => None,
        })
        .expect("an entry questionnaire");
    assert_eq!(
        mock.requests().len(),
        1,
        "the turn ended at enter_plan_mode"
    );

    // Entry by hand is refused while the questionnaire waits.
    session.submit(Op::Plan {
        action: PlanAction::On,
    });
    session.submit(Op::UserInput {
        text: "plan it".into(),
        intent: Some(ModeIntent::PlanEntry),
    });
    for _ in 0..2 {
        let refused = session
            .events_until(|e| matches!(e, Event::OpRejected { .. }))
            .await;
        assert!(
            matches!(refused.last(), Some(Event::OpRejected { message, .. }) if message.contains(&format!("questionnaire {id} waits"))),
            "{refused:?}"
        );
    }

    mock.push([Reply::sse(&text_chunks("planning now"))]);
    let confirmed = answer(&mut session, &id, QuestionnaireAnswer::Approve).await;
    assert!(matches!(
        confirmed.last(),
        Some(Event::QuestionnaireAnswered {
            mode: Mode::Plan,
            ..
        })
    ));
    let continuation = session.events_until(is_turn_end).await;
    assert!(matches!(
        turn_end(&continuation),
        Event::TurnCompleted { .. }
    ));
    let request = mock.requests().pop().expect("the continuation");
    assert!(has_reminder(&request), "the continuation runs in Plan mode");
    assert!(
        contents(&request, "user")
            .last()
            .is_some_and(|t| t.contains("The user confirmed"))
    );
    session.shutdown().await;
}

#[tokio::test]
async fn re_entering_plan_backs_up_the_earlier_plan() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let plan_file: PathBuf = session.plan_file.clone();
    std::fs::create_dir_all(plan_file.parent().expect("dir")).expect("artifacts");
    std::fs::write(&plan_file, "## Summary\n\nthe earlier plan\n").expect("earlier plan");
    session.submit(Op::Plan {
        action: PlanAction::On,
    });
    let events = session
        .events_until(|e| matches!(e, Event::ModeChanged { .. }))
        .await;
    let backup = backup_path(&plan_file);
    assert!(events.contains(&Event::PlanEntered {
        plan_path: plan_file.display().to_string(),
        backup: Some(backup.display().to_string()),
    }));
    assert!(!plan_file.exists(), "the new plan starts empty");
    assert_eq!(
        std::fs::read_to_string(&backup).expect("backup"),
        "## Summary\n\nthe earlier plan\n"
    );
    session.submit(Op::Plan {
        action: PlanAction::View,
    });
    let view = session
        .events_until(|e| matches!(e, Event::PlanView { .. }))
        .await;
    assert!(matches!(
        view.last(),
        Some(Event::PlanView { text: None, .. })
    ));
    session.shutdown().await;
}

#[tokio::test]
async fn a_plan_over_512_kib_is_approved_truncated_with_a_note() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    session.submit(Op::Plan {
        action: PlanAction::On,
    });
    session
        .events_until(|e| matches!(e, Event::ModeChanged { .. }))
        .await;
    let big = format!(
        "## Summary\n\nA big plan.\n\n{}",
        "- a step of the plan\n".repeat(SNAPSHOT_LIMIT / 10)
    );
    std::fs::create_dir_all(session.plan_file.parent().expect("dir")).expect("artifacts");
    std::fs::write(&session.plan_file, &big).expect("big plan");
    mock.push([Reply::sse(&tool_call_chunks(
        "x1",
        "exit_plan_mode",
        &json!({}),
    ))]);
    let events = session.turn("submit").await;
    let (id, truncated) = events
        .iter()
        .find_map(|e| match e {
            Event::QuestionnaireOpened { id, truncated, .. } => Some((id.clone(), *truncated)),
            _ => None,
        })
        .expect("questionnaire");
    assert!(truncated);
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let keep = seen.clone();
    mock.respond_with(move |request| {
        *keep.lock().ok()? = contents(request, "user").last().cloned();
        Some(Reply::sse(&text_chunks("done")))
    });
    answer(&mut session, &id, QuestionnaireAnswer::Approve).await;
    session.events_until(is_turn_end).await;
    let implementation = seen
        .lock()
        .expect("lock")
        .clone()
        .expect("the implementation request");
    assert!(implementation.starts_with(IMPLEMENT_INSTRUCTION));
    assert!(implementation.contains("[The plan was truncated at 512 KiB for approval:"));
    assert!(implementation.len() < big.len() + IMPLEMENT_INSTRUCTION.len());
    session.shutdown().await;
}
