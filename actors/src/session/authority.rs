//! The agent is the permission authority for its own calls (P3–P8).
//!
//! A tool task evaluates its call itself (`evaluate`: rules, the floor's
//! parsing, the posture as it is now), off the agent's mailbox, and sends
//! the evaluation here with a reply port. The core does the bookkeeping
//! the evaluation cannot (`cadre_runtime::agent::core`'s `permissions`:
//! ended turns, a paused ledger, prompts, reviews, settling each automatic
//! decision once); this file holds the tool task's side (`TaskPolicy`,
//! `SessionAuthorizer`), starts guardians and writes the audit.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::agent::core::{AgentInput, CallAsked};
use cadre_runtime::model::RequestContext;
use cadre_runtime::permission::guardian::{self, GuardianConfig, HeldCall as ReviewedCall};
use cadre_runtime::permission::rules::RuleSet;
use cadre_runtime::permission::{
    Call, Decision, Evaluation, Layer, Policy, Posture, ProtectedPaths, Verdict, denied_by_rule,
    evaluate, evaluate_with_hook,
};
use cadre_runtime::tool::{Authorization, Authorizer, DecisionFuture, Safety};
use ractor::{Actor, ActorRef, RpcReplyPort};

use super::{SessionMsg, SessionState};
use crate::audit::{AuditLog, AuditRecord, now};
use crate::guardian::{GuardianActor, GuardianArgs, GuardianMsg};
use crate::kernel::AgentSpec;
use crate::store::StoreHandle;

/// How a session decides permissions, fixed at its start.
#[derive(Debug, Clone)]
pub struct PermissionConfig {
    /// The starting posture.
    pub posture: Posture,
    /// Every rule in force.
    pub rules: Arc<RuleSet>,
    /// Whether a person can answer prompts (exec: no).
    pub interactive: bool,
    /// The guardian's model and deadline.
    pub guardian: GuardianConfig,
    /// cadre's configuration and data directories, which no tool call
    /// writes (the workspace's `.cadre` and `.git` are always protected).
    pub protected: ProtectedPaths,
}

impl Default for PermissionConfig {
    /// Ask, no rules, interactive, the default guardian, only the
    /// workspace's own `.cadre` and `.git` protected.
    fn default() -> Self {
        Self {
            posture: Posture::Suggest,
            rules: Arc::new(RuleSet::default()),
            interactive: true,
            guardian: GuardianConfig::default(),
            protected: ProtectedPaths::default(),
        }
    }
}

/// What an agent keeps to carry out its permission decisions (the
/// decisions are the core's).
pub(super) struct Authority {
    guardian: GuardianConfig,
    /// The guardian actor of each review in flight.
    pub(super) guardians: HashMap<u64, ActorRef<GuardianMsg>>,
    audit: AuditLog,
}

impl Authority {
    pub(super) fn new(spec: &AgentSpec, store: StoreHandle) -> Self {
        Self {
            guardian: spec.guardian.clone(),
            guardians: HashMap::new(),
            audit: AuditLog::new(store, spec.row_id().into()),
        }
    }

    /// The review whose guardian is the actor `id`.
    pub(super) fn guardian_of(&self, id: ractor::ActorId) -> Option<u64> {
        self.guardians
            .iter()
            .find(|(_, g)| g.get_id() == id)
            .map(|(review, _)| *review)
    }
}

/// What a tool task needs to evaluate its own call.
pub(super) fn task_policy(spec: &AgentSpec, live: &Arc<LiveAuthority>) -> Arc<TaskPolicy> {
    Arc::new(TaskPolicy {
        rules: spec.authority.rules.clone(),
        interactive: spec.interactive,
        plan_file: spec.is_session().then(|| spec.paths.plan_file()),
        protected: spec.protected.clone(),
        root: spec.workspace.root().to_path_buf(),
        live: live.clone(),
        hooks: crate::hooks::AgentHooks::of(spec),
    })
}

/// What a tool task evaluates its call with: the rules, the plan file, and
/// the live posture (read when the call is made).
#[derive(Debug)]
pub(crate) struct TaskPolicy {
    rules: Arc<RuleSet>,
    interactive: bool,
    plan_file: Option<PathBuf>,
    protected: Arc<ProtectedPaths>,
    root: PathBuf,
    live: Arc<LiveAuthority>,
    /// The agent's `pre_tool_use` hooks, the layer after the rules.
    hooks: crate::hooks::AgentHooks,
}

impl TaskPolicy {
    async fn evaluate(&self, request: &Authorization) -> Evaluation {
        let policy = Policy {
            posture: self.live.posture(),
            rules: &self.rules,
            interactive: self.interactive,
            plan_file: self.plan_file.as_deref(),
            protected: &self.protected,
        };
        let call = Call::new(
            request.tool.definition(),
            &request.args,
            request.safety,
            &self.root,
        )
        .with_real_paths(&request.paths);
        // A deny rule decides before any hook runs.
        if !self.hooks.has_pre_tool_use() || denied_by_rule(&policy, &call) {
            return evaluate(&policy, &call);
        }
        let hook = self
            .hooks
            .pre_tool_use(self.live.mode(), policy.posture, &call)
            .await;
        evaluate_with_hook(&policy, &call, &hook)
    }
}

