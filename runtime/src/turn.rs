//! The turn loop as a pure state machine: no I/O, no clock, no actors.
//!
//! A turn alternates model requests and tool calls until the model answers
//! without calling a tool. [`TurnMachine::step`] takes one input and returns
//! the effects the host must perform: emit an event, record a message in the
//! session's conversation, call the model, run a tool, or finish. The turn
//! actor is a thin shell around it; the unit tests drive it directly.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::context::{ContextBudget, ContextUsage, Conversation, Pinned, Trail};
use crate::goal::{BudgetGuard, GuardDecision};
use crate::message::{Message, ToolCall};
use crate::mode::Mode;
use crate::model::{ModelError, ModelRequest, ModelResponse, RequestContext};
use crate::prompt::plan_reminder;
use crate::protocol::{Event, FailureCategory, ToolStatus, Usage};
use crate::tool::{ErrorCode, ToolError, ToolOutcome, ToolSpec};

/// The most characters of a tool's output a `tool.result` event carries.
pub const EVENT_OUTPUT_LIMIT: usize = 2000;

/// Everything a turn needs to know up front.
#[derive(Debug, Clone)]
pub struct TurnConfig {
    /// The turn id within the session (1-based).
    pub turn_id: u64,
    /// The mode; it cannot change while the turn runs (M6).
    pub mode: Mode,
    /// Model requests allowed before the turn fails.
    pub max_iterations: u32,
    /// The system prompt.
    pub system: Arc<str>,
    /// The tools offered, already through the definition gate.
    pub tools: Arc<[ToolSpec]>,
    /// Who asks; `iteration` is filled in per request.
    pub context: RequestContext,
    /// The canonical plan file, for the Plan reminder; `None` for an agent
    /// with no plan file (a sub-agent).
    pub plan_file: Option<PathBuf>,
    /// A model name sent instead of the client's (a role's model).
    pub model: Option<Arc<str>>,
    /// The goal's budget guard (G7), asked before every tool call; `None`
    /// when no goal budget limits this turn.
    pub budget: Option<BudgetGuard>,
    /// The agent's context window and compaction threshold (CX1).
    pub context_budget: ContextBudget,
    /// What a compaction re-states from the host's records (CX3).
    pub pinned: Pinned,
    /// Compact before the first request (an `Op::Compact` sent while the
    /// agent was idle).
    pub compact_first: bool,
    /// How many times the agent's stop hooks may keep this turn going after
    /// a final answer (the breaker); 0 when it has none, and a final
    /// answer ends the turn at once.
    pub stop_checks: u32,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// The model gave a final answer.
    Completed {
        /// The final text.
        text: String,
    },
    /// The turn stopped without one.
    Failed {
        /// Why, for machines.
        category: FailureCategory,
        /// Why, for people.
        message: String,
        /// Whether retrying later may succeed.
        retryable: bool,
    },
}

/// What happened, fed to [`TurnMachine::step`].
#[derive(Debug)]
pub enum TurnInput {
    /// Begin: make the first model request.
    Start,
    /// The model answered.
    ModelResponded(ModelResponse),
    /// The model request failed (after its retries).
    ModelFailed(ModelError),
    /// A tool call finished.
    ToolFinished {
        /// The call.
        call_id: String,
        /// Its outcome.
        outcome: ToolOutcome,
    },
    /// Compact before the next model request (`Op::Compact`).
    Compact,
    /// Stop now: the user cancelled.
    Cancel,
    /// Finish the turn once the current calls are answered, without asking
    /// the model again (a plan went to the user for approval).
    EndAfterTools,
    /// The stop hooks answered [`TurnEffect::AskStop`]: `None` lets the
    /// turn end, a message keeps it going with that message.
    StopAnswered(Option<String>),
    /// Stop now for another reason (the denial ledger paused autonomy, say).
    Halt {
        /// Why, for machines.
        category: FailureCategory,
        /// Why, for people.
        message: String,
    },
}

/// What the host must do.
#[derive(Debug)]
pub enum TurnEffect {
    /// Send an event to the session's consumers.
    Emit(Event),
    /// Append a message to the session's conversation.
    Record(Arc<Message>),
    /// Make a model request and feed back its answer.
    CallModel(ModelRequest),
    /// Make a compaction's summary request and feed back its answer; its
    /// text is cadre's, not the assistant's, so nothing of it is shown.
    Summarize(ModelRequest),
    /// Run a tool call and feed back its outcome.
    RunTool(ToolCall),
    /// The model gave a final answer: ask the agent's stop hooks whether
    /// it may stop, and answer with [`TurnInput::StopAnswered`].
    AskStop {
        /// The final answer.
        text: String,
    },
    /// The turn is over; nothing more will be asked.
    Finish(TurnOutcome),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    AwaitingModel,
    /// Waiting for a compaction's summary.
    Compacting,
    RunningTools,
    /// Waiting for the stop hooks' answer to a final answer.
    AskingStop,
    Finished,
}

