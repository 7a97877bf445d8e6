//! The step actor (W5): one per attempt of one step instance, supervised by
//! the run's supervisor.
//!
//! It starts the step's agent through the kernel, linked to itself, sends
//! it the rendered prompt and reads its events: the answer, the tool calls
//! behind it (the evidence), the tokens, and the prompts and decisions the
//! caller must see, with their ids made the step's. It keeps the watchdogs
//! (a wall-clock timeout and an idle timeout with no model or tool
//! progress), runs the check when asked (a command, or a verifier agent:
//! `verify`), and reports one outcome per phase to the supervisor. After its
//! answer it waits for what the supervisor sends next (a check, a merge, or
//! a stop): the supervisor stops it whenever the run's machine ends the
//! attempt ([`crate::scheduler::Effect::ends_attempt`]). A crash of the agent fails this attempt only;
//! a crash of this actor is the supervisor's supervision event, which
//! fails the instance only.
//!
//! `observe`: what it reads of its agent's events, its verifier, and what
//! it passes outward.

mod observe;

use std::path::PathBuf;
use std::time::Duration;

use cadre_actors::kernel::{AgentServices, AgentSpec, SpawnedAgent, spawn_agent};
use cadre_actors::session::SessionMsg;
use cadre_runtime::agent::{AgentPath, LiveAuthority};
use cadre_runtime::protocol::{Envelope, Event, FailureCategory, Nested, Op, ToolStatus, Usage};
use cadre_runtime::sandbox::SandboxConfig;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::time::Instant;

use super::ids::{outer_agent_id, outer_approval_id};
use super::supervisor::{StepReport, SupervisorMsg};
use super::verify::{outcome, verifier, verifier_request};
use super::worktree::{MergeError, MergeRules, Worktree};
use crate::cluster::link::{Remote, StartFailure};
use crate::cluster::wire::{AgentEnd, Order};
use crate::cluster::{Cluster, HEARTBEAT_TIMEOUT, RemoteAgent};
use crate::model::Check;
use crate::scheduler::{InstanceId, MergeFailure};
use cadre_actors::verifier::{VERIFIER_ROLE, read_verdict};
use cadre_runtime::goal::Verdict;
use cadre_runtime::sandbox::{DEFAULT_CHECK_TIMEOUT, run_check};

/// Where an attempt's agent runs.
pub enum Placement {
    /// Here, through the kernel.
    Local,
    /// On a node: the order it is sent.
    Remote {
        /// The coordinator's cluster.
        cluster: Cluster,
        /// The node.
        node: String,
        /// What the node is asked to run.
        order: Box<Order>,
    },
}

/// What a step attempt starts with.
pub struct StepArgs {
    /// The instance it is an attempt of, which its reports name.
    pub id: InstanceId,
    /// `step:<name>[<i>]`, the prefix of the ids the caller sees.
    pub prefix: String,
    /// The run's supervisor, which the attempt reports to.
    pub supervisor: ActorRef<SupervisorMsg>,
    /// The agent to start.
    pub spec: AgentSpec,
    /// The caller's roles and models, unmetered (the verifier's model
    /// comes from here; its tokens are counted from its turn).
    pub subagents: Option<std::sync::Arc<cadre_actors::session::Subagents>>,
    /// What the agent works with (model, tools, store); a verifier takes
    /// them too unless its role names a model.
    pub services: AgentServices,
    /// The rendered prompt.
    pub prompt: String,
    /// Run in a git worktree of this name (`isolation = "worktree"`; a
    /// local attempt only).
    pub worktree: Option<String>,
    /// Wall-clock limit of the attempt.
    pub timeout: Option<Duration>,
    /// Limit on a stretch with no progress.
    pub idle_timeout: Option<Duration>,
    /// The sandbox a check command runs in.
    pub sandbox: std::sync::Arc<SandboxConfig>,
    /// The check's private temp dir.
    pub tmp: PathBuf,
    /// Where the agent runs.
    pub place: Placement,
}

