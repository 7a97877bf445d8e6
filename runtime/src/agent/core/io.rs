//! What goes into an [`AgentCore`](super::AgentCore) and what comes out.
//!
//! An input is a message an agent actor receives, without its reply port
//! (a [`Ticket`] stands for it), or the answer of an effect the actor
//! performed (a store trip, a frozen plan, a spawned turn that failed). An
//! effect is one thing the actor does, in the order given.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::agent::{AgentPath, AgentReport, ChildState};
use crate::context::Conversation;
use crate::goal::{BudgetGuard, Goal, GoalSettings, VerifierOutcome};
use crate::lifecycle::Queued;
use crate::message::Message;
use crate::mode::Mode;
use crate::permission::{Decision, Evaluation, Layer, Posture};
use crate::plan::Snapshot;
use crate::plan::lifecycle::{ModeIntent, QuestionnaireAnswer, QuestionnaireKind};
use crate::protocol::{Event, FailureCategory, Op};
use crate::store::{AnswerOutcome, StoreError};
use crate::tool::{GoalToolRequest, PlanRequest, ToolError, ToolOutcome};

/// Stands for a reply port the actor keeps: the core answers it with
/// [`AgentEffect::Reply`] or lets it go with [`AgentEffect::Drop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// One call a tool task asks about, as the core keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallAsked {
    /// The call's id in the conversation.
    pub call_id: String,
    /// The tool's registered name.
    pub tool: String,
    /// The exact arguments: "allow for the session" remembers them.
    pub args: Value,
    /// The gate that refused it before any evaluation, and why.
    pub refused: Option<(Layer, ToolError)>,
    /// What a person asked about it sees of its effect.
    pub preview: Option<String>,
}

/// A sub-agent read back from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredChild {
    /// Where it sits.
    pub path: AgentPath,
    /// Its role, which a follow-up narrows with again.
    pub role: String,
    /// As stored; a running one was interrupted.
    pub state: ChildState,
    /// What `wait` answers with.
    pub report: Option<AgentReport>,
}

/// What the store held when the agent opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Opened {
    /// The mode and posture a session runs with now (a sub-agent's come
    /// from its parent, so it has none).
    pub stored: Option<(Mode, Posture)>,
    /// The conversation a resume gives the model again, as the agent holds
    /// it (read from the store message by message).
    pub conversation: Conversation,
    /// Turns finished before: the next one is numbered after them.
    pub turns: u64,
    /// The questionnaire still waiting for a person.
    pub questionnaire: Option<String>,
    /// Sub-agents under this agent.
    pub children: Vec<RestoredChild>,
    /// The session's goal.
    pub goal: Option<Goal>,
}

/// How the agent's first message reached the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum First {
    /// The opening admitted it and recorded its turn's start: run it.
    Admitted {
        /// The message.
        text: String,
        /// Its queue row.
        id: i64,
    },
    /// A resumed agent's: admit it like a person's message.
    Queue(String),
}

/// What a store trip the core waits for answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// [`Ask::Admit`]: the row, and the plan backup an entry made.
    Admitted(Result<(i64, Option<PathBuf>), StoreError>),
    /// [`Ask::StartTurn`].
    Started(Result<(), StoreError>),
    /// [`Ask::FinishTurn`].
    Finished(Result<(), StoreError>),
    /// [`Ask::Continue`]: the continuation's row.
    Continued(Result<i64, StoreError>),
    /// [`Ask::EnterPlan`]: the plan backup.
    Entered(Result<Option<PathBuf>, StoreError>),
    /// [`Ask::Answer`].
    Answered(Result<AnswerOutcome, StoreError>),
    /// [`Ask::Pending`]: the stored queue.
    Pending(Result<Vec<Queued>, StoreError>),
    /// [`Ask::OpenQuestionnaire`].
    Opened(Result<(), StoreError>),
}

