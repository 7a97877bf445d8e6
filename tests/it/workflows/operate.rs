//! Operate delegation: the `workflow` tool is offered only in Operate; an
//! invalid plan comes back as the call's error; a valid one runs under the
//! session's authority and its report names what completed and what is
//! blocked.

use cadre::actors::Started;
use cadre::runtime::Mode;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{ApprovalDecision, Event, FailureCategory, Op, ToolStatus};
use cadre::workflows::scheduler::State;
use serde_json::{Value, json};

use super::{Harness, answered, prompt_of};
use crate::support::PATIENCE;
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Runs one message in a session of `mode` and returns its events up to
/// the turn's end.
async fn session_turn(h: &Harness, mode: Mode, message: &str) -> Vec<Event> {
    let mut options = h.options(Posture::Bypass);
    options.mode = Some(mode);
    let mut started = h.host.start(options).await.expect("session");
    started.handle.submit(Op::user(message)).expect("submitted");
    let mut events = Vec::new();
    loop {
        let envelope = tokio::time::timeout(PATIENCE * 3, started.events.recv())
            .await
            .expect("an event in time")
            .expect("the session is alive");
        let end = matches!(
            envelope.event,
            Event::TurnCompleted { .. } | Event::TurnFailed { .. }
        );
        events.push(envelope.event);
        if end {
            break;
        }
    }
    let _ = started.handle.submit(Op::Shutdown);
    started.handle.stopped().await;
    events
}

#[tokio::test]
async fn the_workflow_tool_is_offered_only_in_operate() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| Some(Reply::sse(&text_chunks("hello"))));
    let h = Harness::new(&mock).await;
    for mode in [Mode::Plan, Mode::Work, Mode::Operate] {
        session_turn(&h, mode, &format!("hi from {mode}")).await;
    }
    let tools: Vec<(String, bool)> = mock
        .requests()
        .iter()
        .map(|r| (prompt_of(r), offered(r).contains(&"workflow".to_string())))
        .collect();
    assert_eq!(
        tools,
        [
            ("hi from plan".to_string(), false),
            ("hi from work".to_string(), false),
            ("hi from operate".to_string(), true),
        ]
    );
}

#[tokio::test]
async fn an_invalid_plan_comes_back_as_an_error_and_nothing_runs() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks(
                "w1",
                "workflow",
                &json!({
                    "workflow": {"name": "bad"},
                    "steps": [
                        {"name": "a", "prompt": "A", "needs": ["b"]},
                        {"name": "b", "prompt": "B", "needs": ["a"]}
                    ]
                }),
            ))
        } else {
            Reply::sse(&text_chunks("I will fix the plan"))
        })
    });
    let h = Harness::new(&mock).await;
    let events = session_turn(&h, Mode::Operate, "delegate a cycle").await;
    let result = events
        .iter()
        .find_map(|e| match e {
            Event::ToolResult {
                name,
                status,
                output,
                ..
            } if name == "workflow" => Some((*status, output.clone())),
            _ => None,
        })
        .expect("a workflow result");
    assert_eq!(result.0, ToolStatus::Error);
    assert!(
        result.1.contains("cycle in needs: a → b → a"),
        "{}",
        result.1
    );
    assert_eq!(mock.requests().len(), 2, "no step ran");
}

#[tokio::test]
async fn a_valid_plan_runs_and_its_report_names_completed_and_blocked_steps() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        Some(match (prompt.as_str(), answered(request)) {
            ("delegate the work", 0) => Reply::sse(&tool_call_chunks(
                "w1",
                "workflow",
                &json!({
                    "workflow": {"name": "op", "max_parallel": 2},
                    "steps": [
                        {"name": "docs", "prompt": "write the docs"},
                        {"name": "code", "prompt": "write the code"},
                        {"name": "ship", "prompt": "ship it", "needs": ["code"]}
                    ]
                }),
            )),
            ("delegate the work", _) => Reply::sse(&text_chunks("the workflow report is in")),
            ("write the docs", _) => Reply::sse(&text_chunks("DOCS-DONE")),
            ("write the code", _) => Reply::error(400, "cannot write code"),
            _ => return None,
        })
    });
    let h = Harness::new(&mock).await;
    let events = session_turn(&h, Mode::Operate, "delegate the work").await;
    let report = events
        .iter()
        .find_map(|e| match e {
            Event::ToolResult { name, output, .. } if name == "workflow" => Some(output.clone()),
            _ => None,
        })
        .expect("a workflow result");
    assert!(report.contains("workflow failed"), "{report}");
    assert!(
        report.contains("- docs (finalized): DOCS-DONE\n  calls made: none\n"),
        "{report}"
    );
    assert!(report.contains("- code failed"), "{report}");
    assert!(
        report.contains("- ship blocked: needs 'code', which failed"),
        "{report}"
    );
    assert!(report.contains("Next:"), "{report}");
    // The run's progress went to the session's stream meanwhile.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::WorkflowStarted { .. }))
    );
    assert!(events.iter().any(|e| matches!(e, Event::StepState { step, state, .. } if step == "ship" && *state == State::Blocked)));
}

