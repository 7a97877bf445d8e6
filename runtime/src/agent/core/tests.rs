//! Table tests of the agent core: each case is a list of inputs and the
//! effects they lead to, rendered one per line, through one
//! [`check`] helper.

mod memory;
mod props;

use std::time::Instant;

use pretty_assertions::assert_eq;

use super::*;
use crate::Mode;
use crate::agent::{AgentReport, ChildState};
use crate::goal::GoalAction;
use crate::goal::{Proposal, VerifierOutcome};
use crate::permission::{Decision, Evaluation, Layer, Posture, Verdict};
use crate::plan::Snapshot;
use crate::plan::lifecycle::QuestionnaireAnswer;
use crate::protocol::{ApprovalDecision, Event, Op, Usage};
use crate::store::{AnswerOutcome, StoreError};
use crate::tool::{GoalToolRequest, PlanRequest, ToolError};

/// A session's core (`session`) or a sub-agent's at `1`.
fn core_of(session: bool, interactive: bool) -> AgentCore {
    let path = if session {
        AgentPath::root()
    } else {
        "1".parse().expect("path")
    };
    let config = CoreConfig {
        path,
        session,
        interactive,
        plan_agent_entry: true,
        plan_path: "/plans/plan.md".into(),
        posture: Posture::Suggest,
    };
    AgentCore::new(config, LiveAuthority::root(Mode::Work, Posture::Suggest))
}

/// Feeds `inputs` to `core` and renders what came out: each input's name,
/// then its effects, one per line.
fn run(core: &mut AgentCore, inputs: Vec<AgentInput>) -> String {
    let now = Instant::now();
    let mut lines = Vec::new();
    for input in inputs {
        lines.push(format!("> {}", input_name(&input)));
        for effect in core.step(input, now) {
            lines.push(format!("  {}", render(&effect)));
        }
    }
    lines.join("\n")
}

/// Runs `inputs` on a fresh session and compares what came out.
fn check(inputs: Vec<AgentInput>, expected: &str) {
    check_on(&mut core_of(true, true), inputs, expected);
}

fn check_on(core: &mut AgentCore, inputs: Vec<AgentInput>, expected: &str) {
    let got = run(core, inputs);
    assert_eq!(got.trim(), expected.trim(), "\n{got}");
}

fn event(event: &Event) -> String {
    serde_json::to_string(event).expect("event")
}

