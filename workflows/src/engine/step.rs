//! The step actor (W5): one per attempt of one step instance, supervised by
//! the run's supervisor.
//!
//! It starts the step's agent through the kernel, linked to itself, sends
//! it the rendered prompt and reads its events: the answer, the tool calls
//! behind it (the evidence), the tokens, and the prompts and decisions the
//! caller must see, with their ids made the step's. It keeps the watchdogs
//! (a wall-clock timeout and an idle timeout with no model or tool
//! progress), runs the check when asked (a command, or a verifier agent:
//! `verify`), and reports one outcome per
//! phase to the supervisor. A crash of the agent fails this attempt only;
//! a crash of this actor is the supervisor's supervision event, which
//! fails the instance only.

use std::path::PathBuf;
use std::time::Duration;

use cadre_actors::kernel::{AgentServices, AgentSpec, SpawnedAgent, spawn_agent};
use cadre_actors::session::SessionMsg;
use cadre_runtime::agent::AgentPath;
use cadre_runtime::protocol::{Envelope, Event, FailureCategory, Op, ToolStatus};
use cadre_runtime::sandbox::SandboxConfig;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::time::Instant;

use super::check::{DEFAULT_CHECK_TIMEOUT, run_check};
use super::ids::{outer_agent_id, outer_approval_id};
use super::supervisor::{StepReport, SupervisorMsg};
use super::verify::{VERIFIER_ROLE, outcome, read_verdict, verifier, verifier_request};
use super::worktree::{MergeError, Worktree};
use crate::model::Check;
use crate::scheduler::InstanceId;
use cadre_runtime::goal::Verdict;

/// What a step attempt starts with.
pub struct StepArgs {
    /// The instance.
    pub id: InstanceId,
    /// `step:<name>[<i>]`, the prefix of the ids the caller sees.
    pub prefix: String,
    /// The run's supervisor.
    pub supervisor: ActorRef<SupervisorMsg>,
    /// The agent to start.
    pub spec: AgentSpec,
    /// The caller's roles and models, unmetered (the verifier's model
    /// comes from here; its tokens are counted from its turn).
    pub subagents: Option<std::sync::Arc<cadre_actors::session::Subagents>>,
    /// Its services.
    pub services: AgentServices,
    /// The rendered prompt.
    pub prompt: String,
    /// Run in a git worktree of this name (`isolation = "worktree"`).
    pub worktree: Option<String>,
    /// Wall-clock limit of the attempt.
    pub timeout: Option<Duration>,
    /// Limit on a stretch with no progress.
    pub idle_timeout: Option<Duration>,
    /// For the check: the sandbox, and the temp dir.
    pub sandbox: std::sync::Arc<SandboxConfig>,
    /// The check's private temp dir.
    pub tmp: PathBuf,
}

/// Messages to a step actor.
#[derive(Debug)]
pub enum StepMsg {
    /// An event of the step's agent.
    Agent(Box<Envelope>),
    /// The agent's event stream ended.
    AgentGone,
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
    },
    /// The check ended.
    Checked(bool, String),
    /// The verifier answered (and spent these tokens).
    Verdict(Verdict, u64),
    /// Bring the worktree's changes back.
    Merge,
    /// The merge ended.
    Merged(Result<Vec<String>, String>),
    /// Stop: cancel the agent's turn and end.
    Stop,
    /// Answer one of the agent's approval prompts (its own id).
    Approve(Op),
}

impl ractor::Message for StepMsg {}

/// The step actor.
pub struct StepActor;

/// Its state.
pub struct StepState {
    myself: ActorRef<StepMsg>,
    args: StepArgs,
    agent: ActorRef<SessionMsg>,
    path: AgentPath,
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
    tokens: u64,
    last_progress: Instant,
    /// Whether the attempt's outcome was reported (later events are
    /// forwarded but change nothing).
    reported: bool,
}