/// Messages to a step actor.
#[derive(Debug)]
pub enum StepMsg {
    /// An event of the step's agent.
    Agent(Box<Envelope>),
    /// The agent's event stream ended.
    AgentGone,
    /// The agent on a node ended before it answered (a crash there), or
    /// its node was lost: the attempt fails with the reason.
    Lost(String),
    /// The wall-clock timeout fired.
    Timeout,
    /// Time to look for progress.
    Watch,
    /// Run the check; a verifier runs as agent `verifier` of the run.
    Check {
        /// The check.
        check: Check,
        /// The verifier's place in the run's tree (a verifier check).
        verifier: Option<AgentPath>,
        /// The variables a command check runs with.
        env: Vec<(String, String)>,
    },
    /// The check ended.
    Checked(bool, String),
    /// The verifier answered (and spent this).
    Verdict(Verdict, Usage),
    /// Bring the worktree's changes back.
    Merge,
    /// The merge ended.
    Merged(Result<Vec<String>, MergeFailure>),
    /// Stop: cancel the agent's turn and end.
    Stop,
    /// Answer one of the agent's approval prompts (its own id).
    Approve(Op),
}

impl ractor::Message for StepMsg {}

/// The step actor.
pub struct StepActor;

/// The attempt's agent, here or on a node.
enum Agent {
    /// Not started yet (the actor starts it once it runs).
    Starting,
    Local(ActorRef<SessionMsg>),
    Remote(RemoteAgent),
}

impl Agent {
    fn op(&self, op: Op) {
        match self {
            Agent::Starting => {}
            Agent::Local(actor) => {
                let _ = actor.cast(SessionMsg::Op(op));
            }
            Agent::Remote(remote) => remote.op(op),
        }
    }
}

/// Starts the agent here, its events coming to `myself`.
async fn start_local(myself: &ActorRef<StepMsg>, args: &StepArgs) -> Result<Agent, String> {
    // The prompt is admitted with the agent's opening, in one store trip.
    let mut spec = args.spec.clone();
    spec.first_message = Some(args.prompt.clone());
    let SpawnedAgent {
        actor, mut events, ..
    } = spawn_agent(spec, args.services.clone(), Some(myself.get_cell()))
        .await
        .map_err(|e| format!("the step's agent could not start: {e}"))?;
    let me = myself.clone();
    tokio::spawn(async move {
        while let Some(envelope) = events.recv().await {
            if me.cast(StepMsg::Agent(Box::new(envelope))).is_err() {
                return;
            }
        }
        let _ = me.cast(StepMsg::AgentGone);
    });
    Ok(Agent::Local(actor))
}

/// Why an attempt never started: its node could not be reached. The
/// attempt goes elsewhere without counting against the step's retries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unplaced(pub String);

/// Starts the agent on `node` (it sends itself the prompt), its news
/// coming to `myself`.
async fn start_remote(
    myself: &ActorRef<StepMsg>,
    cluster: &Cluster,
    node: &str,
    order: Order,
    live: std::sync::Arc<LiveAuthority>,
) -> Result<Agent, ActorProcessingErr> {
    let (remote, mut news) =
        cluster
            .start(node, order, live)
            .await
            .map_err(|e| -> ActorProcessingErr {
                match e {
                    StartFailure::Unreachable(why) => Box::new(Unplaced(why)),
                    StartFailure::Refused(why) => {
                        format!("node {node} did not start the step's agent: {why}").into()
                    }
                }
            })?;
    let me = myself.clone();
    let node = node.to_string();
    tokio::spawn(async move {
        while let Some(item) = news.recv().await {
            let message = match item {
                Remote::Event(envelope) => StepMsg::Agent(envelope),
                Remote::Checked(passed, detail) => StepMsg::Checked(passed, detail),
                Remote::Ended(AgentEnd::Stopped) => StepMsg::AgentGone,
                Remote::Ended(AgentEnd::Failed(why)) => {
                    StepMsg::Lost(format!("on node {node}: {why}"))
                }
                Remote::Lost(reason) => StepMsg::Lost(reason),
            };
            if me.cast(message).is_err() {
                return;
            }
        }
    });
    Ok(Agent::Remote(remote))
}

