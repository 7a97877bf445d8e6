//! The verifier (G5): a separate, read-only judge of a completion claim.
//!
//! In `subagent` mode it is an agent started through the kernel like any
//! other, with an authority narrowed from the session's (never widened) to
//! Plan mode: read-only tools and read-only bash only, no `agent` or
//! `workflow` tool (it gets no sub-agents), no goal tools (only a session
//! has a goal host), no prompts to a person (a call that would need one is
//! denied). It gets the objective, the claim and a digest of the worker's
//! calls, and must end its answer with a verdict line. In `command` mode a
//! check command runs under a read-only sandbox with a timeout: exit 0
//! passes, anything else fails with the output's tail as the gap. Either
//! way the answer comes back to the session as [`SessionMsg::GoalVerdict`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::config::RoleConfig;
use cadre_runtime::goal::{
    GoalSettings, VERIFIER_PROMPT, Verdict, VerifierOutcome, VerifyMode, parse_verdict,
    verifier_request,
};
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Envelope, Event, Op};
use cadre_runtime::sandbox::{CheckRun, SandboxConfig};
use cadre_runtime::tool::{RUN_CHECK, RunCheck, ToolRegistry, ToolRunner};
use ractor::ActorRef;
use tokio::sync::oneshot;

use super::{SessionMsg, SessionState};
use crate::kernel::{AgentServices, AgentSpec, SpawnedAgent, spawn_agent};

/// The role name the verifier runs under (and a `[roles.verifier]` in
/// config may give its model and prompt).
pub(crate) const VERIFIER_ROLE: &str = "verifier";

/// A claim to verify, as the goal machine hands it over.
pub(super) struct Claim {
    /// The claiming turn, which holds the queue until the verdict.
    pub(super) turn_id: u64,
    /// What the claim is judged against.
    pub(super) objective: String,
    /// The worker's claim.
    pub(super) claim: String,
    /// How to verify.
    pub(super) settings: GoalSettings,
    /// Where the claiming turn's messages begin, for the evidence.
    pub(super) seq: usize,
}

impl SessionState {
    /// Starts verifying `claim`; the answer comes back as
    /// [`SessionMsg::GoalVerdict`].
    pub(super) async fn verify(&mut self, myself: &ActorRef<SessionMsg>, claim: Claim) {
        let (stop, stopped) = oneshot::channel();
        self.goal.stop = Some(stop);
        let Claim {
            turn_id,
            objective,
            claim,
            settings,
            seq,
        } = claim;
        let session = myself.clone();
        let answer = move |outcome: VerifierOutcome, tokens: u64| {
            let _ = session.cast(SessionMsg::GoalVerdict {
                turn_id,
                outcome,
                tokens,
            });
        };
        match settings.verify {
            VerifyMode::Command => {
                let command = settings.verify_command.unwrap_or_default();
                let workspace = self.spec.workspace.root().to_path_buf();
                let tmp = self.spec.paths.dir.join("tmp");
                let sandbox = self.spec.sandbox.clone();
                let timeout = Duration::from_secs(settings.verify_timeout_secs.max(1));
                tokio::spawn(async move {
                    let outcome = tokio::select! {
                        verdict = check(&command, &workspace, &tmp, &sandbox, timeout) => {
                            VerifierOutcome::Verdict(verdict)
                        }
                        _ = stopped => VerifierOutcome::Cancelled,
                    };
                    answer(outcome, 0);
                });
            }
            VerifyMode::Subagent | VerifyMode::None => {
                let request = verifier_request(
                    &objective,
                    &claim,
                    self.conversation
                        .get(seq.saturating_sub(40)..)
                        .unwrap_or_default(),
                );
                match self.start_verifier(myself).await {
                    Ok(SpawnedAgent { actor, events, .. }) => {
                        let _ = actor.cast(SessionMsg::Op(Op::user(request)));
                        tokio::spawn(async move {
                            let (outcome, tokens) = tokio::select! {
                                answered = read_verdict(events) => answered,
                                _ = stopped => (VerifierOutcome::Cancelled, 0),
                            };
                            let _ = actor.cast(SessionMsg::Op(Op::Shutdown));
                            answer(outcome, tokens);
                        });
                    }
                    Err(why) => answer(VerifierOutcome::Verdict(Verdict::Unavailable(why)), 0),
                }
            }
        }
    }