/// Everything an agent actor hands its core.
#[derive(Debug, Clone)]
pub enum AgentInput {
    /// The store's record of the agent, read at its start.
    Opened(Box<Opened>),
    /// The actor runs: carry on with the stored queue and the first
    /// message.
    Running {
        /// The stored queue, an interrupted message first.
        pending: Vec<Queued>,
        /// The agent's first message, if it has one.
        first: Option<First>,
    },
    /// A submission; `cause` is the host's id for it, echoed by the events
    /// it causes.
    Op {
        /// What to do.
        op: Op,
        /// The submission's id.
        cause: Option<String>,
    },
    /// The store answered the trip the core waits for.
    Store(Answer),
    /// The running turn recorded a message.
    Recorded {
        /// A late report of a turn already closed is ignored.
        turn_id: u64,
        /// What it recorded.
        message: Arc<Message>,
    },
    /// A turn ended (normally, failed, or crashed); `ending` is the event
    /// to announce once its end is stored.
    TurnEnded {
        /// Only the running turn's end is taken.
        turn_id: u64,
        /// `turn.completed` or `turn.failed`; none when cancelled silently.
        ending: Option<Event>,
    },
    /// The turn actor that [`AgentEffect::SpawnTurn`] asked for did not start.
    TurnUnstarted {
        /// Its message is marked done and the queue moves on.
        turn_id: u64,
        /// Why, for `turn.failed`.
        error: String,
    },
    /// A note the model reads at its next turn (a restored workspace).
    Note(String),
    /// A tool task asks whether its call may run. `posture` is the
    /// posture in force along the agent's chain now.
    Authorize {
        /// Where the decision goes.
        ticket: Ticket,
        /// The asking turn.
        turn_id: u64,
        /// What the decision, the audit and the prompt name.
        call: CallAsked,
        /// The task's evaluation; `None` when the call was refused before.
        evaluation: Option<Evaluation>,
        /// The posture in force now.
        posture: Posture,
    },
    /// A guardian answered, failed, or could not start.
    Reviewed {
        /// The review.
        review_id: u64,
        /// Its decision (a failure denies).
        decision: Decision,
    },
    /// A plan tool asks. `nonce` makes a questionnaire's id.
    PlanTool {
        /// Where the tool's answer goes.
        ticket: Ticket,
        /// What it asks.
        request: PlanRequest,
        /// Twelve fresh hex digits.
        nonce: String,
    },
    /// The plan file read for [`AgentEffect::Freeze`].
    Frozen {
        /// The tool waiting for it.
        ticket: Ticket,
        /// The questionnaire's id.
        id: String,
        /// The frozen plan, or why it could not be.
        snapshot: Result<Snapshot, ToolError>,
    },
    /// A goal tool asks.
    GoalTool {
        /// Where the tool's answer goes.
        ticket: Ticket,
        /// What it asks.
        request: GoalToolRequest,
    },
    /// The verifier answered the claim of turn `turn_id`.
    Verdict {
        /// The turn holding the queue.
        turn_id: u64,
        /// What it said, or that it was stopped.
        outcome: VerifierOutcome,
        /// What it spent, the goal's.
        usage: crate::protocol::Usage,
    },
    /// A child started (here, or on a node which sent it its prompt).
    ChildStarted(Box<ChildStart>),
    /// `agent` follow-up: the actor checked the role and the authority.
    FollowUp {
        /// Where the answer goes.
        ticket: Ticket,
        /// The child.
        path: AgentPath,
        /// Its next message.
        prompt: String,
        /// The caller does not wait for the report.
        background: bool,
    },
    /// The follow-up [`AgentEffect::ResumeChild`] asked for runs.
    ChildResumed {
        /// Where the answer goes.
        ticket: Ticket,
        /// The child.
        path: AgentPath,
        /// Its next message.
        prompt: String,
        /// The caller does not wait for the report.
        background: bool,
    },
    /// The follow-up could not run (no slot, no model, no actor).
    ChildNotResumed {
        /// Where the refusal goes.
        ticket: Ticket,
        /// The child, idle again.
        path: AgentPath,
        /// Why.
        error: ToolError,
    },
    /// `agent` wait.
    Wait {
        /// Where the report goes.
        ticket: Ticket,
        /// The child, as the model named it.
        agent_id: String,
    },
    /// A child's run ended.
    ChildDone {
        /// The child.
        path: AgentPath,
        /// Its report.
        report: Box<AgentReport>,
    },
    /// A child's actor failed.
    ChildCrashed {
        /// The child.
        path: AgentPath,
        /// What failed.
        error: String,
    },
}

