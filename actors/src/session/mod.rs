//! The session actor: the conversation, the mode, the queue, one turn at a time.
//!
//! Every submission ([`Op`]) arrives as a message and is answered with
//! events. A turn runs in its own [`TurnActor`], linked to the session: the
//! turn reports each message it records and its end by message; if it
//! panics instead, the supervisor event fails that turn (closing any tool
//! call it left unanswered) and the session carries on with the next one.
//!
//! The session is also the permission authority for its calls (see
//! `authority`): tool tasks ask it by message, and it answers now or once a
//! person or the guardian has. It supervises its sub-agents (`agents`),
//! keeps its queue and conversation in the store (`turns`), and runs the
//! plan lifecycle (`plan`).
//!
//! # Layout
//! - `turns`: admission, the queue, starting and finishing turns, resume.
//! - `plan`: `/plan`, mode changes, `exit_plan_mode`, questionnaires.
//! - `authority`: permission decisions, prompts, guardian reviews, audit.
//! - `agents`: sub-agents.

mod agents;
mod authority;
mod plan;
mod turns;

pub use agents::Subagents;
pub use authority::PermissionConfig;

use std::collections::VecDeque;
use std::sync::Arc;

use cadre_runtime::tool::PlanRequest;

use cadre_runtime::Mode;
use cadre_runtime::agent::AgentReport;
use cadre_runtime::message::{Message, unanswered_calls};
use cadre_runtime::model::ModelClient;
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::permission::Decision;
use cadre_runtime::protocol::{Activity, Event, FailureCategory, Op, STREAM_VERSION, Usage};
use cadre_runtime::sandbox::{SandboxConfig, sandbox_status};
use cadre_runtime::tool::{
    AgentRequest, Authorization, ErrorCode, ToolOutcome, ToolRunner, Workspace,
};
use cadre_runtime::turn::TurnOutcome;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::{mpsc, oneshot};

use crate::audit::AuditLog;
use crate::store::StoreHandle;
use crate::turn::TurnMsg;

/// Where a session's events go: the host's stream, and (for a session with
/// a store) the stored transcript. Streamed text deltas are not stored; the
/// complete message is.
#[derive(Debug, Clone)]
pub struct EventSink {
    host: mpsc::UnboundedSender<Event>,
    transcript: Option<(StoreHandle, Arc<str>)>,
}

impl EventSink {
    /// A sink to the host only.
    pub fn new(host: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            host,
            transcript: None,
        }
    }

    /// Sends an event to the host and the transcript; false when the host
    /// has stopped listening.
    pub fn send(&self, event: Event) -> bool {
        if let Some((store, session_id)) = &self.transcript
            && !matches!(event, Event::AssistantDelta { .. })
            && let Ok(json) = serde_json::to_string(&event)
        {
            store.append(session_id, Vec::new(), vec![json], Vec::new());
        }
        self.host.send(event).is_ok()
    }
}

/// What a session is, fixed at its start.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The session id.
    pub session_id: String,
    /// The starting mode.
    pub mode: Mode,
    /// The workspace and its confinement.
    pub workspace: Workspace,
    /// The session's files.
    pub paths: SessionPaths,
    /// Model requests one turn may make.
    pub max_iterations: u32,
    /// The agent role (`main` for a user's session).
    pub role: String,
    /// When set, only these tools (and system tools) are offered and run.
    pub allowed_tools: Option<Arc<[String]>>,
    /// `main` for a user's session; a sub-agent's id otherwise.
    pub agent_id: String,
    /// Posture, rules, interactivity, guardian.
    pub permissions: PermissionConfig,
    /// 0 for a user's session; a sub-agent's level below it otherwise.
    pub depth: u32,
    /// The deepest level sub-agents may reach.
    pub max_depth: u32,
    /// Path globs writes must match (a sub-agent's file scope); empty for none.
    pub file_scopes: Vec<Vec<String>>,
    /// The role's system prompt, added to cadre's.
    pub role_prompt: Option<String>,
    /// A model name sent instead of the client's.
    pub model_override: Option<String>,
    /// Roles, models and limits for the `agent` tool; `None` disables it.
    pub subagents: Option<Arc<Subagents>>,
    /// Offer `enter_plan_mode` in Work (config `plan.agent_entry`).
    pub plan_agent_entry: bool,
    /// How `bash` commands are sandboxed; sub-agents share it.
    pub sandbox: Arc<SandboxConfig>,
}

