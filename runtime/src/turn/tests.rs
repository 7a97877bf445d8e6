//! The turn machine driven directly: inputs in, effects out, no runtime and
//! no network. Effects are reduced to a comparable [`Fx`] and each scenario
//! is compared whole, one `Vec<Fx>` per input.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

mod compaction;
use crate::model::ProviderUsage;
use crate::prompt::PLAN_REMINDER_TAG;

const TURN: u64 = 7;
const PLAN_FILE: &str = "/data/sessions/s1/artifacts/plan.md";

/// Which reminder a model request carried.
#[derive(Debug, Clone, PartialEq)]
enum Reminder {
    None,
    /// The full Plan reminder, naming the plan file.
    Full,
    /// The short Plan reminder, naming the plan file.
    Short,
    /// Something else: shown whole so the test says what went wrong.
    Other(String),
}

/// An effect reduced to what the tests compare.
#[derive(Debug, Clone, PartialEq)]
enum Fx {
    Emit(Event),
    Record(Message),
    /// A model request: its iteration, its reminder, and how many of the
    /// turn's own messages it carries.
    CallModel {
        iteration: u32,
        reminder: Reminder,
        turn: usize,
    },
    /// A tool call, by id.
    RunTool(String),
    /// The stop hooks are asked about this final answer.
    AskStop(String),
    Finish(TurnOutcome),
}

fn reminder_kind(reminder: Option<&str>) -> Reminder {
    let Some(text) = reminder else {
        return Reminder::None;
    };
    let well_formed = text.starts_with(PLAN_REMINDER_TAG) && text.contains(PLAN_FILE);
    match (well_formed, text.contains("sole mutation exception")) {
        (true, true) => Reminder::Full,
        (true, false) => Reminder::Short,
        (false, _) => Reminder::Other(text.to_string()),
    }
}

fn fx(effect: TurnEffect) -> Fx {
    match effect {
        TurnEffect::Emit(event) => Fx::Emit(event),
        TurnEffect::Record(message) => Fx::Record(message.as_ref().clone()),
        TurnEffect::CallModel(request) => {
            assert_eq!(
                request.history.len(),
                1,
                "the history is the user's message"
            );
            assert_eq!(request.context.turn, TURN);
            Fx::CallModel {
                iteration: request.context.iteration,
                reminder: reminder_kind(request.reminder.as_deref()),
                turn: request.turn.len(),
            }
        }
        TurnEffect::Summarize(_) => panic!("no test here compacts"),
        TurnEffect::RunTool(call) => Fx::RunTool(call.id),
        TurnEffect::AskStop { text } => Fx::AskStop(text),
        TurnEffect::Finish(outcome) => Fx::Finish(outcome),
    }
}

fn config(mode: Mode, max_iterations: u32) -> TurnConfig {
    TurnConfig {
        turn_id: TURN,
        mode,
        max_iterations,
        system: Arc::from("you are a test"),
        tools: Arc::from(Vec::<ToolSpec>::new()),
        context: RequestContext {
            agent_id: Arc::from("agent-1"),
            role: Arc::from("main"),
            mode,
            turn: TURN,
            iteration: 0,
            session_id: Arc::from("s1"),
            workspace: Arc::from("/ws"),
            plan_file: Arc::from(PLAN_FILE),
        },
        plan_file: Some(PLAN_FILE.into()),
        model: None,
        budget: None,
        context_budget: crate::context::ContextBudget::default(),
        pinned: crate::context::Pinned::default(),
        compact_first: false,
        stop_checks: 0,
    }
}

/// Feeds `inputs` to a fresh machine over a one-message history and returns
/// the effects of each input.
fn scenario(mode: Mode, max_iterations: u32, inputs: Vec<TurnInput>) -> Vec<Vec<Fx>> {
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user("hi"))]);
    let mut machine = TurnMachine::new(config(mode, max_iterations), &Conversation::of(&history));
    inputs
        .into_iter()
        .map(|input| machine.step(input).into_iter().map(fx).collect())
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn usage(prompt_tokens: u64, completion_tokens: u64) -> Option<ProviderUsage> {
    Some(ProviderUsage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
        ..ProviderUsage::default()
    })
}

fn calls(calls: &[ToolCall]) -> TurnInput {
    TurnInput::ModelResponded(ModelResponse {
        tool_calls: calls.to_vec(),
        ..ModelResponse::default()
    })
}