/// A step attempt's state: its agent, what it answered and the calls
/// behind it, its check or verifier, and whether its outcome was reported.
pub struct StepState {
    myself: ActorRef<StepMsg>,
    args: StepArgs,
    agent: Agent,
    /// The agent's place in the run's tree, from which the ids the caller
    /// sees are made.
    path: AgentPath,
    /// Its check was sent and has not come back.
    checking: bool,
    /// Why its node went away after it answered: a check asked later
    /// fails at once.
    lost: Option<String>,
    /// The agent's last text, its answer once its turn completes.
    answer: String,
    /// The accepted answer, for a verifier to judge.
    claim: String,
    /// The verifier agent, while it runs.
    verifier: Option<ActorRef<SessionMsg>>,
    /// The step's own worktree.
    worktree: Option<Worktree>,
    /// Every tool call of the attempt, `name subject`, with its outcome
    /// once it has one.
    calls: Vec<(String, String)>,
    /// When the agent last did anything, for the idle timeout.
    last_progress: Instant,
    /// Whether the attempt's outcome was reported (later events are
    /// forwarded but change nothing).
    reported: bool,
}

impl Actor for StepActor {
    type Msg = StepMsg;
    type State = StepState;
    type Arguments = StepArgs;

    /// Only the state: the worktree and the agent are started once the
    /// actor runs (`post_start`), so whoever spawns steps never waits for
    /// an agent's store trip or a node, and a thousand steps start at once.
    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: StepArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(StepState {
            myself,
            path: args.spec.path.clone(),
            args,
            agent: Agent::Starting,
            checking: false,
            lost: None,
            answer: String::new(),
            claim: String::new(),
            verifier: None,
            worktree: None,
            calls: Vec::new(),
            last_progress: Instant::now(),
            reported: false,
        })
    }

    /// Starts the step's worktree and agent; an attempt that cannot start
    /// is reported (`StepReport::Unstarted`) and the actor ends.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match Box::pin(state.start(&myself)).await {
            Ok(()) => {
                if let Some(timeout) = state.args.timeout {
                    myself.send_after(timeout, || StepMsg::Timeout);
                }
                if let Some(idle) = state.args.idle_timeout {
                    myself.send_interval((idle / 4).max(Duration::from_millis(10)), || {
                        StepMsg::Watch
                    });
                }
            }
            Err(error) => {
                let unplaced = error.downcast_ref::<Unplaced>().is_some();
                state.report_once(StepReport::Unstarted {
                    reason: error.to_string(),
                    unplaced,
                });
            }
        }
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

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // The node stops the agent and frees its slot.
        if let Agent::Remote(remote) = &state.agent {
            remote.forget();
        }
        Ok(())
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
}

/// [`Actor::handle_supervisor_evt`]'s work, boxed by it.
async fn handle_supervision(
    myself: ActorRef<StepMsg>,
    event: SupervisionEvent,
    state: &mut StepState,
) -> Result<(), ActorProcessingErr> {
    // The agents end when told to; only a crash matters.
    if let SupervisionEvent::ActorFailed(cell, error) = event {
        let verifier = state.verifier.as_ref().map(|v| v.get_id());
        if verifier == Some(cell.get_id()) {
            state.verifier = None;
            let (passed, detail) = outcome(&Verdict::Unavailable(format!("it crashed: {error}")));
            let _ = myself.cast(StepMsg::Checked(passed, detail));
            return Ok(());
        }
        state.report_failure(format!("the step's agent crashed: {error}"));
        myself.stop(None);
    }
    Ok(())
}

