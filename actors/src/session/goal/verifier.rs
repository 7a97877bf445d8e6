//! The goal's verifier (G5): a separate, read-only judge of a completion
//! claim.
//!
//! In `subagent` mode it is the one verifier agent (`crate::verifier`)
//! placed under this session, with no goal tools (only a session has a goal
//! host). It gets the objective, the claim and a digest of the worker's
//! calls, and must end its answer with a verdict line. In `command` mode a
//! check command runs under a read-only sandbox with a timeout: exit 0
//! passes, anything else fails with the output's tail as the gap. Either
//! way the answer comes back to the session as [`SessionMsg::GoalVerdict`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::agent::AgentPath;
use cadre_runtime::goal::{GoalSettings, Verdict, VerifierOutcome, VerifyMode, verifier_request};
use cadre_runtime::protocol::{Op, Usage};
use cadre_runtime::sandbox::{CheckRun, SandboxConfig};
use ractor::ActorRef;
use tokio::sync::oneshot;

use crate::kernel::{AgentServices, SpawnedAgent, spawn_agent};
use crate::session::{SessionMsg, SessionState};
use crate::verifier::{Seat, read_verdict, verifier};

/// A claim to verify, as the goal machine hands it over.
pub(in crate::session) struct Claim {
    /// The claiming turn, which holds the queue until the verdict.
    pub(in crate::session) turn_id: u64,
    /// What the claim is judged against.
    pub(in crate::session) objective: String,
    /// The worker's claim.
    pub(in crate::session) claim: String,
    /// How to verify.
    pub(in crate::session) settings: GoalSettings,
    /// Where the claiming turn's messages begin, for the evidence.
    pub(in crate::session) seq: usize,
}

impl SessionState {
    /// Starts verifying `claim`; the answer comes back as
    /// [`SessionMsg::GoalVerdict`].
    pub(in crate::session) async fn verify(&mut self, myself: &ActorRef<SessionMsg>, claim: Claim) {
        let (stop, stopped) = oneshot::channel();
        self.verifier = Some(stop);
        let Claim {
            turn_id,
            objective,
            claim,
            settings,
            seq,
        } = claim;
        let session = myself.clone();
        let answer = move |outcome: VerifierOutcome, usage: Usage| {
            let _ = session.cast(SessionMsg::GoalVerdict {
                turn_id,
                outcome,
                usage,
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
                    answer(outcome, Usage::default());
                });
            }
            VerifyMode::Subagent | VerifyMode::None => {
                let request = verifier_request(
                    &objective,
                    &claim,
                    &self.core.conversation().since(seq.saturating_sub(40)),
                );
                match self.start_verifier(myself).await {
                    Ok((SpawnedAgent { actor, events, .. }, path)) => {
                        let _ = actor.cast(SessionMsg::Op(Op::user(request)));
                        let sink = self.events.clone();
                        let shown = move |event| {
                            sink.send(event);
                        };
                        tokio::spawn(async move {
                            let agent = path.to_string();
                            let (outcome, usage) = tokio::select! {
                                (verdict, usage) = read_verdict(events, &agent, shown) => {
                                    (VerifierOutcome::Verdict(verdict), usage)
                                }
                                _ = stopped => (VerifierOutcome::Cancelled, Usage::default()),
                            };
                            let _ = actor.cast(SessionMsg::Op(Op::Shutdown));
                            answer(outcome, usage);
                        });
                    }
                    Err(why) => answer(
                        VerifierOutcome::Verdict(Verdict::Unavailable(why)),
                        Usage::default(),
                    ),
                }
            }
        }
    }

    /// Spawns the verifier agent through the kernel, under this session.
    async fn start_verifier(
        &mut self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<(SpawnedAgent, AgentPath), String> {
        let path = self.core.next_child_path();
        let services = AgentServices {
            store: Some(self.store.clone()),
            ..self.services.clone()
        };
        let seat = Seat {
            judged: &self.spec,
            authority: self.current_authority(),
            parent: self.live.clone(),
            dir: self.spec.paths.dir.join("agents").join(path.to_string()),
            path: path.clone(),
            subagents: self.services.subagents.as_deref(),
            services: &services,
        };
        let (spec, services) = verifier(seat).map_err(|e| e.to_string())?;
        spawn_agent(spec, services, Some(myself.get_cell()))
            .await
            .map(|spawned| (spawned, path))
            .map_err(|e| format!("the verifier could not start: {e}"))
    }
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