/// A person's answer to prompt `id`, given to `started`.
fn answer(started: &Started, id: &str, decision: ApprovalDecision) {
    started
        .handle
        .submit(Op::Approve {
            id: id.to_string(),
            decision,
            reason: None,
        })
        .expect("answered");
}

/// Reads `started`'s events until one matches `want`, and returns it.
async fn until(started: &mut Started, want: impl Fn(&Event) -> bool) -> Event {
    loop {
        let envelope = tokio::time::timeout(PATIENCE * 3, started.events.recv())
            .await
            .expect("an event in time")
            .expect("the session is alive");
        if want(&envelope.event) {
            return envelope.event;
        }
    }
}

#[tokio::test]
async fn an_answer_to_a_steps_prompt_reaches_only_the_run_its_own_session_delegated() {
    // Two sessions of one host delegate a workflow with the same step
    // names, so their steps' prompts have the same id. Each step writes a
    // file of its own under Ask and waits for a person's answer.
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        let delegate = |file: &str| {
            tool_call_chunks(
                "w1",
                "workflow",
                &json!({
                    "workflow": {"name": "same"},
                    "steps": [{"name": "w", "prompt": format!("write {file}")}]
                }),
            )
        };
        Some(match (prompt.as_str(), answered(request)) {
            ("delegate a", 0) => Reply::sse(&delegate("a.txt")),
            ("delegate b", 0) => Reply::sse(&delegate("b.txt")),
            ("delegate a" | "delegate b", _) => Reply::sse(&text_chunks("delegated")),
            (step, 0) if step.starts_with("write ") => Reply::sse(&tool_call_chunks(
                "c1",
                "write_file",
                &json!({"path": &step["write ".len()..], "content": "written\n"}),
            )),
            (_, _) => Reply::sse(&text_chunks("step done")),
        })
    });
    let h = Harness::new(&mock).await;
    let mut sessions = Vec::new();
    for name in ["a", "b"] {
        let mut options = h.options(Posture::Suggest);
        options.mode = Some(Mode::Operate);
        options.interactive = true;
        let started = h.host.start(options).await.expect("session");
        started
            .handle
            .submit(Op::user(format!("delegate {name}")))
            .expect("submitted");
        sessions.push(started);
    }
    let mut ids = Vec::new();
    for started in &mut sessions {
        let asked = until(started, |e| matches!(e, Event::ApprovalRequested { .. })).await;
        let Event::ApprovalRequested { id, .. } = asked else {
            unreachable!()
        };
        ids.push(id);
    }
    assert_eq!(ids[0], ids[1], "the two steps' prompts share an id");
    let [mut a, mut b] = <[Started; 2]>::try_from(sessions).ok().expect("two");

    // Session a allows its step's write; its run finishes.
    answer(&a, &ids[0], ApprovalDecision::AllowOnce);
    until(&mut a, |e| matches!(e, Event::TurnCompleted { .. })).await;
    assert_eq!(
        std::fs::read_to_string(h.path("a.txt")).expect("a's step wrote"),
        "written\n"
    );
    // Session b's step is still waiting: a's answer never reached it.
    assert!(!h.path("b.txt").exists(), "b's step wrote on a's answer");

    // b refuses its own; its step's write never happens.
    answer(&b, &ids[1], ApprovalDecision::Deny);
    let resolved = until(&mut b, |e| {
        matches!(e, Event::ApprovalResolved { .. } | Event::OpRejected { .. })
    })
    .await;
    assert!(
        matches!(&resolved, Event::ApprovalResolved { id, .. } if id == &ids[1]),
        "b's answer found its own prompt: {resolved:?}"
    );
    until(&mut b, |e| matches!(e, Event::TurnCompleted { .. })).await;
    assert!(!h.path("b.txt").exists());

    // An answer for a run nobody delegated any more is refused, as an
    // unknown id is.
    answer(&a, &ids[0], ApprovalDecision::AllowOnce);
    let refused = until(&mut a, |e| matches!(e, Event::OpRejected { .. })).await;
    assert!(
        matches!(&refused, Event::OpRejected { op, message, .. }
            if op == "approve" && message.contains(&ids[0])),
        "{refused:?}"
    );
    for started in [a, b] {
        let _ = started.handle.submit(Op::Shutdown);
        started.handle.stopped().await;
    }
}