fn render(effect: &AgentEffect) -> String {
    match effect {
        AgentEffect::Emit(e) => format!("emit {}", event(e)),
        AgentEffect::EmitAs { cause, event: e } => format!("emit as {cause:?} {}", event(e)),
        AgentEffect::Persist(write) => match write {
            Write::Append { seq, message } => format!(
                "persist append {seq} {}",
                serde_json::to_string(message.as_ref()).expect("message")
            ),
            Write::Posture(p) => format!("persist posture {p}"),
            Write::Mode(m) => format!("persist mode {m}"),
            Write::Withdraw(id) => format!("persist withdraw {id}"),
            Write::Done(id) => format!("persist done {id}"),
            Write::Child {
                path,
                state,
                report,
            } => format!(
                "persist child {path} {state:?}{}",
                report
                    .as_ref()
                    .map(|r| format!(" report {}", r.status))
                    .unwrap_or_default()
            ),
            Write::Goal(goal) => format!("persist goal {:?} rev {}", goal.status, goal.revision),
            Write::ForgetGoal => "persist forget goal".into(),
        },
        AgentEffect::Ask(ask) => match ask {
            Ask::Admit {
                text,
                intent,
                start_seq,
            } => format!("ask admit {text:?} intent {intent:?} start {start_seq:?}"),
            Ask::StartTurn { queue_id, user } => format!(
                "ask start turn of {queue_id} user {:?}",
                user.as_ref().map(|(seq, _)| *seq)
            ),
            Ask::FinishTurn(id) => format!("ask finish turn of {id}"),
            Ask::Continue { text, n, .. } => format!("ask continue {n}: {}", first_line(text)),
            Ask::EnterPlan => "ask enter plan".into(),
            Ask::Answer { id, answer } => format!("ask answer {id} {answer:?}"),
            Ask::Pending => "ask pending".into(),
            Ask::OpenQuestionnaire { id, kind, .. } => format!("ask open {id} {kind:?}"),
        },
        AgentEffect::Audit { tool, line, .. } => format!("audit {tool}: {line}"),
        AgentEffect::Reply { ticket, reply } => match reply {
            Reply::Decision(d) => format!(
                "reply #{} {:?} by {:?}: {}",
                ticket.0, d.verdict, d.layer, d.reason
            ),
            Reply::Tool(Ok(text)) => format!("reply #{} ok: {}", ticket.0, first_line(text)),
            Reply::Tool(Err(e)) => format!("reply #{} error: {e}", ticket.0),
        },
        AgentEffect::Drop(ticket) => format!("drop #{}", ticket.0),
        AgentEffect::SpawnTurn(t) => format!(
            "spawn turn {} cause {:?} compact {} tools {} budget {} messages {}",
            t.turn_id,
            t.cause,
            t.compact_first,
            t.tools,
            t.budget.is_some(),
            t.conversation.view().len()
        ),
        AgentEffect::StopTurn => "stop turn".into(),
        AgentEffect::CancelTurn => "cancel turn".into(),
        AgentEffect::EndTurnAfterTools => "end turn after tools".into(),
        AgentEffect::HaltTurn { category, message } => format!("halt turn {category:?}: {message}"),
        AgentEffect::CompactTurn => "compact turn".into(),
        AgentEffect::Review {
            review_id, tool, ..
        } => format!("review {review_id} {tool}"),
        AgentEffect::StopReview(id) => format!("stop review {id}"),
        AgentEffect::Verify { turn_id, claim, .. } => format!("verify turn {turn_id}: {claim}"),
        AgentEffect::StopVerifier => "stop verifier".into(),
        AgentEffect::Freeze { ticket, id } => format!("freeze #{} {id}", ticket.0),
        AgentEffect::ReadPlan(read) => format!("read plan {read:?}"),
        AgentEffect::Restore { snapshot, dry_run } => format!("restore {snapshot} dry {dry_run}"),
        AgentEffect::SetModel(model) => format!("set model {model}"),
        AgentEffect::SendChild { path, op } => {
            format!("send {path} {}", serde_json::to_string(op).expect("op"))
        }
        AgentEffect::ResumeChild {
            ticket, path, live, ..
        } => format!("resume child {path} #{} live {live}", ticket.0),
        AgentEffect::FreeSlot(path) => format!("free slot {path}"),
        AgentEffect::Log(text) => format!("log {text}"),
        AgentEffect::Stop => "stop".into(),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn op(op: Op) -> AgentInput {
    AgentInput::Op { op, cause: None }
}

fn op_as(cause: &str, op: Op) -> AgentInput {
    AgentInput::Op {
        op,
        cause: Some(cause.into()),
    }
}

fn store(answer: Answer) -> AgentInput {
    AgentInput::Store(answer)
}

fn admitted(id: i64) -> AgentInput {
    store(Answer::Admitted(Ok((id, None))))
}

fn ended(turn_id: u64) -> AgentInput {
    AgentInput::TurnEnded {
        turn_id,
        ending: Some(Event::TurnCompleted {
            turn_id,
            usage: Usage::default(),
            iterations: 1,
            context: None,
        }),
    }
}

fn finished() -> AgentInput {
    store(Answer::Finished(Ok(())))
}

fn ask_person(ticket: u64, turn_id: u64) -> AgentInput {
    AgentInput::Authorize {
        ticket: Ticket(ticket),
        turn_id,
        call: CallAsked {
            call_id: format!("c{ticket}"),
            tool: "bash".into(),
            args: serde_json::json!({"command": "make"}),
            refused: None,
            preview: None,
        },
        evaluation: Some(Evaluation::AskPerson {
            reason: "runs a program".into(),
            rule: None,
        }),
        posture: Posture::Suggest,
    }
}

fn approve(id: &str, decision: ApprovalDecision) -> AgentInput {
    op(Op::Approve {
        id: id.into(),
        decision,
        reason: None,
    })
}

/// A session running turn 1 on message row 1, caused by `s1`.
fn running() -> (AgentCore, Vec<AgentInput>) {
    let core = core_of(true, true);
    (core, vec![op_as("s1", Op::user("build it")), admitted(1)])
}

#[test]
fn a_message_while_idle_is_admitted_and_its_turn_starts_in_the_same_trip() {
    check(
        vec![op_as("s1", Op::user("hello")), admitted(7)],
        r#"
> op
  ask admit "hello" intent None start Some(0)
> store
  emit {"type":"input.admitted","queue_length":0}
  spawn turn 1 cause Some("s1") compact false tools true budget false messages 1
"#,
    );
}

#[test]
fn a_resume_continues_the_interrupted_turn_first_and_closes_the_calls_it_left_open() {
    let call = crate::message::ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: "{}".into(),
    };
    let opened = Opened {
        stored: Some((Mode::Work, Posture::Suggest)),
        conversation: crate::context::Conversation::of(&[
            Arc::new(Message::user("build it")),
            Arc::new(Message::Assistant {
                content: String::new(),
                tool_calls: vec![call],
            }),
        ]),
        turns: 4,
        ..Opened::default()
    };
    let interrupted = crate::lifecycle::Queued {
        id: Some(5),
        text: "build it".into(),
        interrupted: true,
        cause: None,
        internal: false,
    };
    check(
        vec![
            AgentInput::Opened(Box::new(opened)),
            AgentInput::Running {
                pending: vec![interrupted],
                first: Some(First::Queue("and then this".into())),
            },
            store(Answer::Started(Ok(()))),
            admitted(6),
        ],
        r#"
> opened
  persist append 2 {"role":"tool","call_id":"c1","content":"interrupted: this call may have run before cadre stopped (a crash or a kill), and cadre did not run it again; check its effects before repeating it"}
> running
  ask start turn of 5 user None
> store
  spawn turn 5 cause None compact false tools true budget false messages 3
  ask admit "and then this" intent None start None
> store
  emit {"type":"input.admitted","queue_length":1}
"#,
    );
}

#[test]
fn a_message_while_a_turn_runs_waits_and_starts_when_it_ends() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            op_as("s2", Op::user("then this")),
            admitted(2),
            ended(1),
            finished(),
            store(Answer::Started(Ok(()))),
        ],
        r#"