impl Actor for StepActor {
    type Msg = StepMsg;
    type State = StepState;
    type Arguments = StepArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        mut args: StepArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let path = args.spec.path.clone();
        let worktree = match args.worktree.clone() {
            Some(name) => {
                let workspace = args.spec.workspace.root().to_path_buf();
                let made = tokio::task::spawn_blocking(move || Worktree::create(&workspace, &name))
                    .await
                    .map_err(|e| format!("the step's worktree: {e}"))??;
                args.spec.workspace = args
                    .spec
                    .workspace
                    .moved_to(&made.workspace)
                    .map_err(|e| format!("the step's worktree: {e}"))?;
                Some(made)
            }
            None => None,
        };
        let SpawnedAgent {
            actor, mut events, ..
        } = spawn_agent(
            args.spec.clone(),
            args.services.clone(),
            Some(myself.get_cell()),
        )
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
        actor
            .cast(SessionMsg::Op(Op::user(args.prompt.clone())))
            .map_err(|e| format!("the step's agent stopped at once: {e}"))?;
        if let Some(timeout) = args.timeout {
            myself.send_after(timeout, || StepMsg::Timeout);
        }
        if let Some(idle) = args.idle_timeout {
            myself.send_interval((idle / 4).max(Duration::from_millis(10)), || StepMsg::Watch);
        }
        Ok(StepState {
            myself: myself.clone(),
            args,
            agent: actor,
            path,
            answer: String::new(),
            claim: String::new(),
            verifier: None,
            worktree,
            calls: Vec::new(),
            tokens: 0,
            last_progress: Instant::now(),
            reported: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StepMsg::Agent(envelope) => state.agent_event(envelope.event),
            StepMsg::AgentGone => {
                state.report_failure("the step's agent stopped before it answered".into());
            }
            StepMsg::Timeout => {
                if !state.reported {
                    let limit = state.args.timeout.unwrap_or_default();
                    state.stop_agent();
                    state.report_failure(format!(
                        "timed out after {}; its partial transcript is kept under agent {}",
                        human(limit),
                        state.args.spec.row_id()
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
                        "no model or tool progress for {}; its partial transcript is kept under agent {}",
                        human(idle),
                        state.args.spec.row_id()
                    ));
                }
            }
            StepMsg::Check {
                check: Check::Verifier,
                verifier,
            } => state.verify(&myself, verifier).await,
            StepMsg::Verdict(verdict, tokens) => {
                state.verifier = None;
                state.supervisor(StepReport::Tokens(tokens));
                let (passed, detail) = outcome(&verdict);
                let _ = myself.cast(StepMsg::Checked(passed, detail));
            }
            StepMsg::Merge => {
                let me = myself.clone();
                let Some(worktree) = state.worktree.clone() else {
                    let _ = me.cast(StepMsg::Merged(Err("the step has no worktree".into())));
                    return Ok(());
                };
                tokio::task::spawn_blocking(move || {
                    let _ = me.cast(StepMsg::Merged(merge_back(&worktree)));
                });
            }
            StepMsg::Merged(result) => {
                state.supervisor(StepReport::Merged(result));
                myself.stop(None);
            }
            StepMsg::Check {
                check: Check::Command(command),
                ..
            } => {
                let workspace = state.args.spec.workspace.root().to_path_buf();
                let sandbox = state.args.sandbox.clone();
                let tmp = state.args.tmp.clone();
                let timeout = state.args.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT);
                let me = myself.clone();
                tokio::spawn(async move {
                    let (passed, detail) =
                        run_check(&command, &workspace, &tmp, &sandbox, timeout).await;
                    let _ = me.cast(StepMsg::Checked(passed, detail));
                });
            }
            StepMsg::Checked(passed, detail) => {
                let _ = state.args.supervisor.cast(SupervisorMsg::Step(
                    state.args.id,
                    StepReport::Checked { passed, detail },
                ));
                myself.stop(None);
            }
            StepMsg::Stop => {
                state.reported = true;
                state.stop_agent();
                myself.stop(None);
            }
            StepMsg::Approve(op) => {
                let _ = state.agent.cast(SessionMsg::Op(op));
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
        // The agents end when told to; only a crash matters.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            let verifier = state.verifier.as_ref().map(|v| v.get_id());
            if verifier == Some(cell.get_id()) {
                state.verifier = None;
                let (passed, detail) =
                    outcome(&Verdict::Unavailable(format!("it crashed: {error}")));
                let _ = myself.cast(StepMsg::Checked(passed, detail));
                return Ok(());
            }
            state.report_failure(format!("the step's agent crashed: {error}"));
            myself.stop(None);
        }
        Ok(())
    }
}