#[tokio::test]
async fn a_run_reusing_a_step_name_of_a_run_in_progress_is_refused_so_one_answer_reaches_one_step()
{
    // A session's runs at once must not share a step name: an answer names
    // the step, and two held calls must never take one answer.
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(match (prompt_of(request).as_str(), answered(request)) {
            ("write one.txt", 0) => Reply::sse(&tool_call_chunks(
                "c1",
                "write_file",
                &json!({"path": "one.txt", "content": "one\n"}),
            )),
            (_, _) => Reply::sse(&text_chunks("step done")),
        })
    });
    let h = Harness::new(&mock).await;
    let mut options = h.options(Posture::Suggest);
    options.interactive = true;
    let (tx, mut rx) = cadre::actors::events::channel();
    let caller = h
        .host
        .sessions()
        .workflow_caller(&options, cadre::actors::EventSink::new(tx))
        .expect("caller");
    let plan = |prompt: &str| {
        json!({
            "workflow": {"name": "same"},
            "steps": [{"name": "w", "prompt": prompt}]
        })
    };
    let engine = h.host.engine();
    let first = engine.run(caller.clone(), plan("write one.txt"));
    tokio::pin!(first);
    // The first run's step asks; meanwhile a second run with a step `w`
    // is refused before anything of it runs.
    let id = loop {
        tokio::select! {
            report = &mut first => panic!("the run ended before it asked: {report:?}"),
            envelope = rx.recv() => {
                if let Some(Event::ApprovalRequested { id, .. }) = envelope.map(|e| e.event) {
                    break id;
                }
            }
        }
    };
    let refused = engine
        .run(caller.clone(), plan("write two.txt"))
        .await
        .expect_err("refused");
    assert!(
        refused.message.contains("step named 'w'") && refused.message.contains("Nothing ran"),
        "{}",
        refused.message
    );
    assert!(
        !mock
            .requests()
            .iter()
            .any(|r| prompt_of(r) == "write two.txt")
    );
    // The answer reaches the one step that asked, and its run finishes.
    assert!(engine.approve("", &id, ApprovalDecision::AllowOnce, None));
    let report = tokio::time::timeout(PATIENCE * 3, first)
        .await
        .expect("in time")
        .expect("a report");
    assert!(report.contains("- w (finalized)"), "{report}");
    assert_eq!(
        std::fs::read_to_string(h.path("one.txt")).expect("written"),
        "one\n"
    );
    // An answer for it now is refused, and its names are free again.
    assert!(!engine.approve("", &id, ApprovalDecision::AllowOnce, None));
    let again = engine
        .run(caller.clone(), plan("say hello"))
        .await
        .expect("the name is free again");
    assert!(again.contains("- w (finalized)"), "{again}");
}

#[tokio::test]
async fn cancelling_the_turn_cancels_its_delegated_run_and_gives_its_step_names_back() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        // The session's requests end with its newest message: a person's
        // asks for the workflow, a tool result for the closing answer.
        let last = &request["messages"]
            .as_array()
            .expect("messages")
            .last()
            .cloned();
        let asked = last.as_ref().is_some_and(|m| m["role"] == "user");
        Some(match (prompt_of(request).as_str(), answered(request)) {
            ("delegate", _) if asked => Reply::sse(&tool_call_chunks(
                "w1",
                "workflow",
                &json!({
                    "workflow": {"name": "wf"},
                    "steps": [{"name": "w", "prompt": "write x.txt"}]
                }),
            )),
            ("write x.txt", 0) => Reply::sse(&tool_call_chunks(
                "c1",
                "write_file",
                &json!({"path": "x.txt", "content": "x\n"}),
            )),
            (_, _) => Reply::sse(&text_chunks("done")),
        })
    });
    let h = Harness::new(&mock).await;
    let mut options = h.options(Posture::Suggest);
    options.mode = Some(Mode::Operate);
    options.interactive = true;
    let mut s = h.host.start(options).await.expect("session");
    s.handle.submit(Op::user("delegate")).expect("submitted");
    until(&mut s, |e| matches!(e, Event::ApprovalRequested { .. })).await;

    // The person cancels the turn while the step waits for them.
    s.handle.submit(Op::Cancel).expect("cancelled");
    // The turn fails, and the run is cancelled with it (its step does not
    // go on for nobody), in either order.
    let (mut failed, mut cancelled) = (false, false);
    while !(failed && cancelled) {
        match until(&mut s, |e| {
            matches!(e, Event::TurnFailed { .. } | Event::StepState { .. })
        })
        .await
        {
            Event::TurnFailed { category, .. } => {
                assert_eq!(category, FailureCategory::Cancelled);
                failed = true;
            }
            Event::StepState { step, state, .. } if step == "w" => {
                cancelled |= state == State::Cancelled;
            }
            _ => {}
        }
    }

    // The same plan again is not refused for its step names: it asks anew.
    s.handle
        .submit(Op::user("delegate again"))
        .expect("submitted");
    let next = until(&mut s, |e| {
        matches!(
            e,
            Event::ApprovalRequested { .. } | Event::ToolResult { .. }
        )
    })
    .await;
    assert!(
        matches!(next, Event::ApprovalRequested { .. }),
        "the second run was refused: {next:?}"
    );
    assert!(!h.path("x.txt").exists(), "nothing was allowed");
    let _ = s.handle.submit(Op::Shutdown);
    s.handle.stopped().await;
}