> op
  ask admit "then this" intent None start None
> store
  emit {"type":"input.admitted","queue_length":1}
> turn ended
  stop turn
  ask finish turn of 1
> store
  emit as Some("s1") {"type":"turn.completed","turn_id":1,"usage":{"prompt_tokens":0,"completion_tokens":0},"iterations":1}
  ask start turn of 2 user Some(1)
> store
  spawn turn 2 cause Some("s2") compact false tools true budget false messages 2
"#,
    );
}

#[test]
fn a_turn_end_the_store_could_not_record_is_an_infrastructure_failure() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            ended(1),
            store(Answer::Finished(Err(StoreError::Sql("disk gone".into())))),
        ],
        r#"
> turn ended
  stop turn
  ask finish turn of 1
> store
  emit as Some("s1") {"type":"turn.failed","turn_id":1,"category":"infrastructure","message":"the turn's work could not be stored: store error: disk gone","retryable":true,"usage":{"prompt_tokens":0,"completion_tokens":0},"iterations":1}
  emit {"type":"session.idle","turns":1}
"#,
    );
}

#[test]
fn a_prompt_is_answered_once_and_a_second_answer_is_refused() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            ask_person(5, 1),
            approve("approval:1", ApprovalDecision::AllowOnce),
            approve("approval:1", ApprovalDecision::Deny),
        ],
        r#"
> authorize
  emit as Some("s1") {"type":"approval.requested","id":"approval:1","agent_id":"main","call_id":"c5","tool":"bash","arguments":{"command":"make"},"reason":"runs a program"}
> op
  emit {"type":"approval.resolved","id":"approval:1","outcome":"allow_once"}
  reply #5 Allow by User: allowed by the user
> op
  emit {"type":"op.rejected","op":"approve","message":"no approval prompt has the id 'approval:1'"}
"#,
    );
}

#[test]
fn allowing_for_the_session_answers_the_same_call_again_without_a_prompt() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            ask_person(5, 1),
            approve("approval:1", ApprovalDecision::AllowSession),
            ask_person(6, 1),
        ],
        r#"
> authorize
  emit as Some("s1") {"type":"approval.requested","id":"approval:1","agent_id":"main","call_id":"c5","tool":"bash","arguments":{"command":"make"},"reason":"runs a program"}
> op
  emit {"type":"approval.resolved","id":"approval:1","outcome":"allow_session"}
  reply #5 Allow by User: allowed by the user for this session
> authorize
  reply #6 Allow by User: allowed for this session earlier