fn text(text: &str) -> TurnInput {
    TurnInput::ModelResponded(ModelResponse {
        text: text.into(),
        ..ModelResponse::default()
    })
}

fn finished(id: &str, outcome: ToolOutcome) -> TurnInput {
    TurnInput::ToolFinished {
        call_id: id.into(),
        outcome,
    }
}

fn started(mode: Mode) -> Fx {
    Fx::Emit(Event::TurnStarted {
        turn_id: TURN,
        mode,
    })
}

fn call_model(iteration: u32, turn: usize) -> Fx {
    Fx::CallModel {
        iteration,
        reminder: Reminder::None,
        turn,
    }
}

fn assistant(content: &str, tool_calls: &[ToolCall]) -> Fx {
    Fx::Record(Message::Assistant {
        content: content.into(),
        tool_calls: tool_calls.to_vec(),
    })
}

fn tool_call_event(call: &ToolCall, arguments: serde_json::Value) -> Fx {
    Fx::Emit(Event::ToolCall {
        turn_id: TURN,
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments,
    })
}

/// The `tool.result` event and the recorded tool message of one call.
fn answered(call: &ToolCall, outcome: Result<&str, (ErrorCode, &str)>) -> [Fx; 2] {
    let (status, error_code, output, content) = match outcome {
        Ok(out) => (ToolStatus::Ok, None, out.to_string(), out.to_string()),
        Err((code, message)) => (
            ToolStatus::Error,
            Some(code),
            message.to_string(),
            format!("error ({code}): {message}"),
        ),
    };
    [
        Fx::Emit(Event::ToolResult {
            turn_id: TURN,
            call_id: call.id.clone(),
            name: call.name.clone(),
            status,
            error_code,
            output,
        }),
        Fx::Record(Message::Tool {
            call_id: call.id.clone(),
            content,
        }),
    ]
}

fn failed(category: FailureCategory, message: &str, retryable: bool, iterations: u32) -> [Fx; 2] {
    [
        Fx::Emit(Event::TurnFailed {
            turn_id: TURN,
            category,
            message: message.into(),
            retryable,
            usage: Usage::default(),
            iterations,
        }),
        Fx::Finish(TurnOutcome::Failed {
            category,
            message: message.into(),
            retryable,
        }),
    ]
}

fn cat<const N: usize>(parts: [Vec<Fx>; N]) -> Vec<Fx> {
    parts.into_iter().flatten().collect()
}

#[test]
fn start_announces_the_turn_and_asks_the_model() {
    assert_eq!(
        scenario(Mode::Work, 5, vec![TurnInput::Start]),
        vec![vec![started(Mode::Work), call_model(1, 0)]]
    );
}

