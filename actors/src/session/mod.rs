//! The agent actor: a user's session, or one of its sub-agents. It owns the
//! conversation and the queue, runs one turn at a time, and supervises it.
//!
//! Every submission ([`Op`]) arrives as a message and is answered with
//! events. The decisions live in pure machines of `cadre-runtime`, which
//! this actor steps and whose effects it performs: the queue and its
//! one-turn rule (`TurnQueue`), the approval book (`ApprovalBook`), the
//! child table (`ChildTable`), the plan lifecycle (`plan::lifecycle`). A
//! turn runs in its own [`TurnActor`](crate::turn::TurnActor), linked to the
//! session: it reports each message it records and its end as a
//! [`TurnReport`]; if it panics instead, the supervision event fails that
//! turn (closing any tool call it left unanswered) and the session carries
//! on with the next one.
//!
//! # Layout
//! - `turns`: opening the session, admission, starting and finishing turns.
//! - `plan`: `/plan`, mode changes, `exit_plan_mode`, questionnaires.
//! - `authority`: permission decisions, prompts, guardian reviews, audit.
//! - `config`: [`SessionConfig`], a host's description of a session.
//! - `agents`: sub-agents (`agents/pump.rs`: each child's event pump).
//! - `remote`: children placed on cluster nodes; a placement answers as a
//!   message ([`SessionMsg::Placed`]), so no handler waits on a node.
//! - `goal`: performs the goal machine's effects; the verifier.
//! - `prompt_hooks`: `session_start` and `user_prompt_submit` hooks, run
//!   off the mailbox; their answers come back as [`SessionMsg::PromptHooks`].

mod agents;
mod authority;
mod config;
mod goal;
mod plan;
mod prompt_hooks;
pub mod remote;
mod turns;

pub use agents::Subagents;
pub use authority::PermissionConfig;
pub use cadre_runtime::goal::VerifierOutcome;
pub use config::SessionConfig;
pub use prompt_hooks::PromptHooks;

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, AgentReport, LiveAuthority};
use cadre_runtime::lifecycle::{QueueEffect, QueueInput, TurnQueue};
use cadre_runtime::message::{Message, unanswered_calls};
use cadre_runtime::permission::Decision;
use cadre_runtime::protocol::{Activity, Event, FailureCategory, Op, Usage};
use cadre_runtime::sandbox::sandbox_status;
use cadre_runtime::tool::{AgentRequest, Authorization, ErrorCode, PlanRequest, ToolOutcome};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::events::EventSink;
use crate::guardian::GuardianVerdict;
use crate::kernel::{AgentServices, AgentSpec, SpawnedAgent, spawn_agent};
use crate::store::StoreHandle;
use crate::turn::{TurnMsg, TurnReport};

/// What a session uses to do its work (the kernel's [`AgentServices`]).
pub type SessionServices = AgentServices;