/// [`Actor::handle`]'s work, boxed by it.
async fn handle_message(
    myself: ActorRef<StepMsg>,
    message: StepMsg,
    state: &mut StepState,
) -> Result<(), ActorProcessingErr> {
    match message {
        StepMsg::Agent(envelope) => state.agent_event(envelope.event),
        StepMsg::AgentGone => {
            state.report_failure("the step's agent stopped before it answered".into());
        }
        StepMsg::Lost(reason) => {
            if state.checking {
                let _ = myself.cast(StepMsg::Checked(
                    false,
                    format!("the check did not finish: {reason}"),
                ));
            } else if state.reported {
                state.lost = Some(reason);
            } else {
                state.report_failure(reason);
            }
        }
        StepMsg::Timeout => {
            if !state.reported {
                let limit = state.args.timeout.unwrap_or_default();
                state.stop_agent();
                state.report_failure(format!(
                    "timed out after {}; {}",
                    human(limit),
                    state.transcript_note()
                ));
            }
        }
        StepMsg::Watch => {
            if let Some(idle) = state.args.idle_timeout
                && !state.reported
                && state.last_progress.elapsed() >= idle
            {
                state.stop_agent();
                state.report_failure(format!(
                    "no model or tool progress for {}; {}",
                    human(idle),
                    state.transcript_note()
                ));
            }
        }
        StepMsg::Check {
            check: Check::Verifier,
            verifier,
            ..
        } => {
            state.checking = true;
            // Boxed: a large future that only a verifier check needs;
            // inline, every step's message loop would carry its size.
            Box::pin(state.verify(&myself, verifier)).await;
        }
        StepMsg::Verdict(verdict, usage) => {
            state.verifier = None;
            state.supervisor(StepReport::Tokens(usage.total()));
            state.supervisor(StepReport::Spent(usage));
            let (passed, detail) = outcome(&verdict);
            let _ = myself.cast(StepMsg::Checked(passed, detail));
        }
        StepMsg::Merge => {
            let me = myself.clone();
            let Some(worktree) = state.worktree.clone() else {
                let _ = me.cast(StepMsg::Merged(Err(MergeFailure::NoWorktree)));
                return Ok(());
            };
            // Held to what the step's own writes may reach.
            let rules = MergeRules {
                scopes: state.args.spec.authority.file_scopes.clone(),
                protected: (*state.args.spec.protected).clone(),
            };
            tokio::task::spawn_blocking(move || {
                let _ = me.cast(StepMsg::Merged(merge_back(&worktree, &rules)));
            });
        }
        StepMsg::Merged(result) => {
            state.supervisor(StepReport::Merged(result));
            myself.stop(None);
        }
        StepMsg::Check {
            check: Check::Command(command),
            env,
            ..
        } => {
            state.checking = true;
            if let Agent::Remote(remote) = &state.agent {
                let timeout = state.args.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT);
                if let Some(reason) = &state.lost {
                    let why = format!("the check did not run: {reason}");
                    let _ = myself.cast(StepMsg::Checked(false, why));
                    return Ok(());
                }
                remote.check(command, env, timeout);
                // The node's answer is awaited no longer than the check
                // may run there, and a heartbeat timeout more.
                let node = remote.node.clone();
                let wait = timeout + HEARTBEAT_TIMEOUT;
                myself.send_after(wait, move || {
                    StepMsg::Checked(
                        false,
                        format!(
                            "node {node} did not send the check's result within {}",
                            human(wait)
                        ),
                    )
                });
                return Ok(());
            }
            let workspace = state.args.spec.workspace.root().to_path_buf();
            let sandbox = state.args.sandbox.clone();
            let tmp = state.args.tmp.clone();
            let timeout = state.args.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT);
            let me = myself.clone();
            tokio::spawn(async move {
                let ran = run_check(&command, &env, &workspace, &tmp, &sandbox, timeout).await;
                let _ = me.cast(StepMsg::Checked(ran.passed(), ran.detail().to_string()));
            });
        }
        StepMsg::Checked(passed, detail) => {
            if !std::mem::replace(&mut state.checking, false) {
                return Ok(());
            }
            // The actor stays: a passed check of a merging step is
            // followed by its merge; the supervisor stops it otherwise.
            let _ = state.args.supervisor.cast(SupervisorMsg::Step(
                state.args.id,
                StepReport::Checked { passed, detail },
            ));
        }
        StepMsg::Stop => {
            state.reported = true;
            state.stop_agent();
            myself.stop(None);
        }
        StepMsg::Approve(op) => state.agent.op(op),
    }
    Ok(())
}