impl SessionConfig {
    /// A user's session in Work mode with the defaults: Ask, interactive,
    /// 50 model requests per turn, sub-agents disabled.
    pub fn new(session_id: impl Into<String>, workspace: Workspace, paths: SessionPaths) -> Self {
        Self {
            session_id: session_id.into(),
            mode: Mode::Work,
            workspace,
            paths,
            max_iterations: 50,
            role: "main".into(),
            allowed_tools: None,
            agent_id: "main".into(),
            permissions: PermissionConfig::default(),
            depth: 0,
            max_depth: cadre_runtime::agent::DEFAULT_MAX_DEPTH,
            file_scopes: Vec::new(),
            role_prompt: None,
            model_override: None,
            subagents: None,
            plan_agent_entry: false,
            sandbox: Arc::default(),
        }
    }
}

/// What a session uses to do its work.
#[derive(Clone)]
pub struct SessionServices {
    /// The model.
    pub model: Arc<dyn ModelClient>,
    /// The tool entry point.
    pub tools: ToolRunner,
    /// The store the session keeps its queue, conversation, transcript,
    /// questionnaires and audit in. A user's session without one gets a
    /// store in memory; a sub-agent has none.
    pub store: Option<StoreHandle>,
}

/// Messages to a session.
#[derive(Debug)]
pub enum SessionMsg {
    /// A submission from the host.
    Op(Op),
    /// A snapshot of the session's state, by reply.
    Snapshot(RpcReplyPort<SessionSnapshot>),
    /// A turn recorded a message (from the turn actor).
    TurnRecord {
        /// The reporting turn.
        turn_id: u64,
        /// The message.
        message: Arc<Message>,
    },
    /// A turn ended (from the turn actor).
    TurnFinished {
        /// The turn.
        turn_id: u64,
        /// How.
        outcome: TurnOutcome,
        /// Its closing event (`turn.completed` or `turn.failed`), emitted by
        /// the session once the turn is settled.
        ending: Option<Box<Event>>,
    },
    /// A tool task asks whether its call may run (from the turn's authorizer).
    Authorize {
        /// The asking turn.
        turn_id: u64,
        /// The call.
        request: Box<Authorization>,
        /// Where the decision goes.
        reply: oneshot::Sender<Decision>,
    },
    /// A guardian finished its review.
    GuardianDone {
        /// The review.
        review_id: u64,
        /// Its decision.
        decision: Decision,
    },
    /// The `agent` tool asks for a sub-agent (from the turn's agent host).
    Agent {
        /// What to do.
        request: AgentRequest,
        /// Where the answer goes.
        reply: oneshot::Sender<ToolOutcome>,
    },
    /// A sub-agent's run ended (from its pump).
    AgentRunDone {
        /// The agent.
        agent_id: String,
        /// Its report.
        report: Box<AgentReport>,
    },
    /// The parent re-derived this sub-agent's authority (at a follow-up):
    /// the posture and mode only ever narrow.
    Narrow {
        /// The posture allowed now.
        posture: cadre_runtime::permission::Posture,
        /// The parent's mode now.
        mode: Mode,
    },
    /// A plan lifecycle tool asks (from the turn's plan host).
    Plan {
        /// What to do.
        request: PlanRequest,
        /// Where the answer goes.
        reply: oneshot::Sender<ToolOutcome>,
    },
}

impl ractor::Message for SessionMsg {}

/// The session's state as a host may inspect it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    /// Idle or running.
    pub activity: Activity,
    /// The mode.
    pub mode: Mode,
    /// Messages waiting.
    pub queue_length: usize,
    /// Turns started.
    pub turns: u64,
    /// The stored conversation.
    pub conversation: Vec<Arc<Message>>,
}

/// The session actor. Stateless itself; everything lives in its state.
pub struct SessionActor;

/// The arguments a session starts with.
pub struct SessionArgs {
    config: SessionConfig,
    services: SessionServices,
    events: EventSink,
}

struct Running {
    turn_id: u64,
    actor: ActorRef<TurnMsg>,
    /// The queue row whose turn this is (none without a store).
    queue_id: Option<i64>,
}

/// A session's state.
pub struct SessionState {
    config: SessionConfig,
    services: SessionServices,
    events: EventSink,
    mode: Mode,
    conversation: Vec<Arc<Message>>,
    queue: VecDeque<turns::Queued>,
    running: Option<Running>,
    store: Option<StoreHandle>,
    /// The questionnaire waiting for an answer, if any.
    questionnaire: Option<String>,
    turns: u64,
    stopping: bool,
    span: tracing::Span,
    authority: authority::Authority,
    children: agents::Children,
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