/// Messages to an agent actor. `Op`s come from the host; the others from
/// the agent's own turn, tasks, guardians and children. Replies travel on
/// `RpcReplyPort`s.
#[derive(Debug)]
pub enum SessionMsg {
    /// A submission from the host, or from the agent's parent.
    Op(Op),
    /// A submission with the host's id: the events it causes echo the id.
    Submit(cadre_runtime::protocol::Submission),
    /// A snapshot of the session's state, by reply.
    Snapshot(RpcReplyPort<SessionSnapshot>),
    /// The running turn recorded a message or ended.
    Turn(TurnReport),
    /// A tool task asks whether its call may run; it has evaluated the call
    /// itself (the parsing and the floor run in the task, off this mailbox)
    /// and the session does the bookkeeping.
    Authorize {
        /// The asking turn.
        turn_id: u64,
        /// The call.
        request: Box<Authorization>,
        /// The task's evaluation; `None` when the call was refused before it.
        evaluation: Option<Box<cadre_runtime::permission::Evaluation>>,
        /// Where the decision goes.
        reply: RpcReplyPort<Decision>,
    },
    /// A guardian finished its review.
    Guardian(GuardianVerdict),
    /// The `agent` tool asks for a sub-agent (from the turn's agent host).
    Agent {
        /// What to do.
        request: AgentRequest,
        /// Where the answer goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
    /// A sub-agent's run ended (from its pump).
    AgentRunDone {
        /// The agent.
        agent: AgentPath,
        /// Its report.
        report: Box<AgentReport>,
    },
    /// A node placement for a new child answered (from the task that
    /// asked it): the spawn goes on.
    Placed(Box<remote::Placing>),
    /// The Operate `workflow` tool asks to run a plan (from the turn's
    /// workflow host).
    Workflow {
        /// The plan, as the model wrote it.
        plan: serde_json::Value,
        /// Where the report goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
    /// A goal tool asks (from the turn's goal host).
    GoalTool {
        /// What to do.
        request: cadre_runtime::tool::GoalToolRequest,
        /// Where the answer goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
    /// The goal's verifier answered the claim of turn `turn_id`.
    GoalVerdict {
        /// The turn whose claim it judged (it holds the queue).
        turn_id: u64,
        /// The verdict.
        outcome: VerifierOutcome,
        /// Tokens the verifier spent.
        tokens: u64,
    },
    /// A plan lifecycle tool asks (from the turn's plan host).
    Plan {
        /// What to do.
        request: PlanRequest,
        /// Where the answer goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
    /// The session's `session_start` or a message's `user_prompt_submit`
    /// hooks answered (from the task that ran them).
    PromptHooks(Box<PromptHooks>),
}

impl ractor::Message for SessionMsg {}

impl From<TurnReport> for SessionMsg {
    fn from(report: TurnReport) -> Self {
        SessionMsg::Turn(report)
    }
}

impl TryFrom<SessionMsg> for TurnReport {
    type Error = SessionMsg;

    fn try_from(msg: SessionMsg) -> Result<Self, Self::Error> {
        match msg {
            SessionMsg::Turn(report) => Ok(report),
            other => Err(other),
        }
    }
}

impl From<GuardianVerdict> for SessionMsg {
    fn from(verdict: GuardianVerdict) -> Self {
        SessionMsg::Guardian(verdict)
    }
}

impl TryFrom<SessionMsg> for GuardianVerdict {
    type Error = SessionMsg;

    fn try_from(msg: SessionMsg) -> Result<Self, Self::Error> {
        match msg {
            SessionMsg::Guardian(verdict) => Ok(verdict),
            other => Err(other),
        }
    }
}

/// The session's state as a host may inspect it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    /// Idle or running.
    pub activity: Activity,
    /// The mode in force.
    pub mode: Mode,
    /// Messages waiting.
    pub queue_length: usize,
    /// Turns started.
    pub turns: u64,
    /// The stored conversation.
    pub conversation: Vec<Arc<Message>>,
}

/// The agent actor. Stateless itself; everything lives in its state.
pub struct SessionActor;

/// The arguments an agent starts with.
pub struct SessionArgs {
    pub(crate) spec: AgentSpec,
    pub(crate) services: AgentServices,
    pub(crate) events: EventSink,
}

/// An agent's state.
pub struct SessionState {
    spec: AgentSpec,
    /// Its row in the store.
    row: Arc<str>,
    services: AgentServices,
    events: EventSink,
    /// Its mode and posture as they are now, under its parent's.
    live: Arc<LiveAuthority>,
    conversation: Vec<Arc<Message>>,
    queue: TurnQueue,
    /// The running turn's actor.
    turn: Option<ActorRef<TurnMsg>>,
    store: StoreHandle,
    /// The questionnaire waiting for an answer, if any.
    questionnaire: Option<String>,
    /// The stored queue read back at the start, run once started.
    resumed_queue: Vec<cadre_runtime::lifecycle::Queued>,
    /// The first message the agent was started with, admitted by its
    /// opening or still to admit (a resumed agent's), for `post_start`.
    first: Option<turns::First>,
    /// The submission the running turn answers, for its closing event.
    turn_cause: Option<String>,
    /// `Op::Compact` came while idle: the next turn compacts first.
    compact_next: bool,
    span: tracing::Span,
    authority: authority::Authority,
    children: agents::Children,
    /// The session's goal (a sub-agent has none).
    goal: goal::GoalState,
    /// Prompt hooks in flight, and what the start's hooks added.
    prompt_gate: prompt_hooks::PromptGate,
}

/// A started session: its actor, and a way to wait for its end.
pub struct SessionHandle {
    /// The session actor.
    pub actor: ActorRef<SessionMsg>,
    join: tokio::task::JoinHandle<()>,
}

impl SessionHandle {
    /// Submits an operation; fails only when the session has stopped.
    pub fn submit(&self, op: Op) -> Result<(), ractor::MessagingErr<SessionMsg>> {
        self.actor.cast(SessionMsg::Op(op))
    }

    /// Submits an operation under the host's id `id`: every event it causes
    /// (for a user message, everything its turn emits) carries `id` as its
    /// envelope's `op_id`.
    pub fn submit_as(
        &self,
        id: impl Into<String>,
        op: Op,
    ) -> Result<(), ractor::MessagingErr<SessionMsg>> {
        self.actor
            .cast(SessionMsg::Submit(cadre_runtime::protocol::Submission {
                id: Some(id.into()),
                op,
            }))
    }

    /// The session's state now.
    pub async fn snapshot(&self) -> Result<SessionSnapshot, ractor::RactorErr<SessionMsg>> {
        ractor::call!(self.actor, SessionMsg::Snapshot)
    }

    /// Waits until the session actor has stopped.
    pub async fn stopped(self) {
        let _ = self.join.await;
    }
}

/// Starts a user's session and returns it with its event stream.
/// `session.started` is the first event.
pub async fn spawn_session(
    config: SessionConfig,
    services: SessionServices,
) -> Result<(SessionHandle, crate::events::Events), crate::kernel::StartError> {
    let SpawnedAgent {
        actor,
        join,
        events,
    } = spawn_agent(config.into_spec(), services, None).await?;
    Ok((SessionHandle { actor, join }, events))
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // The session directory is created by whoever first writes to it
        // (the plan file, the task list): no file I/O on the mailbox.
        let spec = args.spec;
        let span = tracing::info_span!("agent", session_id = %spec.session_id, agent = %spec.path);
        let store = match args.services.store.clone() {
            Some(store) => store,
            None => StoreHandle::in_memory().await?,
        };
        let row: Arc<str> = spec.row_id().into();
        let events = args.events.with_transcript(store.clone(), row.clone());
        let live = match &spec.parent {
            Some(parent) => {
                LiveAuthority::child(parent, spec.authority.mode, spec.authority.posture)
            }
            None => LiveAuthority::root(spec.authority.mode, spec.authority.posture),
        };
        let authority = authority::Authority::new(&spec, store.clone());
        let goal = goal::GoalState::new(spec.is_session());
        let mut state = SessionState {
            children: agents::Children::new(spec.path.clone()),
            authority,
            live,
            row,
            services: args.services,
            events,
            conversation: Vec::new(),
            queue: TurnQueue::default(),
            turn: None,
            store,
            questionnaire: None,
            resumed_queue: Vec::new(),
            first: None,
            turn_cause: None,
            compact_next: false,
            span,
            spec,
            goal,
            prompt_gate: prompt_hooks::PromptGate::default(),
        };
        Box::pin(state.open()).await?;
        state.emit(Event::SessionStarted {
            version: cadre_runtime::protocol::STREAM_VERSION,
            session_id: state.spec.session_id.clone(),
            mode: state.mode(),
            posture: state.authority.posture,
            workspace: state.spec.workspace.root().display().to_string(),
            model: state.model_name().to_string(),
            sandbox: sandbox_status().to_string(),
            sandbox_walls: cadre_runtime::sandbox::walls(),
            mode_source: None,
            model_source: None,
            instructions: state
                .spec
                .grounding
                .instructions
                .as_deref()
                .and_then(cadre_runtime::protocol::InstructionsSummary::of),
        });
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.session_start_hooks(&myself);
        // A resumed session carries on with what it had admitted.
        let pending = std::mem::take(&mut state.resumed_queue);
        let effects = state.queue.step(QueueInput::Resumed(pending));
        Box::pin(state.perform(&myself, effects, false)).await;
        Box::pin(state.resume_goal(&myself)).await;
        match state.first.take() {
            Some(turns::First::Admitted(text, admitted)) => {
                Box::pin(state.admitted_first(&myself, text, admitted)).await;
            }
            Some(turns::First::Queue(text)) => {
                Box::pin(state.admit_user(&myself, text, None)).await;
            }
            None => {}
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // The handlers that wait on the store are boxed: an agent's future
        // (kept for its whole life by the actor loop) stays small, and the
        // large state lives only while a message is handled.
        match message {
            SessionMsg::Op(op) => Box::pin(state.on_op(&myself, op)).await,
            SessionMsg::Submit(submission) => {
                let previous = state.events.set_cause(submission.id);
                Box::pin(state.on_op(&myself, submission.op)).await;
                state.events.set_cause(previous);
            }
            SessionMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            SessionMsg::Turn(TurnReport::Record { turn_id, message }) => {
                if state.is_current(turn_id) {
                    state.record(message);
                }
            }
            SessionMsg::Turn(TurnReport::Finished {
                turn_id,
                outcome,
                ending,
            }) => {
                if state.is_current(turn_id) {
                    tracing::info!(parent: &state.span, turn_id, ?outcome, "turn finished");
                    Box::pin(state.turn_ended(&myself, turn_id, ending.map(|e| *e))).await;
                }
            }
            SessionMsg::Plan { request, reply } => {
                Box::pin(state.plan_request(request, reply)).await
            }
            SessionMsg::GoalTool { request, reply } => {
                Box::pin(state.goal_tool(&myself, request, reply)).await
            }
            SessionMsg::GoalVerdict {
                turn_id,
                outcome,
                tokens,
            } => Box::pin(state.goal_verdict(&myself, turn_id, outcome, tokens)).await,
            SessionMsg::Authorize {
                turn_id,
                request,
                evaluation,
                reply,
            } => {
                Box::pin(state.authorize(&myself, turn_id, *request, evaluation.map(|e| *e), reply))
                    .await
            }
            SessionMsg::Guardian(verdict) => state.review_done(verdict.review_id, verdict.decision),
            SessionMsg::Agent { request, reply } => {
                Box::pin(state.agent_request(&myself, request, reply)).await
            }
            SessionMsg::AgentRunDone { agent, report } => {
                Box::pin(state.agent_run_done(&agent, *report)).await;
                Box::pin(state.goal_kick(&myself)).await;
            }
            SessionMsg::Placed(placing) => Box::pin(state.placed(&myself, *placing)).await,
            SessionMsg::Workflow { plan, reply } => state.delegate(plan, reply),
            SessionMsg::PromptHooks(answer) => {
                Box::pin(state.prompt_hooks_answered(&myself, *answer)).await
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Only a failure needs handling: a turn that ends normally reports
        // its end first and is then stopped by the session.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            state.guardian_failed(cell.get_id(), &error.to_string());
            if Box::pin(state.agent_crashed(cell.get_id(), &error.to_string())).await {
                return Ok(());
            }
            let crashed = state
                .turn
                .as_ref()
                .is_some_and(|turn| turn.get_id() == cell.get_id());
            if let (true, Some(running)) = (crashed, state.queue.running()) {
                tracing::error!(parent: &state.span, turn_id = running.turn_id, %error, "turn crashed");
                let failed = Event::TurnFailed {
                    turn_id: running.turn_id,
                    category: FailureCategory::Agent,
                    message: format!("the turn crashed: {error}"),
                    retryable: false,
                    usage: Usage::default(),
                    iterations: 0,
                };
                Box::pin(state.turn_ended(&myself, running.turn_id, Some(failed))).await;
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // What the agent started ends with it (its whole tree's, for a
        // session).
        state.spec.end_processes();
        if state.spec.is_session() {
            // Written with the session's last appends, without a commit of
            // its own.
            state.store.release_lease(&state.row);
        }
        Ok(())
    }
}

impl SessionState {
    fn is_current(&self, turn_id: u64) -> bool {
        self.queue.running().is_some_and(|r| r.turn_id == turn_id)
    }

    /// The mode in force: this agent's, narrowed by its ancestors'.
    fn mode(&self) -> Mode {
        self.live.mode()
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Emits an event the running turn caused (a permission decision, an
    /// approval prompt), under the turn's submission id.
    fn emit_for_turn(&mut self, event: Event) {
        let previous = self.events.set_cause(self.turn_cause.clone());
        let _ = self.events.send(event);
        self.events.set_cause(previous);
    }

    fn reject(&self, op: &str, message: impl Into<String>) {
        self.emit(Event::OpRejected {
            op: op.to_string(),
            message: message.into(),
            retryable: false,
        });
    }

    fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot {
            activity: self.activity(),
            mode: self.mode(),
            queue_length: self.queue.len(),
            turns: self.queue.turns(),
            conversation: self.conversation.clone(),
        }
    }

    /// The model this agent's turns ask.
    fn model_name(&self) -> &str {
        self.spec
            .model
            .as_deref()
            .unwrap_or_else(|| self.services.model.model())
    }

    fn activity(&self) -> Activity {
        if self.queue.running().is_some() {
            Activity::Running
        } else {
            Activity::Idle
        }
    }

    /// Refuses a change while a turn runs (M6).
    fn busy(&self, op: &str, what: &str) -> bool {
        if self.queue.running().is_some() {
            self.reject(
                op,
                format!(
                    "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the {what}"
                ),
            );
            return true;
        }
        false
    }

    async fn on_op(&mut self, myself: &ActorRef<SessionMsg>, op: Op) {
        match op {
            Op::UserInput { text, intent } => Box::pin(self.user_input(myself, text, intent)).await,
            Op::SetMode { mode } => {
                if !self.busy("set_mode", "mode") {
                    self.set_mode(mode).await;
                }
            }
            Op::Plan { action } => self.plan_op(action).await,
            Op::Answer { id, answer } => self.answer(myself, id, answer).await,
            Op::SetPosture { posture } => {
                if self.busy("set_posture", "posture") {
                    return;
                }
                self.authority.posture = posture;
                self.authority.ledger.resume();
                self.publish_posture();
                let row = self.row.to_string();
                self.persist(|reply| crate::store::StoreRequest::SetPosture {
                    session_id: row,
                    posture,
                    reply,
                })
                .await;
                self.emit(Event::PostureChanged { posture });
            }
            Op::SetModel { model } => {
                if self.busy("set_model", "model") {
                    return;
                }
                let model = model.trim();
                if model.is_empty() {
                    return self.reject("set_model", "the model name is empty");
                }
                self.spec.model = Some(model.to_string());
                self.spec.context = self.spec.context.for_model(model);
                self.emit(Event::ModelChanged {
                    model: model.to_string(),
                });
            }
            Op::Approve {
                id,
                decision,
                reason,
            } => self.approve(&id, decision, reason),
            Op::Cancel => match self.queue.running() {
                Some(running) => self.cancel(running.turn_id),
                None => self.reject("cancel", "no turn is running"),
            },
            Op::Status => self.emit(Event::SessionStatus {
                activity: self.activity(),
                mode: self.mode(),
                posture: self.effective_posture(),
                queue_length: self.queue.len(),
                turns: self.queue.turns(),
            }),
            Op::Restore { snapshot, dry_run } => {
                if !self.busy("restore", "workspace") {
                    self.restore(snapshot, dry_run).await;
                }
            }
            Op::Goal { action } => Box::pin(self.goal_input(myself, *action)).await,
            Op::Compact => match &self.turn {
                Some(turn) => {
                    let _ = turn.cast(TurnMsg::Compact);
                }
                None => self.compact_next = true,
            },
            Op::Shutdown => {
                let effects = self.queue.step(QueueInput::Shutdown);
                self.perform(myself, effects, false).await;
            }
        }
    }

    /// Puts the workspace back as a snapshot recorded it, after recording
    /// it as it is now. The handler waits for the restore (on the blocking
    /// pool): no turn may start while files are being put back. The
    /// conversation is kept, and a note added after it tells the model; the
    /// event, stored in the transcript, records it too.
    async fn restore(&mut self, snapshot: String, dry_run: bool) {
        let Some(snapshots) = self.spec.snapshots.clone() else {
            return self.reject("restore", "this session records no snapshots");
        };
        let before = (!dry_run).then(|| cadre_runtime::snapshot::Mark {
            session: self.spec.session_id.clone(),
            agent: self.spec.path.to_string(),
            turn: None,
            label: format!("before restoring {}", short(&snapshot)),
        });
        let restored =
            tokio::task::spawn_blocking(move || snapshots.restore(&snapshot, before.as_ref()))
                .await;
        match restored {
            Ok(Ok(report)) => {
                tracing::info!(parent: &self.span, snapshot = %report.snapshot, dry_run, "workspace restored");
                if let (false, Some(note)) = (dry_run, report.note()) {
                    // The model learns of it at its next turn.
                    self.record(Arc::new(Message::user(note)));
                }
                self.emit(report.into_event(dry_run));
            }
            Ok(Err(err)) => self.reject("restore", err.to_string()),
            Err(err) => self.reject("restore", format!("the restore failed: {err}")),
        }
    }

    /// Held calls are settled first, so their denials come before the
    /// turn's end in the event stream; then the turn is told to stop.
    fn cancel(&mut self, turn_id: u64) {
        // A turn held by its claim's verifier: stopping the verifier moves
        // the queue on.
        self.stop_verification();
        self.withdraw(turn_id);
        if let Some(turn) = &self.turn {
            let _ = turn.cast(TurnMsg::Cancel);
        }
    }

    /// Performs what the queue machine decided. `start_recorded` says the
    /// store already recorded the first started turn's start (admission
    /// and start share one trip).
    async fn perform(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        effects: Vec<QueueEffect>,
        mut start_recorded: bool,
    ) {
        let mut effects: std::collections::VecDeque<QueueEffect> = effects.into();
        while let Some(effect) = effects.pop_front() {
            match effect {
                QueueEffect::Acknowledge { queue_length } => {
                    self.emit(Event::InputAdmitted { queue_length })
                }
                QueueEffect::Start { turn_id, message } => {
                    if let goal::Gate::Skip(then) = self.goal_gate(myself, turn_id, &message).await
                    {
                        effects.extend(then);
                        continue;
                    }
                    let recorded = std::mem::replace(&mut start_recorded, false);
                    if let Err(failed) = self.start_turn(myself, turn_id, message, recorded).await {
                        self.emit(failed);
                        effects.extend(self.queue.step(QueueInput::Finished { turn_id }));
                    }
                }
                QueueEffect::Cancel { turn_id } => self.cancel(turn_id),
                QueueEffect::Idle { turns } => self.emit(Event::SessionIdle { turns }),
                QueueEffect::Stop { turns } => {
                    self.stop_children();
                    self.emit(Event::SessionStopped { turns });
                    myself.stop(None);
                }
            }
        }
    }

    /// Settles a turn that ended (normally, failed, or crashed): its held
    /// calls are withdrawn, its open calls closed, its end stored; only
    /// then is `ending` announced, or, when the store could not record the
    /// turn, an infrastructure failure instead.
    async fn turn_ended(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        ending: Option<Event>,
    ) {
        if let Some(turn) = self.turn.take() {
            turn.stop(None);
        }
        let queue_id = self.queue.running().and_then(|r| r.queue_id);
        self.withdraw(turn_id);
        self.close_unanswered("the turn ended before this call was answered");
        let stored = self.finish_turn(queue_id).await;
        let closing = ending.clone();
        let previous = self.events.set_cause(self.turn_cause.take());
        match (stored, ending) {
            (Ok(()), Some(ending)) => self.emit(ending),
            (Ok(()), None) => {}
            (Err(err), ending) => {
                let (usage, iterations) = match ending {
                    Some(Event::TurnCompleted {
                        usage, iterations, ..
                    })
                    | Some(Event::TurnFailed {
                        usage, iterations, ..
                    }) => (usage, iterations),
                    _ => (Usage::default(), 0),
                };
                self.emit(Event::TurnFailed {
                    turn_id,
                    category: FailureCategory::Infrastructure,
                    message: format!("the turn's work could not be stored: {err}"),
                    retryable: true,
                    usage,
                    iterations,
                });
            }
        }
        self.events.set_cause(previous);
        let mut effects = Vec::new();
        if Box::pin(self.settle_goal(myself, turn_id, closing.as_ref(), &mut effects)).await {
            // The claim's verifier holds the queue until its verdict.
            return;
        }
        effects.extend(self.queue.step(QueueInput::Finished { turn_id }));
        self.perform(myself, effects, false).await;
    }

    /// Answers every call the conversation left open, so the next request
    /// is well-formed.
    fn close_unanswered(&mut self, why: &str) {
        self.answer_unanswered(&format!("error ({}): {why}", ErrorCode::Cancelled));
    }

    /// Answers every open call with `content`.
    pub(super) fn answer_unanswered(&mut self, content: &str) {
        for call in unanswered_calls(&self.conversation) {
            self.record(Arc::new(Message::Tool {
                call_id: call.id,
                content: content.to_string(),
            }));
        }
    }
}

/// A snapshot id as people read it: its first twelve characters.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}