/// A child that started, for [`AgentInput::ChildStarted`].
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStart {
    /// Where the answer goes.
    pub ticket: Ticket,
    /// Where it sits.
    pub path: AgentPath,
    /// Its role.
    pub role: String,
    /// The model it asks, as `agent.spawned` names it.
    pub model: String,
    /// Its posture.
    pub posture: Posture,
    /// Its depth.
    pub depth: u32,
    /// Its first message; `None` when it was sent with the start (a node).
    pub prompt: Option<String>,
    /// The caller does not wait for the report.
    pub background: bool,
}

/// A store write whose failure is only logged: the agent keeps its state
/// in memory, and a turn's end reports a lost write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Append the message at `seq` to the conversation.
    Append {
        /// Its place.
        seq: i64,
        /// The message.
        message: Arc<Message>,
    },
    /// The posture a person chose.
    Posture(Posture),
    /// The mode, leaving or not entering Plan.
    Mode(Mode),
    /// Withdraw a questionnaire left behind by leaving Plan.
    Withdraw(String),
    /// Mark a queued message done without running it.
    Done(i64),
    /// A child's state (and report), so a resumed session knows it.
    Child {
        /// The child.
        path: AgentPath,
        /// Its state.
        state: ChildState,
        /// Its last report.
        report: Option<Box<AgentReport>>,
    },
    /// The goal as it is now.
    Goal(Box<Goal>),
    /// Remove the stored goal.
    ForgetGoal,
}

/// A store trip whose answer comes back as [`AgentInput::Store`] before
/// anything else.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Admit a person's message with its intent; `start_seq` records its
    /// turn's start in the same trip, at that place in the conversation.
    Admit {
        /// The message.
        text: String,
        /// The mode change riding on it.
        intent: Option<ModeIntent>,
        /// Where its user message goes when its turn starts at once.
        start_seq: Option<i64>,
    },
    /// Record a turn's start; `user` is its message at that place (none
    /// for a turn continued after a crash).
    StartTurn {
        /// Its queue row.
        queue_id: i64,
        /// The message to store.
        user: Option<(i64, Message)>,
    },
    /// Mark a turn's message done.
    FinishTurn(i64),
    /// Admit a continuation with the goal in one transaction.
    Continue {
        /// The goal with this continuation taken.
        goal: Box<Goal>,
        /// The message.
        text: String,
        /// Which continuation it is (its key).
        n: u64,
    },
    /// Record Plan, backing up the old plan.
    EnterPlan,
    /// Answer a questionnaire (the store carries out the transition).
    Answer {
        /// The questionnaire.
        id: String,
        /// The answer.
        answer: QuestionnaireAnswer,
    },
    /// Read the queue again.
    Pending,
    /// Open a questionnaire.
    OpenQuestionnaire {
        /// The id a person's answer names.
        id: String,
        /// What it asks.
        kind: QuestionnaireKind,
        /// The frozen plan, or the model's reason for an entry.
        snapshot: String,
        /// The snapshot's SHA-256 (empty for an entry).
        sha256: String,
        /// Whether the snapshot was cut.
        truncated: bool,
    },
}

/// How the answer of a tool request reaches it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A permission decision.
    Decision(Decision),
    /// A tool's answer.
    Tool(ToolOutcome),
}

/// The turn to start, as the core decided it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnStart {
    /// Events and tool calls of the turn carry it.
    pub turn_id: u64,
    /// The submission it answers, echoed by its events.
    pub cause: Option<String>,
    /// `Op::Compact` came while idle: compact before the first request.
    pub compact_first: bool,
    /// The summary turn after a goal's budget stop runs with no tools.
    pub tools: bool,
    /// The goal's budgets, asked before every tool call.
    pub budget: Option<BudgetGuard>,
    /// The goal as a compaction re-states it.
    pub goal: Option<String>,
    /// The conversation the turn starts from, its message included.
    pub conversation: Conversation,
}