    /// The session's state now.
    pub async fn snapshot(&self) -> Result<SessionSnapshot, ractor::RactorErr<SessionMsg>> {
        ractor::call!(self.actor, SessionMsg::Snapshot)
    }

    /// Waits until the session actor has stopped.
    pub async fn stopped(self) {
        let _ = self.join.await;
    }
}

/// Starts a session and returns it with its event stream. `session.started`
/// is the first event.
pub async fn spawn_session(
    config: SessionConfig,
    services: SessionServices,
) -> Result<(SessionHandle, mpsc::UnboundedReceiver<Event>), ractor::SpawnErr> {
    let (events, receiver) = mpsc::unbounded_channel();
    let args = SessionArgs {
        config,
        services,
        events: EventSink::new(events),
    };
    let (actor, join) = Actor::spawn(None, SessionActor, args).await?;
    Ok((SessionHandle { actor, join }, receiver))
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
        let span = tracing::info_span!("session", session_id = %args.config.session_id);
        let store = match args.services.store.clone() {
            Some(store) => Some(store),
            None if args.config.depth == 0 => Some(StoreHandle::in_memory().await?),
            None => None,
        };
        let mut events = args.events;
        let audit = match &store {
            Some(store) => {
                events.transcript = Some((store.clone(), args.config.session_id.as_str().into()));
                AuditLog::Store(store.clone())
            }
            None => AuditLog::file(args.config.paths.dir.join("audit.jsonl")),
        };
        let authority = authority::Authority::new(args.config.permissions.clone(), audit);
        let mut state = SessionState {
            authority,
            children: agents::Children::default(),
            mode: args.config.mode,
            config: args.config,
            services: args.services,
            events,
            conversation: Vec::new(),
            queue: VecDeque::new(),
            running: None,
            store,
            questionnaire: None,
            turns: 0,
            stopping: false,
            span,
        };
        state.restore().await?;
        state.emit(Event::SessionStarted {
            version: STREAM_VERSION,
            session_id: state.config.session_id.clone(),
            mode: state.mode,
            posture: state.authority.posture,
            workspace: state.config.workspace.root().display().to_string(),
            model: state.model_name().to_string(),
            sandbox: sandbox_status().to_string(),
        });
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A resumed session carries on with what it had admitted.
        if !state.queue.is_empty() {
            state.start_next(&myself).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Op(op) => state.on_op(&myself, op).await,
            SessionMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            SessionMsg::TurnRecord { turn_id, message } => {
                if state.is_current(turn_id) {
                    state.record(message);
                }
            }
            SessionMsg::TurnFinished {
                turn_id,
                outcome,
                ending,
            } => {
                if let Some(running) = state.running.take_if(|r| r.turn_id == turn_id) {
                    running.actor.stop(None);
                    tracing::info!(parent: &state.span, turn_id, ?outcome, "turn finished");
                    state.withdraw(turn_id);
                    state.close_unanswered("the turn ended before this call was answered");
                    state.finish_turn(running.queue_id).await;
                    if let Some(ending) = ending {
                        state.emit(*ending);
                    }
                    state.after_turn(&myself).await;
                }
            }
            SessionMsg::Plan { request, reply } => state.plan_request(request, reply).await,
            SessionMsg::Authorize {
                turn_id,
                request,
                reply,
            } => state.authorize(&myself, turn_id, *request, reply).await,
            SessionMsg::GuardianDone {
                review_id,
                decision,
            } => state.review_done(review_id, decision),
            SessionMsg::Agent { request, reply } => {
                state.agent_request(&myself, request, reply).await
            }
            SessionMsg::AgentRunDone { agent_id, report } => {
                state.agent_run_done(&agent_id, *report)
            }
            SessionMsg::Narrow { posture, mode } => {
                state.authority.posture = state.authority.posture.narrower(posture);
                state.mode = mode;
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
        // `TurnFinished` first and is then stopped by the session.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            state.guardian_failed(cell.get_id(), &error.to_string());
            if state.agent_crashed(cell.get_id(), &error.to_string()) {
                return Ok(());
            }
            let crashed = state.running.take_if(|r| r.actor.get_id() == cell.get_id());
            if let Some(running) = crashed {
                tracing::error!(parent: &state.span, turn_id = running.turn_id, %error, "turn crashed");
                state.withdraw(running.turn_id);
                state.close_unanswered("the turn crashed before this call was answered");
                state.finish_turn(running.queue_id).await;
                let _ = state.events.send(Event::TurnFailed {
                    turn_id: running.turn_id,
                    category: FailureCategory::Agent,
                    message: format!("the turn crashed: {error}"),
                    retryable: false,
                    usage: Usage::default(),
                    iterations: 0,
                });
                state.after_turn(&myself).await;
            }
        }
        Ok(())
    }
}

