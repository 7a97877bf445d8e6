//! The agent actor: a user's session, or one of its sub-agents. It is the
//! mailbox of one [`AgentCore`] and the hands that carry out what it
//! decides.
//!
//! Every message becomes an [`AgentInput`] (its reply port held under a
//! [`Ticket`]); the core answers with effects, which [`SessionState::run`]
//! performs in order (`perform.rs`), handing the answers of store trips and
//! of what it started back as the next inputs. A handler waits only on the
//! store. A turn runs in its own [`TurnActor`](crate::turn::TurnActor),
//! linked to the session: it reports each message it records and its end
//! as a [`TurnReport`]; if it panics instead, the supervision event fails
//! that turn (closing any tool call it left unanswered) and the session
//! carries on with the next one.
//!
//! # Layout
//! - `perform`: one effect at a time; the store's writes and asks.
//! - `turns`: opening the agent, and building and spawning a turn.
//! - `authority`: the tool task's evaluation, guardians, the audit.
//! - `config`: [`SessionConfig`], a host's description of a session.
//! - `agents`: sub-agents' mechanics (roles, slots, specs, starts;
//!   `agents/pump.rs`: each child's event pump).
//! - `remote`: children placed on cluster nodes; a placement answers as a
//!   message ([`SessionMsg::Placed`]), so no handler waits on a node.
//! - `plan`, `goal`: the plan and goal tools' hosts; the goal's verifier.
//! - `prompt_hooks`: `session_start` and `user_prompt_submit` hooks, run
//!   off the mailbox; their answers come back as [`SessionMsg::PromptHooks`],
//!   and only then does a message reach the core.

mod agents;
mod authority;
mod config;
mod goal;
mod perform;
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
use std::time::Instant;

use cadre_runtime::Mode;
use cadre_runtime::agent::core::{AgentCore, AgentInput, CoreConfig, First, Reply, Ticket};
use cadre_runtime::agent::{AgentPath, AgentReport, LiveAuthority};
use cadre_runtime::message::Message;
use cadre_runtime::permission::{Decision, guardian};
use cadre_runtime::protocol::{Activity, Event, FailureCategory, Op, Usage};
use cadre_runtime::sandbox::sandbox_status;
use cadre_runtime::tool::{AgentRequest, Authorization, PlanRequest, ToolOutcome};
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
        /// Where the report goes; closed when the call is cancelled,
        /// which cancels the run.
        reply: tokio::sync::oneshot::Sender<ToolOutcome>,
    },
    /// A goal tool asks (from the turn's goal host).
    GoalTool {
        /// What to do.
        request: cadre_runtime::tool::GoalToolRequest,
        /// Where the answer goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
    /// The session's `session_start` or a message's `user_prompt_submit`
    /// hooks answered (from the task that ran them).
    PromptHooks(Box<PromptHooks>),
    /// The goal's verifier answered the claim of turn `turn_id`.
    GoalVerdict {
        /// The turn whose claim it judged (it holds the queue).
        turn_id: u64,
        /// The verdict.
        outcome: VerifierOutcome,
        /// What the verifier spent (the goal's, shown apart).
        usage: Usage,
    },
    /// A plan lifecycle tool asks (from the turn's plan host).
    Plan {
        /// What to do.
        request: PlanRequest,
        /// Where the answer goes.
        reply: RpcReplyPort<ToolOutcome>,
    },
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
    /// The conversation as the agent holds it: what its next request
    /// sends (after a compaction, the record and what follows it; the
    /// messages it replaced are only in the store).
    pub conversation: Vec<Arc<Message>>,
    /// Messages stored, replaced ones included.
    pub stored: usize,
}

/// The agent actor. Stateless itself; everything lives in its state.
pub struct SessionActor;

/// The arguments an agent starts with.
pub struct SessionArgs {
    pub(crate) spec: AgentSpec,
    pub(crate) services: AgentServices,
    pub(crate) events: EventSink,
}