"#,
    );
}

#[test]
fn an_answer_for_a_descendant_goes_one_hop_down_and_an_unknown_one_is_refused() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            AgentInput::ChildStarted(Box::new(ChildStart {
                ticket: Ticket(3),
                path: "1".parse().expect("path"),
                role: "worker".into(),
                model: "m".into(),
                posture: Posture::Suggest,
                depth: 1,
                prompt: Some("look".into()),
                background: true,
            })),
            approve("agent:1.2:approval:4", ApprovalDecision::Deny),
            approve("agent:7:approval:1", ApprovalDecision::Deny),
            approve("nonsense", ApprovalDecision::Deny),
        ],
        r#"
> child started
  emit {"type":"agent.spawned","agent_id":"1","role":"worker","model":"m","posture":"suggest","depth":1}
  send 1 {"type":"user_input","text":"look"}
  reply #3 ok: started agent 1 (role worker) in the background; collect its report with action=wait, agent_id=1
> op
  send 1 {"type":"approve","id":"agent:1.2:approval:4","decision":"deny"}
> op
  emit {"type":"op.rejected","op":"approve","message":"no approval prompt has the id 'agent:7:approval:1'"}
> op
  emit {"type":"op.rejected","op":"approve","message":"no approval prompt has the id 'nonsense'"}
"#,
    );
}

#[test]
fn a_turn_end_withdraws_its_prompts_and_cancels_its_reviews() {
    let (mut core, start) = running();
    run(&mut core, start);
    let review = AgentInput::Authorize {
        ticket: Ticket(6),
        turn_id: 1,
        call: CallAsked {
            call_id: "c6".into(),
            tool: "bash".into(),
            args: serde_json::json!({"command": "curl x"}),
            refused: None,
            preview: None,
        },
        evaluation: Some(Evaluation::Review {
            observations: vec!["network".into()],
        }),
        posture: Posture::Suggest,
    };
    check_on(
        &mut core,
        vec![
            ask_person(5, 1),
            review,
            AgentInput::TurnEnded {
                turn_id: 1,
                ending: None,
            },
            finished(),
            // The guardian's late answer finds nothing.
            AgentInput::Reviewed {
                review_id: 1,
                decision: Decision::new(Verdict::Allow, Layer::Guardian, "fine"),
            },
        ],
        r#"
> authorize
  emit as Some("s1") {"type":"approval.requested","id":"approval:1","agent_id":"main","call_id":"c5","tool":"bash","arguments":{"command":"make"},"reason":"runs a program"}
> authorize
  review 1 bash
> turn ended
  stop turn
  emit {"type":"approval.resolved","id":"approval:1","outcome":"withdrawn"}
  drop #5
  stop review 1
  audit bash: Ask denied 'bash' (model guardian): the review was cancelled; denied (fail closed)
  emit as Some("s1") {"type":"permission.decision","agent_id":"main","call_id":"c6","tool":"bash","verdict":"deny","layer":"guardian","reason":"the review was cancelled; denied (fail closed)","line":"Ask denied 'bash' (model guardian): the review was cancelled; denied (fail closed)"}
  reply #6 Deny by Guardian: the review was cancelled; denied (fail closed)
  ask finish turn of 1
> store
  emit {"type":"session.idle","turns":1}
> reviewed
"#,
    );
}

#[test]
fn a_call_of_an_ended_turn_is_denied() {
    check(
        vec![ask_person(5, 9)],
        r#"
> authorize
  audit bash: Ask denied 'bash' (posture): the turn has ended
  emit as None {"type":"permission.decision","agent_id":"main","call_id":"c5","tool":"bash","verdict":"deny","layer":"posture","reason":"the turn has ended","line":"Ask denied 'bash' (posture): the turn has ended"}
  reply #5 Deny by Posture: the turn has ended
"#,
    );
}

