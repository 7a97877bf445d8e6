use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{
    ApprovalDecision, ApprovalOutcome, Event, FailureCategory, Op, PlanAction, Usage,
};
use cadre_runtime::store::{QuestionnaireAnswer, QuestionnaireKind};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// A step of a scenario: the session says something, or the person does.
enum Step {
    Event(Event),
    Input(Input),
}

fn line(text: &str) -> Step {
    Step::Input(Input::Line(text.into()))
}

fn facts() -> Facts {
    Facts {
        session_id: String::new(),
        mode: Mode::Work,
        posture: Posture::Suggest,
        model: String::new(),
        workspace: "/ws".into(),
        data_dir: PathBuf::from("/data"),
    }
}

/// Runs the steps through a fresh controller and compares the reactions to
/// the inputs, and the ops events release, in order, with `expected`.
#[track_caller]
fn check(steps: Vec<Step>, expected: Vec<Reaction>) {
    let mut controller = Controller::new(facts());
    let mut reactions = Vec::new();
    for step in steps {
        match step {
            Step::Event(event) => {
                let released = controller.event(&event);
                if !released.is_empty() {
                    reactions.push(ops(released));
                }
            }
            Step::Input(input) => reactions.push(controller.input(input)),
        }
    }
    assert_eq!(reactions, expected);
}

fn ops(ops: Vec<Op>) -> Reaction {
    Reaction {
        ops,
        ..Reaction::default()
    }
}

fn notices(notices: Vec<Notice>) -> Reaction {
    Reaction {
        notices,
        ..Reaction::default()
    }
}

fn leaving() -> Reaction {
    Reaction {
        ops: vec![Op::Shutdown],
        notices: vec![Notice::Leaving],
        quit: true,
    }
}

fn turn_started() -> Step {
    Step::Event(Event::TurnStarted {
        turn_id: 1,
        mode: Mode::Work,
    })
}

fn turn_cancelled() -> Step {
    Step::Event(Event::TurnFailed {
        turn_id: 1,
        category: FailureCategory::Cancelled,
        message: "cancelled".into(),
        retryable: false,
        usage: Usage::default(),
        iterations: 1,
    })
}

fn approval_requested(id: &str) -> Step {
    Step::Event(Event::ApprovalRequested {
        id: id.into(),
        agent_id: "main".into(),
        call_id: "c".into(),
        tool: "write_file".into(),
        arguments: json!({"path": "x"}),
        reason: "not proven safe".into(),
        preview: None,
    })
}

fn questionnaire_opened(id: &str) -> Step {
    Step::Event(Event::QuestionnaireOpened {
        id: id.into(),
        kind: QuestionnaireKind::PlanApproval,
        plan_path: "/data/plan.md".into(),
        sha256: "ab".into(),
        truncated: false,
        bytes: 2,
        head: String::new(),
    })
}

#[test]
fn lines_become_messages_and_commands_become_ops() {
    check(
        vec![
            line("Add a greeting"),
            line("   "),
            line("/mode plan"),
            line("/plan view"),
            line("/plan"),
            line("/queue"),
            line("/help"),
            line("/mode nowhere"),
            line("/model gpt-4.1-mini"),
            line("/model a b"),
            line("/quit"),
        ],
        vec![
            ops(vec![Op::user("Add a greeting")]),
            Reaction::default(),
            ops(vec![Op::SetMode { mode: Mode::Plan }]),
            ops(vec![Op::Plan {
                action: PlanAction::View,
            }]),
            ops(vec![Op::Plan {
                action: PlanAction::Status,
            }]),
            ops(vec![Op::Status]),
            notices(vec![Notice::Help]),
            notices(vec![Notice::Invalid(Invalid::Usage(
                "/mode [plan|work|operate]",
            ))]),
            ops(vec![Op::SetModel {
                model: "gpt-4.1-mini".into(),
            }]),
            notices(vec![Notice::Invalid(Invalid::Usage("/model [NAME]"))]),
            leaving(),
        ],
    );
}