impl StepState {
    /// Makes the step's worktree (if it has one) and starts its agent.
    async fn start(&mut self, myself: &ActorRef<StepMsg>) -> Result<(), ActorProcessingErr> {
        let args = &mut self.args;
        if let Some(name) = args.worktree.clone() {
            if matches!(args.place, Placement::Remote { .. }) {
                return Err("a worktree step runs on the coordinator, not on a node".into());
            }
            let workspace = args.spec.workspace.root().to_path_buf();
            let made = tokio::task::spawn_blocking(move || Worktree::create(&workspace, &name))
                .await
                .map_err(|e| format!("the step's worktree: {e}"))??;
            args.spec.workspace = args
                .spec
                .workspace
                .moved_to(&made.workspace)
                .map_err(|e| format!("the step's worktree: {e}"))?;
            self.worktree = Some(made);
        }
        self.agent = match std::mem::replace(&mut args.place, Placement::Local) {
            Placement::Local => start_local(myself, args).await?,
            Placement::Remote {
                cluster,
                node,
                order,
            } => {
                let live = args
                    .spec
                    .parent
                    .clone()
                    .ok_or("a step's agent has its caller's live authority")?;
                start_remote(myself, &cluster, &node, *order, live).await?
            }
        };
        Ok(())
    }

    fn supervisor(&self, report: StepReport) {
        let _ = self
            .args
            .supervisor
            .cast(SupervisorMsg::Step(self.args.id, report));
    }

    /// Reports the attempt failed, once, and ends the actor (and its agent).
    fn report_failure(&mut self, reason: String) {
        self.report_once(StepReport::Failed { reason });
    }

    /// Reports how the attempt ended without an answer, once, and ends the
    /// actor (and its agent).
    fn report_once(&mut self, report: StepReport) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        self.supervisor(report);
        self.myself.stop(None);
    }

    fn stop_agent(&self) {
        self.agent.op(Op::Cancel);
        self.agent.op(Op::Shutdown);
        if let Some(verifier) = &self.verifier {
            let _ = verifier.cast(SessionMsg::Op(Op::Cancel));
            let _ = verifier.cast(SessionMsg::Op(Op::Shutdown));
        }
    }
}

/// Whether a model failure (one the client did not retry) is one no retry
/// and no other step fixes: the endpoint refused the credentials (401,
/// 403), wants payment (402), or the quota is gone (a 429 the client does
/// not retry is an exhausted quota). The model client's message carries
/// the status: `HTTP 401: …`.
fn terminal(message: &str) -> bool {
    [
        "HTTP 401",
        "HTTP 402",
        "HTTP 403",
        "HTTP 429",
        "insufficient_quota",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Merges a worktree back, and removes it when everything came back; a
/// conflict keeps it for a person and says where.
fn merge_back(worktree: &Worktree, rules: &MergeRules) -> Result<Vec<String>, MergeFailure> {
    let kept = || worktree.path.clone();
    match worktree.merge(rules) {
        Ok(files) => {
            if let Err(why) = worktree.remove() {
                tracing::warn!(%why, worktree = %worktree.path.display(), "a merged worktree could not be removed");
            }
            Ok(files)
        }
        Err(MergeError::Conflict(files)) => Err(MergeFailure::Conflict {
            files,
            kept: kept(),
            branch: worktree.branch(),
        }),
        Err(MergeError::Refused(files)) => Err(MergeFailure::Refused {
            files,
            kept: kept(),
            branch: worktree.branch(),
        }),
        Err(MergeError::Failed(why)) => Err(MergeFailure::Failed { why, kept: kept() }),
    }
}

fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else if secs > 0 {
        format!("{secs}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The tokens a turn spent; counts a node reports are taken as they come,
/// so they saturate rather than overflow.
fn spent(usage: &Usage) -> u64 {
    usage.prompt_tokens.saturating_add(usage.completion_tokens)
}