#[test]
fn a_childs_crash_fails_its_waiters_and_it_takes_no_more_work() {
    let (mut core, start) = running();
    run(&mut core, start);
    let one: AgentPath = "1".parse().expect("path");
    check_on(
        &mut core,
        vec![
            AgentInput::ChildStarted(Box::new(ChildStart {
                ticket: Ticket(3),
                path: one.clone(),
                role: "worker".into(),
                model: "m".into(),
                posture: Posture::Suggest,
                depth: 1,
                prompt: None,
                background: false,
            })),
            AgentInput::ChildCrashed {
                path: one.clone(),
                error: "panicked".into(),
            },
            AgentInput::FollowUp {
                ticket: Ticket(4),
                path: one.clone(),
                prompt: "again".into(),
                background: false,
            },
            AgentInput::Wait {
                ticket: Ticket(5),
                agent_id: "1".into(),
            },
        ],
        r#"
> child started
  emit {"type":"agent.spawned","agent_id":"1","role":"worker","model":"m","posture":"suggest","depth":1}
> child crashed
  reply #3 error: failed: agent 1 crashed: panicked
  persist child 1 Crashed
  emit {"type":"agent.completed","agent_id":"1","status":"failed","summary":"","verified":false}
> follow-up
  reply #4 error: failed: agent 1 crashed and takes no more work
> wait
  reply #5 error: failed: agent 1 crashed and takes no more work
"#,
    );
}

#[test]
fn a_childs_report_reaches_every_waiter_once_and_a_follow_up_runs_it_again() {
    let (mut core, start) = running();
    run(&mut core, start);
    let one: AgentPath = "1".parse().expect("path");
    let report = AgentReport {
        summary: "done".into(),
        status: "completed".into(),
        ..AgentReport::default()
    };
    check_on(
        &mut core,
        vec![
            AgentInput::ChildStarted(Box::new(ChildStart {
                ticket: Ticket(3),
                path: one.clone(),
                role: "worker".into(),
                model: "m".into(),
                posture: Posture::Suggest,
                depth: 1,
                prompt: Some("look".into()),
                background: true,
            })),
            AgentInput::Wait {
                ticket: Ticket(4),
                agent_id: "1".into(),
            },
            AgentInput::FollowUp {
                ticket: Ticket(5),
                path: one.clone(),
                prompt: "more".into(),
                background: false,
            },
            AgentInput::ChildDone {
                path: one.clone(),
                report: Box::new(report),
            },
            AgentInput::FollowUp {
                ticket: Ticket(6),
                path: one.clone(),
                prompt: "more".into(),
                background: true,
            },
            AgentInput::ChildResumed {
                ticket: Ticket(6),
                path: one.clone(),
                prompt: "more".into(),
                background: true,
            },
        ],
        r#"
> child started
  emit {"type":"agent.spawned","agent_id":"1","role":"worker","model":"m","posture":"suggest","depth":1}
  send 1 {"type":"user_input","text":"look"}
  reply #3 ok: started agent 1 (role worker) in the background; collect its report with action=wait, agent_id=1
> wait
> follow-up
  reply #5 error: failed: agent 1 is still working; wait for it first
> child done
  emit {"type":"agent.completed","agent_id":"1","status":"completed","summary":"done","verified":false}
  persist child 1 Idle report completed
  free slot 1
  reply #4 ok: agent  (role ) completed
> follow-up
  resume child 1 #6 live true
> child resumed
  persist child 1 Running
  send 1 {"type":"user_input","text":"more"}
  reply #6 ok: agent 1 is working on the follow-up in the background
"#,
    );
}

#[test]
fn a_follow_up_that_could_not_start_leaves_the_child_idle() {
    let mut core = core_of(true, true);
    let one: AgentPath = "1".parse().expect("path");
    let opened = Opened {
        children: vec![RestoredChild {
            path: one.clone(),
            role: "worker".into(),
            state: ChildState::Running,
            report: None,
        }],
        ..Opened::default()
    };
    check_on(
        &mut core,
        vec![
            AgentInput::Opened(Box::new(opened)),
            AgentInput::FollowUp {
                ticket: Ticket(1),
                path: one.clone(),
                prompt: "go on".into(),
                background: true,
            },
            AgentInput::ChildNotResumed {
                ticket: Ticket(1),
                path: one.clone(),
                error: ToolError::failed("no slot"),
            },
            AgentInput::Wait {
                ticket: Ticket(2),
                agent_id: "1".into(),
            },
        ],
        r#"
> opened
> follow-up
  resume child 1 #1 live false
> child not resumed
  reply #1 error: failed: no slot
> wait
  reply #2 error: failed: agent 1 has no report: its run was interrupted; follow up with it
"#,
    );
}