/// One turn's loop.
#[derive(Debug)]
pub struct TurnMachine {
    config: TurnConfig,
    /// What a compaction record re-states, from every stored message: the
    /// agent's at the start, then with each message the turn records.
    trail: Trail,
    /// What requests send before `tail`: the stored history's view
    /// (`context::view`), then the view after each compaction. Nothing
    /// else of the history is held: a long turn's memory stays flat.
    base: Arc<[Arc<Message>]>,
    /// Messages recorded since `base` was made.
    tail: Vec<Arc<Message>>,
    /// The context's state: window, counts, compaction in flight.
    window: compact::Window,
    phase: Phase,
    iteration: u32,
    usage: Usage,
    /// The call running now, then those waiting, in the model's order.
    queue: VecDeque<ToolCall>,
    /// Set by [`TurnInput::EndAfterTools`].
    end_after_tools: bool,
    /// The last text the model gave, for a turn that ends after its tools.
    last_text: String,
    /// The goal's budget guard, taken from the config.
    guard: Option<BudgetGuard>,
    /// How long the turn has run, as the host last said: the budget guard
    /// reads it (the machine has no clock).
    elapsed: Duration,
    /// How many more times stop hooks may keep the turn going.
    stop_checks: u32,
}

impl TurnMachine {
    /// A turn over the agent's `conversation`, which already holds the
    /// user's message.
    pub fn new(mut config: TurnConfig, conversation: &Conversation) -> Self {
        let guard = config.budget.take().filter(BudgetGuard::limits_anything);
        let window = compact::Window::new(&config);
        Self {
            guard,
            elapsed: Duration::ZERO,
            stop_checks: config.stop_checks,
            config,
            trail: conversation.trail().clone(),
            base: conversation.view().into(),
            tail: Vec::new(),
            window,
            phase: Phase::NotStarted,
            iteration: 0,
            usage: Usage::default(),
            queue: VecDeque::new(),
            end_after_tools: false,
            last_text: String::new(),
        }
    }

    /// The turn id.
    pub fn turn_id(&self) -> u64 {
        self.config.turn_id
    }

    /// Model requests made so far.
    pub fn iterations(&self) -> u32 {
        self.iteration
    }

    /// Tells the machine how long the turn has run (for the budget guard).
    pub fn set_elapsed(&mut self, elapsed: Duration) {
        self.elapsed = elapsed;
    }

    /// Whether the turn has finished.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// Advances the turn by one input.
    pub fn step(&mut self, input: TurnInput) -> Vec<TurnEffect> {
        let mut effects = Vec::new();
        match (self.phase, input) {
            (Phase::Finished, _) => {}
            (Phase::NotStarted, TurnInput::Start) => {
                effects.push(TurnEffect::Emit(Event::TurnStarted {
                    turn_id: self.config.turn_id,
                    mode: self.config.mode,
                }));
                self.request_model(&mut effects);
            }
            (Phase::AwaitingModel, TurnInput::ModelResponded(response)) => {
                self.on_response(response, &mut effects)
            }
            (Phase::Compacting, TurnInput::ModelResponded(response)) => {
                // The summary's tokens are the turn's (and the goal's) cost.
                if let Some(usage) = response.usage {
                    self.usage.add(usage.into());
                }
                self.on_summary(Some(response.text), &mut effects)
            }
            (Phase::Compacting, TurnInput::ModelFailed(_)) => self.on_summary(None, &mut effects),
            (Phase::AskingStop, TurnInput::StopAnswered(None)) => {
                let text = std::mem::take(&mut self.last_text);
                self.finish(TurnOutcome::Completed { text }, &mut effects);
            }
            (Phase::AskingStop, TurnInput::StopAnswered(Some(message))) => {
                self.stop_checks = self.stop_checks.saturating_sub(1);
                self.record(Message::User { content: message }, &mut effects);
                self.request_model(&mut effects);
            }
            (Phase::AwaitingModel, TurnInput::ModelFailed(error))
                if error.is_context_overflow() =>
            {
                self.on_overflow(&error, &mut effects)
            }
            (Phase::AwaitingModel, TurnInput::ModelFailed(error)) => {
                let retryable = error.is_transient();
                // A script with no answer left is the agent's script failing,
                // not the infrastructure.
                let category = match error {
                    ModelError::Script(_) => FailureCategory::Agent,
                    ModelError::Http { .. }
                    | ModelError::Transport(_)
                    | ModelError::Interrupted(_)
                    | ModelError::Provider(_)
                    | ModelError::Malformed(_)
                    | ModelError::Request(_)
                    | ModelError::Limit(_)
                    | ModelError::RetriesExhausted { .. } => FailureCategory::Infrastructure,
                };
                self.finish(
                    TurnOutcome::Failed {
                        category,
                        message: format!("model request failed: {error}"),
                        retryable,
                    },
                    &mut effects,
                );
            }
            (Phase::RunningTools, TurnInput::ToolFinished { call_id, outcome }) => {
                if self.queue.front().is_some_and(|call| call.id == call_id) {
                    if let Some(call) = self.queue.pop_front() {
                        self.answer(&call, outcome, &mut effects);
                    }
                    self.next_tool(&mut effects);
                }
            }
            (_, TurnInput::Cancel) => self.stop(
                FailureCategory::Cancelled,
                "the turn was cancelled".into(),
                "the turn was cancelled before this call finished".into(),
                &mut effects,
            ),
            (
                Phase::NotStarted
                | Phase::AwaitingModel
                | Phase::Compacting
                | Phase::RunningTools
                | Phase::AskingStop,
                TurnInput::EndAfterTools,
            ) => {
                self.end_after_tools = true;
            }
            (
                Phase::NotStarted
                | Phase::AwaitingModel
                | Phase::Compacting
                | Phase::RunningTools
                | Phase::AskingStop,
                TurnInput::Compact,
            ) => {
                self.window.requested = true;
            }
            (_, TurnInput::Halt { category, message }) => {
                let unanswered = format!("the turn ended before this call finished: {message}");
                self.stop(category, message, unanswered, &mut effects)
            }
            // Inputs that do not belong to the current phase are stale (a
            // late answer after a cancel, say) and change nothing.
            (
                Phase::NotStarted
                | Phase::AwaitingModel
                | Phase::Compacting
                | Phase::RunningTools
                | Phase::AskingStop,
                TurnInput::Start
                | TurnInput::ModelResponded(_)
                | TurnInput::ModelFailed(_)
                | TurnInput::ToolFinished { .. },
            ) => {}
            (
                Phase::NotStarted | Phase::AwaitingModel | Phase::Compacting | Phase::RunningTools,
                TurnInput::StopAnswered(_),
            ) => {}
        }
        effects
    }