impl StepState {
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
        for agent in std::iter::once(&self.agent).chain(&self.verifier) {
            let _ = agent.cast(SessionMsg::Op(Op::Cancel));
            let _ = agent.cast(SessionMsg::Op(Op::Shutdown));
        }
    }

    /// Starts the verifier on the accepted answer; its verdict comes back
    /// as [`StepMsg::Verdict`], within the step's timeout (else the
    /// default check timeout).
    async fn verify(&mut self, myself: &ActorRef<StepMsg>, path: Option<AgentPath>) {
        let fail = |why: String| {
            let (passed, detail) = outcome(&Verdict::Unavailable(why));
            let _ = myself.cast(StepMsg::Checked(passed, detail));
        };
        let Some(path) = path else {
            return fail("no place in the run's tree was given to it".into());
        };
        let (spec, services) = match verifier(
            &self.args.spec,
            self.args.subagents.as_deref(),
            &self.args.services,
            path,
        ) {
            Ok(started) => started,
            Err(why) => return fail(why),
        };
        let shown = Event::AgentSpawned {
            agent_id: format!("{}:{VERIFIER_ROLE}", self.args.prefix),
            role: VERIFIER_ROLE.into(),
            model: spec
                .model
                .clone()
                .unwrap_or_else(|| services.model.model().to_string()),
            posture: spec.authority.posture,
            depth: spec.path.depth() as u32,
        };
        let SpawnedAgent { actor, events, .. } =
            match spawn_agent(spec, services, Some(myself.get_cell())).await {
                Ok(spawned) => spawned,
                Err(e) => return fail(format!("it could not start: {e}")),
            };
        let calls: Vec<String> = self.calls.iter().map(|(_, c)| c.clone()).collect();
        let request = verifier_request(&self.args.prompt, &self.claim, &calls);
        if actor.cast(SessionMsg::Op(Op::user(request))).is_err() {
            return fail("it stopped at once".into());
        }
        self.supervisor(StepReport::Event(Box::new(shown)));
        self.verifier = Some(actor.clone());
        let limit = self.args.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT);
        let me = myself.clone();
        tokio::spawn(async move {
            let (verdict, tokens) = tokio::time::timeout(limit, read_verdict(events))
                .await
                .unwrap_or_else(|_| {
                    (
                        Verdict::Unavailable(format!("it did not answer within {}", human(limit))),
                        0,
                    )
                });
            let _ = actor.cast(SessionMsg::Op(Op::Cancel));
            let _ = actor.cast(SessionMsg::Op(Op::Shutdown));
            let _ = me.cast(StepMsg::Verdict(verdict, tokens));
        });
    }

    fn agent_event(&mut self, event: Event) {
        self.last_progress = Instant::now();
        match &event {
            Event::AssistantMessage { text, .. } => self.answer.clone_from(text),
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                let subject = self.subject(name, arguments);
                self.calls
                    .push((call_id.clone(), format!("{name}{subject}")));
            }
            Event::ToolResult {
                call_id,
                status,
                error_code,
                ..
            } => {
                if let Some((_, call)) = self.calls.iter_mut().find(|(id, _)| id == call_id) {
                    match (status, error_code) {
                        (ToolStatus::Ok, _) => call.push_str(" → ok"),
                        (ToolStatus::Error, code) => {
                            call.push_str(&format!(" → {}", code.map_or("error", |c| c.as_str())))
                        }
                    }
                }
            }
            Event::TurnCompleted { usage, .. } => {
                self.tokens += usage.prompt_tokens + usage.completion_tokens;
                self.supervisor(StepReport::Tokens(
                    usage.prompt_tokens + usage.completion_tokens,
                ));
                if !std::mem::replace(&mut self.reported, true) {
                    let output = std::mem::take(&mut self.answer);
                    self.claim.clone_from(&output);
                    let calls = self.calls.iter().map(|(_, c)| c.clone()).collect();
                    self.supervisor(StepReport::Answered { output, calls });
                }
                let _ = self.agent.cast(SessionMsg::Op(Op::Shutdown));
            }
            Event::TurnFailed {
                message,
                usage,
                category,
                retryable,
                ..
            } => {
                self.supervisor(StepReport::Tokens(
                    usage.prompt_tokens + usage.completion_tokens,
                ));
                let infrastructure = *category == FailureCategory::Infrastructure;
                if infrastructure && !retryable && terminal(message) {
                    self.supervisor(StepReport::Halt(format!(
                        "the model endpoint refused {}: {message}",
                        self.args.prefix
                    )));
                }
                if infrastructure && *retryable {
                    self.report_once(StepReport::Requeue {
                        reason: message.clone(),
                    });
                } else {
                    self.report_failure(message.clone());
                }
                let _ = self.agent.cast(SessionMsg::Op(Op::Shutdown));
            }
            _ => {}
        }
        if let Some(shown) = self.outward(event) {
            self.supervisor(StepReport::Event(Box::new(shown)));
        }
    }

    /// What a call works on, from its tool's marks: a shell command, or
    /// the path argument.
    fn subject(&self, name: &str, arguments: &serde_json::Value) -> String {
        let registry = self.args.services.tools.registry();
        let Some(def) = registry.definitions().find(|d| d.name == name) else {
            return String::new();
        };
        let shown = if def.shell {
            arguments
                .get("command")
                .and_then(|c| c.as_str())
                .map(|c| format!(" `{c}`"))
        } else {
            def.path_in(arguments).map(|p| format!(" {p}"))
        };
        shown.unwrap_or_default()
    }

    /// The events the caller must see, with the step's ids: prompts,
    /// decisions, sub-agents.
    fn outward(&self, event: Event) -> Option<Event> {
        let prefix = &self.args.prefix;
        let agent = |inner: &str| outer_agent_id(prefix, &self.path, inner);
        let approval = |inner: &str| outer_approval_id(prefix, &self.path, inner);
        Some(match event {
            Event::ApprovalRequested {
                id,
                agent_id,
                call_id,
                tool,
                arguments,
                reason,
            } => Event::ApprovalRequested {
                id: approval(&id),
                agent_id: agent(&agent_id),
                call_id,
                tool,
                arguments,
                reason,
            },
            Event::ApprovalResolved { id, outcome } => Event::ApprovalResolved {
                id: approval(&id),
                outcome,
            },
            Event::PermissionDecision {
                agent_id,
                call_id,
                tool,
                decision,
                line,
            } => Event::PermissionDecision {
                agent_id: agent(&agent_id),
                call_id,
                tool,
                decision,
                line,
            },
            Event::AgentSpawned {
                agent_id,
                role,
                model,
                posture,
                depth,
            } => Event::AgentSpawned {
                agent_id: agent(&agent_id),
                role,
                model,
                posture,
                depth,
            },
            Event::AgentCompleted {
                agent_id,
                status,
                summary,
                verified,
            } => Event::AgentCompleted {
                agent_id: agent(&agent_id),
                status,
                summary,
                verified,
            },
            Event::AutonomyPaused { reason, fallback } => Event::AutonomyPaused {
                reason: format!("{prefix}: {reason}"),
                fallback,
            },
            _ => return None,
        })
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
fn merge_back(worktree: &Worktree) -> Result<Vec<String>, String> {
    match worktree.merge() {
        Ok(files) => {
            if let Err(why) = worktree.remove() {
                tracing::warn!(%why, worktree = %worktree.path.display(), "a merged worktree could not be removed");
            }
            Ok(files)
        }
        Err(MergeError::Conflict(files)) => Err(format!(
            "merge conflict: {} changed in the workspace too; nothing was brought back, and the \
             step's worktree is kept at {} (branch {})",
            files.join(", "),
            worktree.path.display(),
            worktree.branch()
        )),
        Err(MergeError::Failed(why)) => Err(format!(
            "the merge failed: {why}; the step's worktree is kept at {}",
            worktree.path.display()
        )),
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