#[test]
fn approving_a_plan_returns_to_work_and_runs_the_implementation_message_first() {
    let mut core = core_of(true, true);
    let opened = Opened {
        stored: Some((Mode::Plan, Posture::Suggest)),
        questionnaire: Some("plan-1".into()),
        turns: 3,
        ..Opened::default()
    };
    let implementation = crate::lifecycle::Queued {
        id: Some(9),
        text: "implement".into(),
        interrupted: false,
        cause: None,
        internal: false,
    };
    check_on(
        &mut core,
        vec![
            AgentInput::Opened(Box::new(opened)),
            op(Op::Answer {
                id: "plan-1".into(),
                answer: QuestionnaireAnswer::Approve,
            }),
            store(Answer::Answered(Ok(AnswerOutcome {
                mode: Mode::Work,
                admitted: Some(9),
                new: true,
            }))),
            store(Answer::Pending(Ok(vec![implementation]))),
            store(Answer::Started(Ok(()))),
        ],
        r#"
> opened
> op
  ask answer plan-1 Approve
> store
  emit {"type":"questionnaire.answered","id":"plan-1","answer":{"answer":"approve"},"mode":"work"}
  emit {"type":"mode.changed","mode":"work"}
  ask pending
> store
  ask start turn of 9 user Some(0)
> store
  spawn turn 4 cause None compact false tools true budget false messages 1
"#,
    );
    assert_eq!(core.questionnaire(), None);
}

#[test]
fn exit_plan_mode_freezes_the_plan_opens_a_questionnaire_and_ends_the_turn() {
    let mut core = core_of(true, true);
    let (_, start) = running();
    run(
        &mut core,
        vec![
            op(Op::SetMode { mode: Mode::Plan }),
            store(Answer::Entered(Ok(None))),
        ],
    );
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            AgentInput::PlanTool {
                ticket: Ticket(8),
                request: PlanRequest::Exit,
                nonce: "abc".into(),
            },
            AgentInput::Frozen {
                ticket: Ticket(8),
                id: "plan-abc".into(),
                snapshot: Ok(Snapshot {
                    text: "Summary: do it.\nThen test.".into(),
                    sha256: "f00".into(),
                    truncated: false,
                }),
            },
            store(Answer::Opened(Ok(()))),
            AgentInput::PlanTool {
                ticket: Ticket(9),
                request: PlanRequest::Exit,
                nonce: "def".into(),
            },
        ],
        r#"
> plan tool
  freeze #8 plan-abc
> frozen
  ask open plan-abc PlanApproval
> store
  emit {"type":"questionnaire.opened","id":"plan-abc","kind":"plan_approval","plan_path":"/plans/plan.md","sha256":"f00","truncated":false,"bytes":26,"head":"Summary: do it.\nThen test."}
  end turn after tools
  reply #8 ok: The plan is frozen (sha256 f00) and waits for the user's approval as questionnaire plan-abc. Stop here: do not call more tools; the user will approve, revise or withdraw it.
> plan tool
  reply #9 error: failed: questionnaire plan-abc already waits for an answer
"#,
    );
}

#[test]
fn entering_plan_narrows_every_descendant_and_waits_for_no_turn() {
    let mut core = core_of(true, true);
    let live = core.live.clone();
    let child = LiveAuthority::child(&live, Mode::Work, Posture::Auto);
    check_on(
        &mut core,
        vec![
            op(Op::SetMode { mode: Mode::Plan }),
            store(Answer::Entered(Ok(Some("/plans/plan.md.bak".into())))),
            op(Op::SetPosture {
                posture: Posture::Never,
            }),
        ],
        r#"
> op
  ask enter plan
> store
  emit {"type":"plan.entered","plan_path":"/plans/plan.md","backup":"/plans/plan.md.bak"}
  emit {"type":"mode.changed","mode":"plan"}
> op
  persist posture never
  emit {"type":"posture.changed","posture":"never"}
"#,
    );
    assert_eq!(
        (child.mode(), child.posture()),
        (Mode::Plan, Posture::Never)
    );
}

#[test]
fn changes_are_refused_while_a_turn_runs() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            op(Op::SetMode { mode: Mode::Plan }),
            op(Op::UserInput {
                text: "plan it".into(),
                intent: Some(crate::plan::lifecycle::ModeIntent::PlanEntry),
            }),
        ],
        r#"
> op
  emit {"type":"op.rejected","op":"set_mode","message":"a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the mode"}
> op
  emit {"type":"op.rejected","op":"user_input","message":"a turn is running: a mode change cannot ride on this message; cancel first, or send it without one"}