/// An agent's state: its decisions (the core) and what carries them out.
pub struct SessionState {
    spec: AgentSpec,
    /// Its row in the store.
    row: Arc<str>,
    services: AgentServices,
    events: EventSink,
    /// Its mode and posture as they are now, under its parent's.
    live: Arc<LiveAuthority>,
    /// Every decision: the queue, prompts, children, plan and goal.
    core: AgentCore,
    /// The running turn's actor.
    turn: Option<ActorRef<TurnMsg>>,
    store: StoreHandle,
    /// The stored queue and first message read back at the start, run
    /// once the actor runs (`post_start`).
    start: Option<(Vec<cadre_runtime::lifecycle::Queued>, Option<First>)>,
    span: tracing::Span,
    /// The reply ports the core's tickets stand for.
    replies: Replies,
    authority: authority::Authority,
    children: agents::Children,
    /// Stops the running goal verifier (a cancel, a shutdown); it then
    /// answers `Cancelled`.
    verifier: Option<tokio::sync::oneshot::Sender<()>>,
    /// Prompt hooks in flight, and what the start's hooks added.
    prompt_gate: prompt_hooks::PromptGate,
}

/// A reply port a [`Ticket`] stands for.
enum Port {
    Decision(RpcReplyPort<Decision>),
    Tool(RpcReplyPort<ToolOutcome>),
}

/// The reply ports of requests the core has not answered yet.
#[derive(Default)]
struct Replies {
    /// The last ticket handed out.
    last: u64,
    held: std::collections::HashMap<Ticket, Port>,
}

impl Replies {
    fn hold(&mut self, port: Port) -> Ticket {
        self.last += 1;
        let ticket = Ticket(self.last);
        self.held.insert(ticket, port);
        ticket
    }

    fn decision(&mut self, reply: RpcReplyPort<Decision>) -> Ticket {
        self.hold(Port::Decision(reply))
    }

    fn tool(&mut self, reply: RpcReplyPort<ToolOutcome>) -> Ticket {
        self.hold(Port::Tool(reply))
    }

    /// Sends `answer` on the ticket's port; a mismatched answer (never, by
    /// construction) drops the port, which its asker reads as withdrawn.
    fn send(&mut self, ticket: Ticket, answer: Reply) {
        match (self.held.remove(&ticket), answer) {
            (Some(Port::Decision(port)), Reply::Decision(decision)) => {
                let _ = port.send(decision);
            }
            (Some(Port::Tool(port)), Reply::Tool(outcome)) => {
                let _ = port.send(outcome);
            }
            (Some(Port::Decision(_)), Reply::Tool(_))
            | (Some(Port::Tool(_)), Reply::Decision(_))
            | (None, Reply::Decision(_) | Reply::Tool(_)) => {}
        }
    }