#[test]
fn tool_calls_run_one_at_a_time_in_order_then_the_model_is_asked_again() {
    let c1 = call("c1", "read_file", r#"{"path":"a.txt"}"#);
    let c2 = call("c2", "list_dir", "not json");
    let both = [c1.clone(), c2.clone()];
    assert_eq!(
        scenario(
            Mode::Work,
            5,
            vec![
                TurnInput::Start,
                calls(&both),
                finished("c1", Ok("A".into())),
                finished("c2", Err(ToolError::failed("nope"))),
            ]
        ),
        vec![
            vec![started(Mode::Work), call_model(1, 0)],
            vec![
                assistant("", &both),
                tool_call_event(&c1, json!({"path": "a.txt"})),
                tool_call_event(&c2, json!("not json")),
                Fx::RunTool("c1".into()),
            ],
            cat([
                answered(&c1, Ok("A")).into(),
                vec![Fx::RunTool("c2".into())]
            ]),
            cat([
                answered(&c2, Err((ErrorCode::Failed, "nope"))).into(),
                vec![call_model(2, 3)],
            ]),
        ]
    );
}

#[test]
fn a_final_text_completes_the_turn_with_summed_usage() {
    let c1 = call("c1", "grep", "{}");
    let effects = scenario(
        Mode::Work,
        5,
        vec![
            TurnInput::Start,
            TurnInput::ModelResponded(ModelResponse {
                text: "looking".into(),
                tool_calls: vec![c1.clone()],
                usage: usage(10, 2),
                ..ModelResponse::default()
            }),
            finished("c1", Ok("found".into())),
            TurnInput::ModelResponded(ModelResponse {
                text: "done".into(),
                reasoning: Some("thinking".into()),
                usage: usage(5, 1),
                ..ModelResponse::default()
            }),
        ],
    );
    assert_eq!(
        effects,
        vec![
            vec![started(Mode::Work), call_model(1, 0)],
            vec![
                Fx::Emit(Event::AssistantMessage {
                    turn_id: TURN,
                    text: "looking".into()
                }),
                assistant("looking", std::slice::from_ref(&c1)),
                tool_call_event(&c1, json!({})),
                Fx::RunTool("c1".into()),
            ],
            cat([answered(&c1, Ok("found")).into(), vec![call_model(2, 2)]]),
            vec![
                Fx::Emit(Event::AssistantReasoning {
                    turn_id: TURN,
                    text: "thinking".into()
                }),
                Fx::Emit(Event::AssistantMessage {
                    turn_id: TURN,
                    text: "done".into()
                }),
                assistant("done", &[]),
                Fx::Emit(Event::TurnCompleted {
                    turn_id: TURN,
                    usage: Usage {
                        prompt_tokens: 15,
                        completion_tokens: 3,
                        ..Usage::default()
                    },
                    iterations: 2,
                    context: Some(ContextUsage {
                        used: 35,
                        window: crate::context::DEFAULT_WINDOW
                    }),
                }),
                Fx::Finish(TurnOutcome::Completed {
                    text: "done".into()
                }),
            ],
        ]
    );
}

/// Runs `iterations` model requests (each answered by one tool call that
/// succeeds), then a final answer; returns every effect in order.
fn loop_of(mode: Mode, iterations: u32) -> Vec<Fx> {
    let mut inputs = vec![TurnInput::Start];
    for i in 1..iterations {
        let id = format!("c{i}");
        inputs.push(calls(&[call(&id, "read_file", "{}")]));
        inputs.push(finished(&id, Ok("out".into())));
    }
    inputs.push(text("done"));
    scenario(mode, iterations, inputs)
        .into_iter()
        .flatten()
        .collect()
}

fn check_reminders(mode: Mode, expected: &[Reminder]) {
    let effects = loop_of(mode, expected.len() as u32);
    let reminders: Vec<Reminder> = effects
        .iter()
        .filter_map(|fx| match fx {
            Fx::CallModel { reminder, .. } => Some(reminder.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reminders, expected, "{mode}");
    let leaked: Vec<&Fx> = effects
        .iter()
        .filter(|fx| matches!(fx, Fx::Record(m) if format!("{m:?}").contains("plan-mode-reminder")))
        .collect();
    assert_eq!(
        leaked,
        Vec::<&Fx>::new(),
        "a reminder was recorded in the conversation"
    );
    assert_eq!(
        effects.last(),
        Some(&Fx::Finish(TurnOutcome::Completed {
            text: "done".into()
        }))
    );
}

#[test]
fn plan_reminders_ride_every_request_full_every_fourth_and_are_never_recorded() {
    use Reminder::{Full, None, Short};
    check_reminders(
        Mode::Plan,
        &[Full, Short, Short, Short, Full, Short, Short, Short, Full],
    );
    check_reminders(Mode::Work, &[None, None, None, None, None]);
    check_reminders(Mode::Operate, &[None, None]);
}

#[test]
fn reaching_max_iterations_fails_the_turn_as_the_agents() {
    let c1 = call("c1", "read_file", "{}");
    let c2 = call("c2", "read_file", "{}");
    let effects = scenario(
        Mode::Work,
        2,
        vec![
            TurnInput::Start,
            calls(std::slice::from_ref(&c1)),
            finished("c1", Ok("1".into())),
            calls(std::slice::from_ref(&c2)),
            finished("c2", Ok("2".into())),
        ],
    );
    assert_eq!(
        effects.last(),
        Some(&cat([
            answered(&c2, Ok("2")).into(),
            failed(
                FailureCategory::Agent,
                "the turn reached its limit of 2 model requests without a final answer",
                false,
                2
            )
            .into(),
        ]))
    );
}

fn http(status: u16) -> ModelError {
    ModelError::Http {
        status,
        message: "no".into(),
        retry_after: None,
        kind: None,
    }
}

fn exhausted(last: ModelError) -> ModelError {
    ModelError::RetriesExhausted {
        attempts: 3,
        last: Box::new(last),
    }
}

/// A model failure on the first request: its message and retryability.
fn check_model_failure(error: ModelError, message: &str, retryable: bool) {
    assert_eq!(
        scenario(
            Mode::Work,
            5,
            vec![TurnInput::Start, TurnInput::ModelFailed(error)]
        ),
        vec![
            vec![started(Mode::Work), call_model(1, 0)],
            failed(FailureCategory::Infrastructure, message, retryable, 1).into(),
        ]
    );
}

#[test]
fn a_failed_model_request_is_an_infrastructure_failure() {
    check_model_failure(
        exhausted(http(503)),
        "model request failed: gave up after 3 attempts: HTTP 503: no",
        true,
    );
    check_model_failure(http(401), "model request failed: HTTP 401: no", false);
    check_model_failure(
        exhausted(http(401)),
        "model request failed: gave up after 3 attempts: HTTP 401: no",
        false,
    );
    check_model_failure(
        ModelError::Transport("reset".into()),
        "model request failed: connection failed: reset",
        true,
    );
    check_model_failure(
        exhausted(ModelError::Http {
            status: 429,
            message: "quota".into(),
            retry_after: Some(Duration::from_secs(1)),
            kind: Some("insufficient_quota".into()),
        }),
        "model request failed: gave up after 3 attempts: HTTP 429: quota",
        false,
    );
}

#[test]
fn cancel_answers_every_pending_call_then_fails_the_turn() {
    let [c1, c2, c3] = ["c1", "c2", "c3"].map(|id| call(id, "bash", "{}"));
    let cancelled = Err((
        ErrorCode::Cancelled,
        "the turn was cancelled before this call finished",
    ));
    let effects = scenario(
        Mode::Work,
        5,
        vec![
            TurnInput::Start,
            calls(&[c1.clone(), c2.clone(), c3.clone()]),
            finished("c1", Ok("done".into())),
            TurnInput::Cancel,
        ],
    );
    assert_eq!(
        effects.last(),
        Some(&cat([
            answered(&c2, cancelled).into(),
            answered(&c3, cancelled).into(),
            failed(
                FailureCategory::Cancelled,
                "the turn was cancelled",
                false,
                1
            )
            .into(),
        ]))
    );
    // Cancelled while waiting for the model: nothing to answer.
    assert_eq!(
        scenario(Mode::Work, 5, vec![TurnInput::Start, TurnInput::Cancel])[1],
        failed(
            FailureCategory::Cancelled,
            "the turn was cancelled",
            false,
            1
        )
        .to_vec()
    );
}

#[test]
fn inputs_after_finish_change_nothing() {
    let late = || {
        vec![
            TurnInput::Start,
            text("again"),
            calls(&[call("c9", "bash", "{}")]),
            TurnInput::ModelFailed(http(500)),
            finished("c1", Ok("late".into())),
            TurnInput::Cancel,
        ]
    };
    let check = |ending: Vec<TurnInput>| {
        let n = ending.len();
        let effects = scenario(Mode::Work, 5, ending.into_iter().chain(late()).collect());
        assert!(
            matches!(effects[n - 1].last(), Some(Fx::Finish(_))),
            "{:?}",
            effects[n - 1]
        );
        assert_eq!(effects[n..].to_vec(), vec![Vec::<Fx>::new(); late().len()]);
    };
    check(vec![TurnInput::Start, text("done")]);
    check(vec![TurnInput::Start, TurnInput::ModelFailed(http(401))]);
    check(vec![TurnInput::Start, TurnInput::Cancel]);
    check(vec![
        TurnInput::Start,
        calls(&[call("c1", "bash", "{}")]),
        TurnInput::Cancel,
    ]);
}

#[test]
fn a_tool_result_for_an_unknown_or_not_running_call_is_ignored() {
    let [c1, c2] = ["c1", "c2"].map(|id| call(id, "read_file", "{}"));
    let effects = scenario(
        Mode::Work,
        5,
        vec![
            TurnInput::Start,
            calls(&[c1.clone(), c2.clone()]),
            finished("zz", Ok("stray".into())),
            finished("c2", Ok("early".into())),
            finished("c1", Ok("1".into())),
            finished("c2", Ok("2".into())),
        ],
    );
    assert_eq!(
        effects[2..].to_vec(),
        vec![
            vec![],
            vec![],
            cat([
                answered(&c1, Ok("1")).into(),
                vec![Fx::RunTool("c2".into())]
            ]),
            cat([answered(&c2, Ok("2")).into(), vec![call_model(2, 3)]]),
        ]
    );
}

#[test]
fn inputs_before_start_or_out_of_phase_are_ignored() {
    let effects = scenario(
        Mode::Work,
        5,
        vec![
            text("early"),
            finished("c1", Ok("early".into())),
            TurnInput::Start,
            TurnInput::Start,
            finished("c1", Ok("stale".into())),
        ],
    );
    assert_eq!(
        effects,
        vec![
            vec![],
            vec![],
            vec![started(Mode::Work), call_model(1, 0)],
            vec![],
            vec![],
        ]
    );
}

#[test]
fn a_long_tool_output_is_cut_in_the_event_but_recorded_whole() {
    let c1 = call("c1", "read_file", "{}");
    let long = "x".repeat(EVENT_OUTPUT_LIMIT * 3);
    let effects = scenario(
        Mode::Work,
        5,
        vec![
            TurnInput::Start,
            calls(std::slice::from_ref(&c1)),
            finished("c1", Ok(long.clone())),
        ],
    );
    let sizes: Vec<(&str, usize)> = effects[2]
        .iter()
        .filter_map(|fx| match fx {
            Fx::Emit(Event::ToolResult { output, .. }) => Some(("event", output.len())),
            Fx::Record(Message::Tool { content, .. }) => Some(("record", content.len())),
            _ => None,
        })
        .collect();
    let cut = crate::tool::truncate_middle(&long, EVENT_OUTPUT_LIMIT).len();
    assert!(cut < EVENT_OUTPUT_LIMIT + 100, "{cut}");
    assert_eq!(sizes, vec![("event", cut), ("record", long.len())]);
}

#[test]
fn a_spent_goal_budget_refuses_calls_asks_for_a_summary_then_ends_the_turn() {
    use crate::goal::{BudgetGuard, Budgets, GoalUsage};
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user("hi"))]);
    let mut config = config(Mode::Work, 10);
    let budgets = Budgets {
        tokens: Some(1000),
        ..Budgets::default()
    };
    let used = GoalUsage {
        tokens: 900,
        ..GoalUsage::default()
    };
    config.budget = Some(BudgetGuard::new(&budgets, &used, 1));
    let mut machine = TurnMachine::new(config, &Conversation::of(&history));
    let mut step = |input| -> Vec<Fx> { machine.step(input).into_iter().map(fx).collect() };
    step(TurnInput::Start);
    // Within the budget the call runs.
    let cheap = call("c1", "read_file", r#"{"path":"a"}"#);
    let effects = step(TurnInput::ModelResponded(ModelResponse {
        tool_calls: vec![cheap.clone()],
        usage: usage(40, 10),
        ..ModelResponse::default()
    }));
    assert_eq!(effects.last(), Some(&Fx::RunTool("c1".into())));
    step(finished("c1", Ok("x".into())));
    // Spent: the grace step refuses the call and asks for a summary.
    let spent = call("c2", "read_file", r#"{"path":"b"}"#);
    let effects = step(TurnInput::ModelResponded(ModelResponse {
        tool_calls: vec![spent.clone()],
        usage: usage(60, 10),
        ..ModelResponse::default()
    }));
    let [result, _] = answered(
        &spent,
        Err((
            ErrorCode::ToolNotAllowed,
            "the goal's budget is spent: do not call any more tools. Reply now with a short \
             summary of what is done and what is left.",
        )),
    );
    assert!(effects.contains(&result), "{effects:#?}");
    assert_eq!(effects.last(), Some(&call_model(3, 4)));
    // Past the grace step: tools are disabled and the turn ends.
    let again = call("c3", "write_file", r#"{"path":"c","content":""}"#);
    let effects = step(TurnInput::ModelResponded(ModelResponse {
        text: "one more".into(),
        tool_calls: vec![again],
        usage: usage(10, 10),
        ..ModelResponse::default()
    }));
    assert!(!effects.iter().any(|e| matches!(e, Fx::RunTool(_))));
    assert_eq!(
        effects.last(),
        Some(&Fx::Finish(TurnOutcome::Completed {
            text: "one more".into()
        }))
    );
    assert!(effects.iter().any(|e| matches!(e,
        Fx::Emit(Event::ToolResult { output, .. }) if output.starts_with("tools are disabled"))));
}

mod stop;