#[test]
fn end_of_input_leaves() {
    check(vec![Step::Input(Input::Eof)], vec![leaving()]);
}

#[test]
fn approvals_are_answered_inline_oldest_first_and_commands_still_work() {
    check(
        vec![
            turn_started(),
            approval_requested("approval:1"),
            approval_requested("approval:2"),
            line("maybe"),
            line("/queue"),
            line("y"),
            line("s"),
            line("n"),
        ],
        vec![
            notices(vec![Notice::AnswerApproval {
                id: "approval:1".into(),
            }]),
            ops(vec![Op::Status]),
            ops(vec![Op::Approve {
                id: "approval:1".into(),
                decision: ApprovalDecision::AllowOnce,
                reason: None,
            }]),
            ops(vec![Op::Approve {
                id: "approval:2".into(),
                decision: ApprovalDecision::AllowSession,
                reason: None,
            }]),
            // Nothing waits any more: "n" is a message.
            ops(vec![Op::user("n")]),
        ],
    );
}

#[test]
fn a_withdrawn_approval_no_longer_takes_answers() {
    check(
        vec![
            turn_started(),
            approval_requested("approval:1"),
            Step::Event(Event::ApprovalResolved {
                id: "approval:1".into(),
                outcome: ApprovalOutcome::Withdrawn,
            }),
            line("y"),
        ],
        vec![ops(vec![Op::user("y")])],
    );
}

#[test]
fn a_plan_questionnaire_is_answered_inline_with_feedback_on_the_next_line() {
    let id = "plan-1";
    check(
        vec![
            questionnaire_opened(id),
            line("later"),
            line("r"),
            line("split step 2"),
            Step::Event(Event::QuestionnaireAnswered {
                id: id.into(),
                answer: QuestionnaireAnswer::Revise {
                    feedback: "split step 2".into(),
                },
                mode: Mode::Plan,
            }),
            questionnaire_opened("plan-2"),
            line("r add tests"),
            line("a"),
            Step::Event(Event::QuestionnaireAnswered {
                id: "plan-2".into(),
                answer: QuestionnaireAnswer::Approve,
                mode: Mode::Work,
            }),
            line("thanks"),
        ],
        vec![
            notices(vec![Notice::AnswerPlan { id: id.into() }]),
            notices(vec![Notice::TypeFeedback]),
            ops(vec![Op::Answer {
                id: id.into(),
                answer: QuestionnaireAnswer::Revise {
                    feedback: "split step 2".into(),
                },
            }]),
            ops(vec![Op::Answer {
                id: "plan-2".into(),
                answer: QuestionnaireAnswer::Revise {
                    feedback: "add tests".into(),
                },
            }]),
            // The session refuses a second answer and says so; the shell
            // does not second-guess it.
            ops(vec![Op::Answer {
                id: "plan-2".into(),
                answer: QuestionnaireAnswer::Approve,
            }]),
            ops(vec![Op::user("thanks")]),
        ],
    );
}

#[test]
fn a_plan_answer_typed_before_the_session_is_idle_waits_for_it() {
    let approve = Op::Answer {
        id: "plan-1".into(),
        answer: QuestionnaireAnswer::Approve,
    };
    check(
        vec![
            turn_started(),
            questionnaire_opened("plan-1"),
            Step::Event(Event::TurnCompleted {
                turn_id: 1,
                usage: Usage::default(),
                iterations: 2,
                context: None,
            }),
            line("a"),
            Step::Event(Event::SessionIdle { turns: 1 }),
            // Released once only.
            Step::Event(Event::SessionIdle { turns: 1 }),
        ],
        vec![notices(vec![Notice::AnswerHeld]), ops(vec![approve])],
    );
}