    /// Ends the turn now, answering every call that has no result yet.
    fn stop(
        &mut self,
        category: FailureCategory,
        message: String,
        unanswered: String,
        effects: &mut Vec<TurnEffect>,
    ) {
        while let Some(call) = self.queue.pop_front() {
            let error = ToolError::new(ErrorCode::Cancelled, unanswered.clone());
            self.answer(&call, Err(error), effects);
        }
        self.finish(
            TurnOutcome::Failed {
                category,
                message,
                retryable: false,
            },
            effects,
        );
    }

    /// Asks the model, compacting first when the request would pass the
    /// threshold or a compaction was asked for.
    fn request_model(&mut self, effects: &mut Vec<TurnEffect>) {
        if self.at_iteration_limit(effects) {
            return;
        }
        if self.compact_if_due(effects) {
            return;
        }
        self.send(effects);
    }

    /// Fails the turn when it has made all the requests it may.
    fn at_iteration_limit(&mut self, effects: &mut Vec<TurnEffect>) -> bool {
        if self.iteration >= self.config.max_iterations {
            let limit = self.config.max_iterations;
            self.finish(
                TurnOutcome::Failed {
                    category: FailureCategory::Agent,
                    message: format!(
                        "the turn reached its limit of {limit} model requests without a final answer"
                    ),
                    retryable: false,
                },
                effects,
            );
            return true;
        }
        false
    }

    /// Sends the request as the conversation stands.
    fn send(&mut self, effects: &mut Vec<TurnEffect>) {
        if self.at_iteration_limit(effects) {
            return;
        }
        self.iteration += 1;
        let reminder = (self.config.mode == Mode::Plan).then(|| {
            Arc::from(plan_reminder(
                self.iteration,
                self.config.plan_file.as_deref(),
            ))
        });
        let mut context = self.config.context.clone();
        context.iteration = self.iteration;
        self.phase = Phase::AwaitingModel;
        self.window.sent = self.base.len() + self.tail.len();
        effects.push(TurnEffect::CallModel(ModelRequest {
            system: self.config.system.clone(),
            history: self.base.clone(),
            turn: self.tail.clone(),
            reminder,
            tools: self.config.tools.clone(),
            context,
            model: self.config.model.clone(),
            single_attempt: false,
        }));
    }