impl SessionState {
    fn is_current(&self, turn_id: u64) -> bool {
        self.running.as_ref().is_some_and(|r| r.turn_id == turn_id)
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    fn reject(&self, op: &str, message: impl Into<String>) {
        self.emit(Event::OpRejected {
            op: op.to_string(),
            message: message.into(),
        });
    }

    fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot {
            activity: self.activity(),
            mode: self.mode,
            queue_length: self.queue.len(),
            turns: self.turns,
            conversation: self.conversation.clone(),
        }
    }

    /// The model this session's turns ask.
    fn model_name(&self) -> &str {
        self.config
            .model_override
            .as_deref()
            .unwrap_or_else(|| self.services.model.model())
    }

    fn activity(&self) -> Activity {
        if self.running.is_some() {
            Activity::Running
        } else {
            Activity::Idle
        }
    }

    async fn on_op(&mut self, myself: &ActorRef<SessionMsg>, op: Op) {
        match op {
            Op::UserInput { text, intent } => {
                if self.stopping {
                    return self.reject("user_input", "the session is shutting down");
                }
                self.authority.ledger.user_message();
                self.admit_user(myself, text, intent).await;
            }
            Op::SetMode { mode } => {
                if self.running.is_some() {
                    return self.reject(
                        "set_mode",
                        "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the mode",
                    );
                }
                self.set_mode(mode).await;
            }
            Op::Plan { action } => self.plan_op(action).await,
            Op::Answer { id, answer } => self.answer(myself, id, answer).await,
            Op::SetPosture { posture } => {
                if self.running.is_some() {
                    return self.reject(
                        "set_posture",
                        "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the posture",
                    );
                }
                self.authority.posture = posture;
                self.authority.ledger.resume();
                self.persist(move |store, id| store.set_posture(id, posture))
                    .await;
                self.emit(Event::PostureChanged { posture });
            }
            Op::SetModel { model } => {
                if self.running.is_some() {
                    return self.reject(
                        "set_model",
                        "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the model",
                    );
                }
                let model = model.trim();
                if model.is_empty() {
                    return self.reject("set_model", "the model name is empty");
                }
                self.config.model_override = Some(model.to_string());
                self.emit(Event::ModelChanged {
                    model: model.to_string(),
                });
            }
            Op::Approve { id, decision } => {
                let op = Op::Approve {
                    id: id.clone(),
                    decision,
                };
                if !self.owns_approval(&id) && self.route_approval(&op, &id) {
                    return;
                }
                self.approve(&id, decision)
            }
            Op::Cancel => match self.running.as_ref().map(|r| (r.turn_id, r.actor.clone())) {
                Some((turn_id, actor)) => {
                    // Held calls are settled first, so their denials come
                    // before the turn's end in the event stream.
                    self.withdraw(turn_id);
                    let _ = actor.cast(TurnMsg::Cancel);
                }
                None => self.reject("cancel", "no turn is running"),
            },
            Op::Status => self.emit(Event::SessionStatus {
                activity: self.activity(),
                mode: self.mode,
                posture: self.authority.effective_posture(),
                queue_length: self.queue.len(),
                turns: self.turns,
            }),
            Op::Shutdown => {
                self.stopping = true;
                self.queue.clear();
                match &self.running {
                    Some(running) => {
                        let _ = running.actor.cast(TurnMsg::Cancel);
                    }
                    None => self.stop(myself),
                }
            }
        }
    }

    /// After a turn ends: stop if asked to, else run the next queued message.
    async fn after_turn(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.stopping {
            self.stop(myself);
        } else {
            self.start_next(myself).await;
            if self.running.is_none() {
                self.emit(Event::SessionIdle { turns: self.turns });
            }
        }
    }

    fn stop(&self, myself: &ActorRef<SessionMsg>) {
        self.stop_children();
        self.emit(Event::SessionStopped { turns: self.turns });
        myself.stop(None);
    }

    /// Answers every call the conversation left open, so the next request
    /// is well-formed.
    fn close_unanswered(&mut self, why: &str) {
        for call in unanswered_calls(&self.conversation) {
            self.record(Arc::new(Message::Tool {
                call_id: call.id,
                content: format!("error ({}): {why}", ErrorCode::Cancelled),
            }));
        }
    }
}