#[test]
fn a_mode_change_waits_for_the_session_to_settle_a_turn_that_ended_but_not_one_that_runs() {
    let to_plan = Op::SetMode { mode: Mode::Plan };
    check(
        vec![
            turn_started(),
            line("/mode plan"),
            turn_cancelled(),
            line("/mode plan"),
            Step::Event(Event::SessionIdle { turns: 1 }),
            line("/mode plan"),
        ],
        vec![
            // The session refuses it, and says why.
            ops(vec![to_plan.clone()]),
            Reaction::default(),
            ops(vec![to_plan.clone()]),
            ops(vec![to_plan]),
        ],
    );
}

#[test]
fn ctrl_c_cancels_a_running_turn_and_twice_at_an_idle_prompt_leaves() {
    check(
        vec![
            turn_started(),
            Step::Input(Input::Interrupt),
            Step::Input(Input::Interrupt),
            turn_cancelled(),
            Step::Input(Input::Interrupt),
            line(""),
            Step::Input(Input::Interrupt),
            Step::Input(Input::Interrupt),
        ],
        vec![
            Reaction {
                ops: vec![Op::Cancel],
                notices: vec![Notice::Cancelling],
                quit: false,
            },
            notices(vec![Notice::StillCancelling]),
            notices(vec![Notice::InterruptAgainToQuit]),
            // A line in between starts the count again.
            Reaction::default(),
            notices(vec![Notice::InterruptAgainToQuit]),
            leaving(),
        ],
    );
}

#[test]
fn esc_cancels_a_running_turn_then_does_nothing_and_never_leaves() {
    check(
        vec![
            Step::Input(Input::Escape),
            turn_started(),
            Step::Input(Input::Escape),
            Step::Input(Input::Escape),
            turn_cancelled(),
            Step::Input(Input::Escape),
            Step::Input(Input::Escape),
            Step::Input(Input::Escape),
        ],
        vec![
            // Nothing in progress: the reader clears the line.
            Reaction::default(),
            Reaction {
                ops: vec![Op::Cancel],
                notices: vec![Notice::Cancelling],
                quit: false,
            },
            notices(vec![Notice::StillCancelling]),
            Reaction::default(),
            Reaction::default(),
            Reaction::default(),
        ],
    );
}

#[test]
fn config_shows_what_the_events_said() {
    let expected = Facts {
        session_id: "s-1".into(),
        mode: Mode::Plan,
        posture: Posture::Auto,
        model: "m2".into(),
        workspace: "/real/ws".into(),
        data_dir: PathBuf::from("/data"),
    };
    check(
        vec![
            Step::Event(Event::SessionStarted {
                version: 1,
                session_id: "s-1".into(),
                mode: Mode::Work,
                posture: Posture::Suggest,
                workspace: "/real/ws".into(),
                model: "m".into(),
                sandbox: "landlock-abi-7".into(),
                sandbox_walls: Vec::new(),
                mode_source: None,
                model_source: None,
                instructions: None,
            }),
            Step::Event(Event::ModeChanged { mode: Mode::Plan }),
            Step::Event(Event::PostureChanged {
                posture: Posture::Auto,
            }),
            Step::Event(Event::ModelChanged { model: "m2".into() }),
            line("/config"),
            line("/mode"),
            line("/model"),
        ],
        vec![
            notices(vec![Notice::Config(expected)]),
            notices(vec![Notice::Mode(Mode::Plan)]),
            notices(vec![Notice::Model("m2".into())]),
        ],
    );
}

#[test]
fn restore_goes_to_the_session_and_lookups_to_the_host() {
    check(
        vec![
            line("/restore abcd --dry-run"),
            line("/restore"),
            line("/mcp"),
        ],
        vec![
            ops(vec![Op::Restore {
                snapshot: "abcd".into(),
                dry_run: true,
            }]),
            notices(vec![Notice::Snapshots]),
            notices(vec![Notice::McpServers]),
        ],
    );
    // While a turn runs the session's refusal is the answer.
    check(
        vec![turn_started(), line("/restore abcd")],
        vec![ops(vec![Op::Restore {
            snapshot: "abcd".into(),
            dry_run: false,
        }])],
    );
}