    /// Spawns the verifier agent through the kernel, under this session.
    async fn start_verifier(
        &mut self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<SpawnedAgent, String> {
        let configured = self
            .spec
            .subagents
            .as_ref()
            .and_then(|s| s.roles.get(VERIFIER_ROLE).cloned());
        // Whatever the config says, the verifier reads only: Plan mode, no
        // posture but `never` (only calls proven read-only run), no file it
        // may write.
        let role = RoleConfig {
            mode: Some(Mode::Plan),
            posture: Some(Posture::Never),
            file_scope: None,
            ..configured.clone().unwrap_or_default()
        };
        let mut parent = self.current_authority();
        // The verifier spawns nothing itself, so a session at its depth
        // limit can still verify.
        parent.max_depth = parent.max_depth.max(parent.depth + 1);
        let authority = parent
            .narrow(VERIFIER_ROLE, &role)
            .map_err(|e| format!("the verifier's authority: {e}"))?;
        let model = match (&self.spec.subagents, configured.is_some()) {
            (Some(env), true) => env
                .models
                .client(&role)
                .map_err(|e| format!("the verifier's model: {e}"))?,
            _ => self.services.model.clone(),
        };
        let path = self.children.table.next_path();
        let prompt = match &role.system_prompt {
            Some(extra) => format!("{VERIFIER_PROMPT}\n\n{extra}"),
            None => VERIFIER_PROMPT.to_string(),
        };
        let spec = AgentSpec {
            session_id: self.spec.session_id.clone(),
            path: path.clone(),
            role: VERIFIER_ROLE.into(),
            authority,
            parent: Some(self.live.clone()),
            model: role
                .base_url
                .is_none()
                .then(|| role.model.clone().or_else(|| self.spec.model.clone()))
                .flatten(),
            prompt: Some(prompt),
            first_message: None,
            max_iterations: self.spec.max_iterations,
            workspace: self.spec.workspace.clone(),
            paths: SessionPaths {
                dir: self.spec.paths.dir.join("agents").join(path.to_string()),
            },
            // No person answers a verifier: what would ask is denied.
            interactive: false,
            guardian: self.spec.guardian.clone(),
            subagents: None,
            plan_agent_entry: false,
            mode_given: true,
            posture_given: true,
            sandbox: self.spec.sandbox.clone(),
            protected: self.spec.protected.clone(),
            snapshots: None,
        };
        let services = AgentServices {
            model,
            tools: with_run_check(&self.services.tools)?,
            store: Some(self.store.clone()),
        };
        spawn_agent(spec, services, Some(myself.get_cell()))
            .await
            .map_err(|e| format!("the verifier could not start: {e}"))
    }
}

/// How long one of the verifier's `run_check` calls may take: a project's
/// build and tests, not a quick read.
const RUN_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// The session's tools and `run_check`, so the verifier can run the
/// project's build and tests and still change nothing (G5).
fn with_run_check(tools: &ToolRunner) -> Result<ToolRunner, String> {
    let mut registry = ToolRegistry::new();
    for tool in tools.registry().tools() {
        registry
            .register(tool.clone())
            .map_err(|e| format!("the verifier's tools: {e}"))?;
    }
    if registry.get(RUN_CHECK).is_none() {
        registry
            .register(Arc::new(RunCheck::new(RUN_CHECK_TIMEOUT)))
            .map_err(|e| format!("the verifier's tools: {e}"))?;
    }
    Ok(ToolRunner::new(Arc::new(registry), tools.default_timeout()))
}

/// Reads the verifier's events until its turn ends: the verdict from its
/// final answer, and the tokens it spent.
async fn read_verdict(mut events: crate::events::Events) -> (VerifierOutcome, u64) {
    let mut answer = String::new();
    while let Some(Envelope { event, .. }) = events.recv().await {
        match event {
            Event::AssistantMessage { text, .. } => answer = text,
            Event::TurnCompleted { usage, .. } => {
                let tokens = usage.prompt_tokens + usage.completion_tokens;
                return (VerifierOutcome::Verdict(parse_verdict(&answer)), tokens);
            }
            Event::TurnFailed { message, usage, .. } => {
                let tokens = usage.prompt_tokens + usage.completion_tokens;
                return (
                    VerifierOutcome::Verdict(Verdict::Unavailable(message)),
                    tokens,
                );
            }
            _ => {}
        }
    }
    (
        VerifierOutcome::Verdict(Verdict::Unavailable(
            "the verifier stopped before it answered".into(),
        )),
        0,
    )
}

/// Runs the check command in the workspace under a read-only sandbox (it
/// writes only its temp dir), with a timeout. Exit 0 passes; otherwise the
/// gap is the command and its output's tail.
async fn check(
    command: &str,
    workspace: &Path,
    tmp: &Path,
    sandbox: &Arc<SandboxConfig>,
    timeout: Duration,
) -> Verdict {
    if command.trim().is_empty() {
        return Verdict::Unavailable(
            "verification is `command` but no check command is set".into(),
        );
    }
    if let Err(err) = std::fs::create_dir_all(tmp) {
        return Verdict::Unavailable(format!("the check's temp dir: {err}"));
    }
    match cadre_runtime::sandbox::run_check(command, &[], workspace, tmp, sandbox, timeout).await {
        CheckRun::Passed(_) => Verdict::Pass,
        CheckRun::Failed(gap) | CheckRun::TimedOut(gap) => Verdict::Fail(vec![gap]),
        CheckRun::Unrunnable(why) => Verdict::Unavailable(why),
    }
}