/// Sends a turn's calls, evaluated, to its agent for the decision.
pub(crate) struct SessionAuthorizer {
    pub(crate) session: ActorRef<SessionMsg>,
    pub(crate) turn_id: u64,
    pub(crate) policy: Arc<TaskPolicy>,
    /// The agent's store: an allowed side-effecting call waits here until
    /// its call and decision are committed (the exactly-once rule).
    pub(crate) store: StoreHandle,
}

impl Authorizer for SessionAuthorizer {
    fn authorize(&self, request: Authorization) -> DecisionFuture {
        let session = self.session.clone();
        let turn_id = self.turn_id;
        let policy = self.policy.clone();
        let store = self.store.clone();
        Box::pin(async move {
            // The parsing and the floor run here, in the tool's task.
            let mut request = request;
            let evaluation = match request.refused {
                None => Some(Box::new(policy.evaluate(&request).await)),
                Some(_) => None,
            };
            // A person will be asked: what they should see of the call's
            // effect is read here too, off the session's mailbox.
            if let Some(Evaluation::AskPerson { .. }) = evaluation.as_deref() {
                request.preview = request.tool.preview(&request.args, &policy.root);
            }
            let side_effect = request.safety == Safety::SideEffect;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let asked = session.cast(SessionMsg::Authorize {
                turn_id,
                request: Box::new(request),
                evaluation,
                reply: reply.into(),
            });
            if asked.is_err() {
                return Decision::new(Verdict::Deny, Layer::Posture, "the session has stopped");
            }
            let decision = answer.await.unwrap_or_else(|_| {
                Decision::new(Verdict::Deny, Layer::Posture, "the decision was withdrawn")
            });
            if side_effect && decision.verdict != Verdict::Deny {
                // Write-ahead: the assistant's call (recorded before the call
                // was started) and this decision (settled before the answer
                // came) are buffered; the call starts only once they are
                // committed, so a crash after it started leaves them stored
                // and a resume reports the call as interrupted instead of
                // losing it and letting it run again.
                if let Err(err) = store.commit().await {
                    return Decision::new(
                        Verdict::Deny,
                        Layer::Posture,
                        format!(
                            "the call could not be recorded before it ran, so it did not run: {err}"
                        ),
                    );
                }
            }
            decision
        })
    }
}

impl SessionState {
    /// A tool task's request as the core takes it: its reply port held
    /// under a ticket, with the posture in force now.
    pub(super) fn authorize_input(
        &mut self,
        turn_id: u64,
        mut request: Authorization,
        evaluation: Option<Evaluation>,
        reply: RpcReplyPort<Decision>,
    ) -> AgentInput {
        let call = CallAsked {
            call_id: request.call_id.clone(),
            tool: request.tool.definition().name.clone(),
            args: request.args,
            refused: request.refused.take(),
            preview: request.preview.take(),
        };
        AgentInput::Authorize {
            ticket: self.replies.decision(reply),
            turn_id,
            call,
            evaluation,
            posture: self.live.posture(),
        }
    }

    /// Starts the guardian on a held call; what it cannot start answers at
    /// once, as a failed review.
    pub(super) async fn review(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        review_id: u64,
        turn_id: u64,
        tool: String,
        arguments: serde_json::Value,
        observations: Vec<String>,
    ) -> Option<AgentInput> {
        let held = ReviewedCall { tool, arguments };
        let context = RequestContext {
            agent_id: format!("{}:guardian", self.spec.path).into(),
            role: "guardian".into(),
            mode: self.mode(),
            turn: turn_id,
            iteration: 1,
            session_id: self.spec.session_id.as_str().into(),
            workspace: self.spec.workspace.root().display().to_string().into(),
            plan_file: self.spec.paths.plan_file().display().to_string().into(),
        };
        let config = &self.authority.guardian;
        let request = match guardian::review_request(&held, &observations, config, context) {
            // Without a guardian model of its own, it asks the agent's model.
            Ok(mut request) => {
                if request.model.is_none() {
                    request.model = self.spec.model.as_deref().map(Arc::from);
                }
                request
            }
            Err(too_large) => {
                return Some(AgentInput::Reviewed {
                    review_id,
                    decision: too_large.decision(),
                });
            }
        };
        // A guardian with a provider or parameters of its own has a client
        // of its own, built like a role's.
        let model = match (config.choice.as_deref(), &self.services.subagents) {
            (Some(choice), Some(subagents)) => match subagents.models.client(choice) {
                Ok(client) => client,
                Err(error) => {
                    let why = format!("the guardian's model: {error}");
                    return Some(AgentInput::Reviewed {
                        review_id,
                        decision: guardian::failed(&why),
                    });
                }
            },
            _ => self.services.model.clone(),
        };
        let args = GuardianArgs {
            model,
            request,
            timeout: config.timeout,
            asker: myself.get_derived(),
            review_id,
        };
        match Actor::spawn_linked(None, GuardianActor, args, myself.get_cell()).await {
            Ok((guardian, _)) => {
                self.authority.guardians.insert(review_id, guardian);
                None
            }
            Err(error) => Some(AgentInput::Reviewed {
                review_id,
                decision: guardian::failed(&format!("the guardian could not start ({error})")),
            }),
        }
    }

    /// Audits one automatic decision, under the agent's row.
    pub(super) fn audit(
        &self,
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
        posture: Posture,
        decision: Decision,
        line: String,
    ) {
        self.authority.audit.record(AuditRecord {
            time: now(),
            session_id: self.spec.session_id.clone(),
            agent_id: self.spec.path.to_string(),
            call_id,
            tool,
            arguments,
            posture,
            decision,
            line,
        });
    }
}