/// What a plan read shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanRead {
    /// `/plan status`: whether the file exists, and the questionnaire
    /// waiting.
    Status(Option<String>),
    /// `/plan view`: its text.
    View,
}

/// One thing the actor does.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEffect {
    /// Send an event under the submission being handled.
    Emit(Event),
    /// Send an event under this cause (the running turn's).
    EmitAs {
        /// The submission id to echo.
        cause: Option<String>,
        /// The event.
        event: Event,
    },
    /// Write to the store, waiting for the trip.
    Persist(Write),
    /// Ask the store; the answer is the next input.
    Ask(Ask),
    /// Audit one automatic decision.
    Audit {
        /// The call the audit record is for.
        call_id: String,
        /// Its tool.
        tool: String,
        /// Its arguments.
        args: Value,
        /// The posture it was decided under.
        posture: Posture,
        /// The decision.
        decision: Decision,
        /// Its transcript line.
        line: String,
    },
    /// Answer a waiting request.
    Reply {
        /// The request.
        ticket: Ticket,
        /// Its answer.
        reply: Reply,
    },
    /// Let a waiting request go unanswered (it reads as withdrawn).
    Drop(Ticket),
    /// Start a turn's actor; if it cannot start, say so with
    /// [`AgentInput::TurnUnstarted`].
    SpawnTurn(TurnStart),
    /// Stop the ended turn's actor.
    StopTurn,
    /// Cancel the running turn.
    CancelTurn,
    /// Let the running turn end once its tool calls are answered.
    EndTurnAfterTools,
    /// Stop the running turn with this failure.
    HaltTurn {
        /// Why, for machines.
        category: FailureCategory,
        /// Why, for people.
        message: String,
    },
    /// Compact the running turn's conversation before its next request.
    CompactTurn,
    /// Start the guardian on a held call; its answer is
    /// [`AgentInput::Reviewed`].
    Review {
        /// The review.
        review_id: u64,
        /// The turn that made the call.
        turn_id: u64,
        /// The call's tool.
        tool: String,
        /// Its arguments.
        args: Value,
        /// The floor's observations.
        observations: Vec<String>,
    },
    /// Stop a guardian whose call was withdrawn.
    StopReview(u64),
    /// Start the verifier on a claim; its answer is
    /// [`AgentInput::Verdict`].
    Verify {
        /// The claiming turn, holding the queue.
        turn_id: u64,
        /// The objective.
        objective: String,
        /// The worker's claim.
        claim: String,
        /// How to verify.
        settings: GoalSettings,
        /// Where the claiming turn's messages begin.
        seq: usize,
    },
    /// Stop the running verifier; it answers `Cancelled`.
    StopVerifier,
    /// Read the plan file and freeze it; the answer is
    /// [`AgentInput::Frozen`].
    Freeze {
        /// The tool waiting.
        ticket: Ticket,
        /// The questionnaire's id.
        id: String,
    },
    /// Read the plan file for a person.
    ReadPlan(PlanRead),
    /// Put the workspace back as a snapshot recorded it.
    Restore {
        /// The snapshot.
        snapshot: String,
        /// Only say what would change.
        dry_run: bool,
    },
    /// This agent's turns ask another model.
    SetModel(String),
    /// Send a child an op.
    SendChild {
        /// The child.
        path: AgentPath,
        /// The op.
        op: Op,
    },
    /// Start a follow-up on a child (its slot, or a new actor for a child
    /// read back from the store); the answer is
    /// [`AgentInput::ChildResumed`] or [`AgentInput::ChildNotResumed`].
    ResumeChild {
        /// Where the answer goes.
        ticket: Ticket,
        /// The child.
        path: AgentPath,
        /// Whether it has a live actor.
        live: bool,
        /// Its next message.
        prompt: String,
        /// The caller does not wait.
        background: bool,
    },
    /// Release a child's slot among the tree's running sub-agents.
    FreeSlot(AgentPath),
    /// Something for the log.
    Log(String),
    /// Stop the agent's actor.
    Stop,
}