    fn drop_port(&mut self, ticket: Ticket) {
        self.held.remove(&ticket);
    }
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
        myself: ActorRef<Self::Msg>,
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
        let core = AgentCore::new(
            CoreConfig {
                path: spec.path.clone(),
                session: spec.is_session(),
                interactive: spec.interactive,
                plan_agent_entry: spec.plan_agent_entry,
                plan_path: spec.paths.plan_file().display().to_string(),
                posture: spec.authority.posture,
            },
            live.clone(),
        );
        let authority = authority::Authority::new(&spec, store.clone());
        let mut state = SessionState {
            children: agents::Children::default(),
            authority,
            live,
            row,
            services: args.services,
            events,
            core,
            turn: None,
            store,
            start: None,
            span,
            replies: Replies::default(),
            verifier: None,
            prompt_gate: prompt_hooks::PromptGate::default(),
            spec,
        };
        Box::pin(state.open(&myself)).await?;
        state.emit(Event::SessionStarted {
            version: cadre_runtime::protocol::STREAM_VERSION,
            session_id: state.spec.session_id.clone(),
            mode: state.mode(),
            posture: state.core.chosen_posture(),
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
        // A resumed session carries on with what it had admitted, then its
        // goal, then the agent's first message.
        let (pending, first) = state.start.take().unwrap_or_default();
        Box::pin(state.run(&myself, AgentInput::Running { pending, first })).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: the actor loop holds its handler's future for the
        // actor's whole life; boxed, it lives only while a message is
        // handled.
        Box::pin(handle_message(myself, message, state)).await
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: the actor loop holds its handler's future for the
        // actor's whole life; boxed, it lives only while a message is
        // handled.
        Box::pin(handle_supervision(myself, event, state)).await
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

/// [`Actor::handle_supervisor_evt`]'s work, boxed by it.
async fn handle_supervision(
    myself: ActorRef<SessionMsg>,
    event: SupervisionEvent,
    state: &mut SessionState,
) -> Result<(), ActorProcessingErr> {
    // Only a failure needs handling: a turn that ends normally reports
    // its end first and is then stopped by the session.
    if let SupervisionEvent::ActorFailed(cell, error) = event {
        let id = cell.get_id();
        let error = error.to_string();
        let input = if let Some(review_id) = state.authority.guardian_of(id) {
            Some(AgentInput::Reviewed {
                review_id,
                decision: guardian::failed(&format!("the guardian crashed ({error})")),
            })
        } else if let Some(path) = state.children.crashed(id) {
            Some(AgentInput::ChildCrashed { path, error })
        } else if state.turn.as_ref().is_some_and(|turn| turn.get_id() == id) {
            state.core.queue().running().map(|running| {
                tracing::error!(parent: &state.span, turn_id = running.turn_id, %error, "turn crashed");
                AgentInput::TurnEnded {
                    turn_id: running.turn_id,
                    ending: Some(Event::TurnFailed {
                        turn_id: running.turn_id,
                        category: FailureCategory::Agent,
                        message: format!("the turn crashed: {error}"),
                        retryable: false,
                        usage: Usage::default(),
                        iterations: 0,
                    }),
                }
            })
        } else {
            None
        };
        if let Some(input) = input {
            state.run(&myself, input).await;
        }
    }
    Ok(())
}

/// [`Actor::handle`]'s work, boxed by it: the core decides; `run`
/// performs, waiting only on the store.
async fn handle_message(
    myself: ActorRef<SessionMsg>,
    message: SessionMsg,
    state: &mut SessionState,
) -> Result<(), ActorProcessingErr> {
    let input = match message {
        SessionMsg::Op(op) => state.op_input(&myself, op, None),
        SessionMsg::Submit(submission) => {
            let previous = state.events.set_cause(submission.id.clone());
            if let Some(input) = state.op_input(&myself, submission.op, submission.id) {
                state.run(&myself, input).await;
            }
            state.events.set_cause(previous);
            return Ok(());
        }
        SessionMsg::Snapshot(reply) => {
            let _ = reply.send(state.snapshot());
            None
        }
        SessionMsg::Turn(TurnReport::Record { turn_id, message }) => {
            Some(AgentInput::Recorded { turn_id, message })
        }
        SessionMsg::Turn(TurnReport::Finished {
            turn_id,
            outcome,
            ending,
        }) => {
            tracing::info!(parent: &state.span, turn_id, ?outcome, "turn finished");
            Some(AgentInput::TurnEnded {
                turn_id,
                ending: ending.map(|e| *e),
            })
        }
        SessionMsg::Plan { request, reply } => Some(AgentInput::PlanTool {
            ticket: state.replies.tool(reply),
            request,
            nonce: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
        }),
        SessionMsg::GoalTool { request, reply } => Some(AgentInput::GoalTool {
            ticket: state.replies.tool(reply),
            request,
        }),
        SessionMsg::GoalVerdict {
            turn_id,
            outcome,
            usage,
        } => {
            if state.core.goal().verifying() == Some(turn_id) {
                state.verifier = None;
            }
            Some(AgentInput::Verdict {
                turn_id,
                outcome,
                usage,
            })
        }
        SessionMsg::Authorize {
            turn_id,
            request,
            evaluation,
            reply,
        } => Some(state.authorize_input(turn_id, *request, evaluation.map(|e| *e), reply)),
        SessionMsg::Guardian(verdict) => {
            state.authority.guardians.remove(&verdict.review_id);
            Some(AgentInput::Reviewed {
                review_id: verdict.review_id,
                decision: verdict.decision,
            })
        }
        SessionMsg::Agent { request, reply } => state.agent_request(&myself, request, reply).await,
        SessionMsg::AgentRunDone { agent, report } => Some(AgentInput::ChildDone {
            path: agent,
            report,
        }),
        SessionMsg::Placed(placing) => state.placed(&myself, *placing).await,
        SessionMsg::Workflow { plan, reply } => {
            state.delegate(plan, reply);
            None
        }
        SessionMsg::PromptHooks(answer) => state.prompt_hooks_answered(*answer),
    };
    if let Some(input) = input {
        state.run(&myself, input).await;
    }
    Ok(())
}

impl SessionState {
    /// Steps the core with `input` and performs what it decides, handing
    /// back the answers of what it performed (a store trip, a frozen plan,
    /// a turn that could not start) until nothing is left.
    async fn run(&mut self, myself: &ActorRef<SessionMsg>, input: AgentInput) {
        let mut inputs = std::collections::VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let effects = self.core.step(input, Instant::now());
            for effect in effects {
                if let Some(answer) = self.perform(myself, effect).await {
                    // A store answer goes before anything else.
                    match answer {
                        AgentInput::Store(_) => inputs.push_front(answer),
                        other => inputs.push_back(other),
                    }
                }
            }
        }
    }

    /// What an op becomes for the core; a workflow step's prompt answer
    /// goes to the engine running it instead, and a person's message or new
    /// goal waits for its prompt hooks (`prompt_hooks.rs`).
    fn op_input(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        op: Op,
        cause: Option<String>,
    ) -> Option<AgentInput> {
        let engine = self.services.subagents.as_ref().and_then(|s| s.workflows());
        match (op, engine) {
            (
                Op::Approve {
                    id,
                    decision,
                    reason,
                },
                Some(engine),
            ) if id.starts_with("step:") => {
                // The engine routes it to this tree's run that has the
                // step, or refuses it; a stopped engine has no runs.
                let refused = format!("no approval prompt has the id '{id}'");
                let sent = engine.cast(crate::delegation::DelegationMsg::Approve {
                    session: self.spec.session_id.clone(),
                    id,
                    decision,
                    reason,
                    events: self.events.clone(),
                });
                if sent.is_err() {
                    self.reject("approve", refused);
                }
                None
            }
            (op, _) => self.prompted(myself, op, cause),
        }
    }

    /// The mode in force: this agent's, narrowed by its ancestors'.
    fn mode(&self) -> Mode {
        self.live.mode()
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
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
            activity: self.core.activity(),
            mode: self.mode(),
            queue_length: self.core.queue().len(),
            turns: self.core.queue().turns(),
            conversation: self.core.conversation().view().to_vec(),
            stored: self.core.conversation().stored(),
        }
    }

    /// The model this agent's turns ask.
    fn model_name(&self) -> &str {
        self.spec
            .model
            .as_deref()
            .unwrap_or_else(|| self.services.model.model())
    }

    /// Puts the workspace back as a snapshot recorded it, after recording
    /// it as it is now. The handler waits for the restore (on the blocking
    /// pool): no turn may start while files are being put back. The
    /// conversation is kept, and a note added after it tells the model; the
    /// event, stored in the transcript, records it too.
    async fn restore(&mut self, snapshot: String, dry_run: bool) -> Option<AgentInput> {
        let Some(snapshots) = self.spec.snapshots.clone() else {
            self.reject("restore", "this session records no snapshots");
            return None;
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
                // The model learns of it at its next turn.
                let note = report.note().filter(|_| !dry_run).map(AgentInput::Note);
                self.emit(report.into_event(dry_run));
                note
            }
            Ok(Err(err)) => {
                self.reject("restore", err.to_string());
                None
            }
            Err(err) => {
                self.reject("restore", format!("the restore failed: {err}"));
                None
            }
        }
    }
}

/// A snapshot id as people read it: its first twelve characters.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}