    fn on_response(&mut self, response: ModelResponse, effects: &mut Vec<TurnEffect>) {
        let turn_id = self.config.turn_id;
        if let Some(usage) = response.usage {
            self.usage.add(usage.into());
        }
        self.window.answered(response.usage);
        if let Some(reasoning) = response.reasoning.filter(|r| !r.is_empty()) {
            effects.push(TurnEffect::Emit(Event::AssistantReasoning {
                turn_id,
                text: reasoning,
            }));
        }
        self.last_text.clone_from(&response.text);
        if !response.text.is_empty() {
            effects.push(TurnEffect::Emit(Event::AssistantMessage {
                turn_id,
                text: response.text.clone(),
            }));
        }
        self.record(
            Message::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
            },
            effects,
        );
        if response.tool_calls.is_empty() {
            // The stop hooks may keep it going, a bounded number of times;
            // a turn told to end after its tools ends.
            if self.stop_checks > 0 && !self.end_after_tools {
                self.phase = Phase::AskingStop;
                effects.push(TurnEffect::AskStop {
                    text: response.text,
                });
                return;
            }
            self.finish(
                TurnOutcome::Completed {
                    text: response.text,
                },
                effects,
            );
            return;
        }
        for call in &response.tool_calls {
            effects.push(TurnEffect::Emit(Event::ToolCall {
                turn_id,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            }));
        }
        self.queue = response.tool_calls.into();
        self.phase = Phase::RunningTools;
        self.next_tool(effects);
    }

    /// Runs the next queued call, or asks the model again when none is left
    /// (or ends the turn, when asked to end after its tools).
    fn next_tool(&mut self, effects: &mut Vec<TurnEffect>) {
        while let Some(refusal) = self.guard_refusal() {
            // The budget is spent: the call is answered without running.
            let Some(call) = self.queue.pop_front() else {
                break;
            };
            self.answer(
                &call,
                Err(ToolError::new(ErrorCode::ToolNotAllowed, refusal)),
                effects,
            );
        }
        match self.queue.front() {
            Some(call) => effects.push(TurnEffect::RunTool(call.clone())),
            None if self.end_after_tools => {
                let text = std::mem::take(&mut self.last_text);
                self.finish(TurnOutcome::Completed { text }, effects);
            }
            None => self.request_model(effects),
        }
    }

    /// The budget guard's refusal of the next queued call, if it refuses
    /// it; past the grace steps the turn ends once its calls are answered.
    fn guard_refusal(&mut self) -> Option<String> {
        self.queue.front()?;
        let tokens = self.usage.prompt_tokens + self.usage.completion_tokens;
        match self.guard.as_mut()?.before_call(tokens, self.elapsed) {
            GuardDecision::Allow => None,
            GuardDecision::Summarize(why) => Some(why),
            GuardDecision::Disabled(why) => {
                self.end_after_tools = true;
                Some(why)
            }
        }
    }

    /// Records a call's observation and reports it.
    fn answer(&mut self, call: &ToolCall, outcome: ToolOutcome, effects: &mut Vec<TurnEffect>) {
        let (status, error_code, shown, content) = match outcome {
            Ok(output) => (ToolStatus::Ok, None, None, output),
            Err(error) => (
                ToolStatus::Error,
                Some(error.code),
                Some(crate::tool::truncate_middle(
                    &error.message,
                    EVENT_OUTPUT_LIMIT,
                )),
                format!("error ({}): {}", error.code, error.message),
            ),
        };
        effects.push(TurnEffect::Emit(Event::ToolResult {
            turn_id: self.config.turn_id,
            call_id: call.id.clone(),
            name: call.name.clone(),
            status,
            error_code,
            output: shown
                .unwrap_or_else(|| crate::tool::truncate_middle(&content, EVENT_OUTPUT_LIMIT)),
        }));
        self.record(
            Message::Tool {
                call_id: call.id.clone(),
                content,
            },
            effects,
        );
    }

    fn record(&mut self, message: Message, effects: &mut Vec<TurnEffect>) {
        let message = Arc::new(message);
        self.trail.push(&message);
        self.tail.push(message.clone());
        effects.push(TurnEffect::Record(message));
    }

    fn finish(&mut self, outcome: TurnOutcome, effects: &mut Vec<TurnEffect>) {
        self.phase = Phase::Finished;
        let turn_id = self.config.turn_id;
        let event = match &outcome {
            TurnOutcome::Completed { .. } => Event::TurnCompleted {
                turn_id,
                usage: self.usage,
                iterations: self.iteration,
                context: Some(ContextUsage {
                    used: self.context_tokens(),
                    window: self.window.window,
                }),
            },
            TurnOutcome::Failed {
                category,
                message,
                retryable,
            } => Event::TurnFailed {
                turn_id,
                category: *category,
                message: message.clone(),
                retryable: *retryable,
                usage: self.usage,
                iterations: self.iteration,
            },
        };
        effects.push(TurnEffect::Emit(event));
        effects.push(TurnEffect::Finish(outcome));
    }
}

mod compact;

#[cfg(test)]
mod tests;