"#,
    );
}

#[test]
fn a_shutdown_mid_turn_cancels_it_and_stops_once_its_end_is_stored() {
    let (mut core, start) = running();
    run(&mut core, start);
    check_on(
        &mut core,
        vec![
            AgentInput::ChildStarted(Box::new(ChildStart {
                ticket: Ticket(3),
                path: "1".parse().expect("path"),
                role: "worker".into(),
                model: "m".into(),
                posture: Posture::Suggest,
                depth: 1,
                prompt: None,
                background: true,
            })),
            ask_person(5, 1),
            op(Op::Shutdown),
            op(Op::user("too late")),
            AgentInput::TurnEnded {
                turn_id: 1,
                ending: None,
            },
            finished(),
        ],
        r#"
> child started
  emit {"type":"agent.spawned","agent_id":"1","role":"worker","model":"m","posture":"suggest","depth":1}
  reply #3 ok: started agent 1 (role worker) in the background; collect its report with action=wait, agent_id=1
> authorize
  emit as Some("s1") {"type":"approval.requested","id":"approval:1","agent_id":"main","call_id":"c5","tool":"bash","arguments":{"command":"make"},"reason":"runs a program"}
> op
  cancel turn
  emit {"type":"approval.resolved","id":"approval:1","outcome":"withdrawn"}
  drop #5
> op
  emit {"type":"op.rejected","op":"user_input","message":"the session is shutting down"}
> turn ended
  stop turn
  ask finish turn of 1
> store
  send 1 {"type":"shutdown"}
  emit {"type":"session.stopped","turns":1}
  stop
"#,
    );
}

#[test]
fn a_goal_set_while_idle_starts_work_and_a_proposal_is_verified_before_the_queue_moves() {
    let mut core = core_of(true, true);
    let set = op(Op::Goal {
        action: Box::new(GoalAction::Set {
            objective: "ship it".into(),
            budgets: Default::default(),
            settings: Default::default(),
        }),
    });
    let propose = AgentInput::GoalTool {
        ticket: Ticket(4),
        request: GoalToolRequest::Propose(Proposal::Complete {
            claim: "it ships".into(),
        }),
    };
    check_on(
        &mut core,
        vec![
            set,
            store(Answer::Continued(Ok(11))),
            store(Answer::Started(Ok(()))),
            propose,
            ended(1),
            finished(),
            op(Op::user("meanwhile")),
            admitted(12),
            AgentInput::Verdict {
                turn_id: 1,
                outcome: VerifierOutcome::Cancelled,
                usage: Default::default(),
            },
        ],
        r#"
> op
  persist goal Active rev 1
  emit {"type":"goal.updated","objective":"ship it","status":"active","reason":"created","revision":1,"usage":{"tokens":0,"turns":0,"seconds":0,"verifier_tokens":0},"budgets":{}}
  ask continue 1: <cadre_internal_context source="goal" revision="1" n="1" kind="continue">
> store
  emit {"type":"goal.continuation","n":1}
  ask start turn of 11 user Some(0)
> store
  spawn turn 1 cause None compact false tools true budget true messages 1
> goal tool
  end turn after tools
  reply #4 ok: completion proposed. This turn ends here; a separate read-only verifier checks the claim, and its gaps come back to you if it is not met.
> turn ended
  stop turn
  ask finish turn of 11
> store
  emit as None {"type":"turn.completed","turn_id":1,"usage":{"prompt_tokens":0,"completion_tokens":0},"iterations":1}
  persist goal Active rev 1
  emit {"type":"goal.updated","objective":"ship it","status":"active","reason":"created","revision":1,"usage":{"tokens":0,"turns":1,"seconds":0,"verifier_tokens":0},"budgets":{}}
  verify turn 1: it ships
> op
  ask admit "meanwhile" intent None start None
> store
  emit {"type":"input.admitted","queue_length":1}
> verdict
  emit {"type":"goal.verification","verdict":"unavailable","gaps":["cancelled"],"verifier_tokens":0}
  persist goal Paused rev 1
  emit {"type":"goal.updated","objective":"ship it","status":"paused","reason":"user_requested","revision":1,"usage":{"tokens":0,"turns":1,"seconds":0,"verifier_tokens":0},"budgets":{}}
  ask start turn of 12 user Some(1)
"#,
    );
}
