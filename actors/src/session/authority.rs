//! The agent is the permission authority for its own calls (P3–P8).
//!
//! A tool task evaluates its call itself (`evaluate`: rules, the floor's
//! parsing, the posture as it is now), off the agent's mailbox, and sends
//! the evaluation here with a reply port. The agent does the bookkeeping
//! the evaluation cannot: it refuses calls of a turn that has ended or
//! while the denial ledger has paused autonomy, opens approval prompts and
//! guardian reviews (the `ApprovalBook` keeps them, under typed ids) without
//! blocking its mailbox, and settles every automatic decision once: audit,
//! `permission.decision`, ledger.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::agent::{ApprovalId, LiveAuthority, Route};
use cadre_runtime::model::RequestContext;
use cadre_runtime::permission::approvals::{ApprovalBook, Asked, Held};
use cadre_runtime::permission::guardian::{self, GuardianConfig, HeldCall as ReviewedCall};
use cadre_runtime::permission::ledger::DenialLedger;
use cadre_runtime::permission::rules::RuleSet;
use cadre_runtime::permission::{
    Call, Decision, Evaluation, Layer, Policy, Posture, ProtectedPaths, Verdict, denied_by_rule,
    evaluate, evaluate_with_hook,
};
use cadre_runtime::protocol::{ApprovalDecision, Event, FailureCategory, Op};
use cadre_runtime::tool::{Authorization, Authorizer, DecisionFuture, Safety};
use ractor::{Actor, ActorRef, RpcReplyPort};

use super::{SessionMsg, SessionState};
use crate::audit::{AuditLog, AuditRecord, now};
use crate::guardian::{GuardianActor, GuardianArgs, GuardianMsg};
use crate::kernel::AgentSpec;
use crate::store::StoreHandle;
use crate::turn::TurnMsg;

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

/// The permission state an agent keeps.
pub(super) struct Authority {
    /// The posture the user chose (the ledger may narrow what is in force).
    pub(super) posture: Posture,
    pub(super) ledger: DenialLedger,
    interactive: bool,
    guardian: GuardianConfig,
    book: ApprovalBook<RpcReplyPort<Decision>>,
    /// The guardian actor of each review in flight.
    guardians: HashMap<u64, ActorRef<GuardianMsg>>,
    audit: AuditLog,
}

impl Authority {
    pub(super) fn new(spec: &AgentSpec, store: StoreHandle) -> Self {
        Self {
            posture: spec.authority.posture,
            ledger: DenialLedger::default(),
            interactive: spec.interactive,
            guardian: spec.guardian.clone(),
            book: ApprovalBook::new(spec.path.clone()),
            guardians: HashMap::new(),
            audit: AuditLog::new(store, spec.row_id().into()),
        }
    }

    /// What a tool task needs to evaluate its own call.
    pub(super) fn task_policy(
        &self,
        spec: &AgentSpec,
        live: &Arc<LiveAuthority>,
    ) -> Arc<TaskPolicy> {
        Arc::new(TaskPolicy {
            rules: spec.authority.rules.clone(),
            interactive: self.interactive,
            plan_file: spec.is_session().then(|| spec.paths.plan_file()),
            protected: spec.protected.clone(),
            root: spec.workspace.root().to_path_buf(),
            live: live.clone(),
            hooks: crate::hooks::AgentHooks::of(spec),
        })
    }
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

type HeldCall = Held<RpcReplyPort<Decision>>;

impl SessionState {
    /// The posture this agent puts in force: Ask while the ledger has
    /// paused autonomy in an interactive host.
    pub(super) fn effective_posture(&self) -> Posture {
        let a = &self.authority;
        if a.ledger.is_paused() && a.interactive && a.posture == Posture::Auto {
            Posture::Suggest
        } else {
            a.posture
        }
    }

    /// Makes the effective posture the one this agent's calls and its
    /// descendants' are decided with, at once.
    pub(super) fn publish_posture(&self) {
        self.live.set_posture(self.effective_posture());
    }

    /// Decides one call, now or once a person or the guardian answers.
    pub(super) async fn authorize(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        mut request: Authorization,
        evaluation: Option<Evaluation>,
        reply: RpcReplyPort<Decision>,
    ) {
        let preview = request.preview.take();
        let call = Held {
            turn_id,
            call_id: request.call_id.clone(),
            tool: request.tool.definition().name.clone(),
            args: request.args,
            reply,
        };
        let evaluation = match (request.refused, evaluation) {
            (Some((gate, refused)), _) => {
                let refused = Decision::new(Verdict::Deny, gate, refused.message);
                return self.settle(call, refused);
            }
            (None, Some(evaluation)) => evaluation,
            (None, None) => {
                let unknown =
                    Decision::new(Verdict::Deny, Layer::Posture, "the call was not evaluated");
                return self.settle(call, unknown);
            }
        };
        if !self.is_current(turn_id) {
            let ended = Decision::new(Verdict::Deny, Layer::Posture, "the turn has ended");
            return self.settle(call, ended);
        }
        if self.authority.ledger.is_paused() && self.live.posture() == Posture::Auto {
            let paused = Decision::new(
                Verdict::Deny,
                Layer::Ledger,
                "autonomy is paused after too many denials; a person must choose the posture again",
            );
            return self.settle(call, paused);
        }
        match evaluation {
            Evaluation::Decided(decision) => self.settle(call, decision),
            Evaluation::AskPerson { reason, .. } => self.ask_person(call, reason, preview),
            Evaluation::Review { observations } => self.review(myself, call, observations).await,
        }
    }

    fn ask_person(&mut self, call: HeldCall, reason: String, preview: Option<String>) {
        let (call_id, tool, arguments) =
            (call.call_id.clone(), call.tool.clone(), call.args.clone());
        match self.authority.book.ask(call) {
            Asked::Earlier(call, decision) => {
                let _ = call.reply.send(decision);
            }
            Asked::Prompt(id) => self.emit_for_turn(Event::ApprovalRequested {
                id: id.to_string(),
                agent_id: self.spec.path.to_string(),
                call_id,
                tool,
                arguments,
                reason,
                preview,
            }),
        }
    }

    async fn review(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        call: HeldCall,
        observations: Vec<String>,
    ) {
        let held = ReviewedCall {
            tool: call.tool.clone(),
            arguments: call.args.clone(),
        };
        let context = RequestContext {
            agent_id: format!("{}:guardian", self.spec.path).into(),
            role: "guardian".into(),
            mode: self.mode(),
            turn: call.turn_id,
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
            Err(too_large) => return self.settle(call, too_large.decision()),
        };
        let timeout = config.timeout;
        // A guardian with a provider or parameters of its own has a client
        // of its own, built like a role's.
        let model = match (&config.choice, &self.spec.subagents) {
            (Some(choice), Some(subagents)) => match subagents.models.client(choice) {
                Ok(client) => client,
                Err(error) => {
                    let why = format!("the guardian's model: {error}");
                    return self.settle(call, guardian::failed(&why));
                }
            },
            _ => self.services.model.clone(),
        };
        let review_id = self.authority.book.open_review(call);
        let args = GuardianArgs {
            model,
            request,
            timeout,
            asker: myself.get_derived(),
            review_id,
        };
        match Actor::spawn_linked(None, GuardianActor, args, myself.get_cell()).await {
            Ok((guardian, _)) => {
                self.authority.guardians.insert(review_id, guardian);
            }
            Err(error) => {
                if let Some(call) = self.authority.book.review_done(review_id) {
                    let why = format!("the guardian could not start ({error})");
                    self.settle(call, guardian::failed(&why));
                }
            }
        }
    }

    /// The guardian answered.
    pub(super) fn review_done(&mut self, review_id: u64, decision: Decision) {
        self.authority.guardians.remove(&review_id);
        if let Some(call) = self.authority.book.review_done(review_id) {
            self.settle(call, decision);
        }
    }

    /// A guardian actor crashed.
    pub(super) fn guardian_failed(&mut self, cell_id: ractor::ActorId, error: &str) {
        let crashed = self
            .authority
            .guardians
            .iter()
            .find(|(_, g)| g.get_id() == cell_id)
            .map(|(id, _)| *id);
        if let Some(id) = crashed {
            self.authority.guardians.remove(&id);
            if let Some(call) = self.authority.book.review_done(id) {
                self.settle(
                    call,
                    guardian::failed(&format!("the guardian crashed ({error})")),
                );
            }
        }
    }

    /// A person answered a prompt: this agent's own, or one a descendant
    /// raised, routed one hop down by its typed id.
    pub(super) fn approve(&mut self, id: &str, answer: ApprovalDecision, reason: Option<String>) {
        // A workflow step's prompt goes to the engine running it.
        if id.starts_with("step:")
            && let Some(engine) = self.spec.subagents.as_ref().and_then(|s| s.workflows())
            && engine.approve(id, answer, reason.clone())
        {
            return;
        }
        let Ok(parsed) = id.parse::<ApprovalId>() else {
            return self.reject("approve", format!("no approval prompt has the id '{id}'"));
        };
        match self.children.table.route(&parsed) {
            Route::Here => {}
            Route::Child(child) => {
                let op = Op::Approve {
                    id: id.to_string(),
                    decision: answer,
                    reason: reason.clone(),
                };
                if child.actor.op(op) {
                    return;
                }
            }
            Route::Nowhere => {}
        }
        let Some(mut answered) = self.authority.book.answer(&parsed, answer) else {
            return self.reject("approve", format!("no approval prompt has the id '{id}'"));
        };
        // What the person said goes to the model with the decision.
        if let Some(said) = reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            answered.decision.reason =
                format!("{}; the user says: {said}", answered.decision.reason);
        }
        self.emit(Event::ApprovalResolved {
            id: id.to_string(),
            outcome: answered.outcome,
        });
        // The answer is announced before the call runs on it.
        let _ = answered.held.reply.send(answered.decision);
    }

    /// A turn ended: its open prompts are withdrawn and its reviews cancelled
    /// (a cancelled review denies).
    pub(super) fn withdraw(&mut self, turn_id: u64) {
        let withdrawn = self.authority.book.withdraw(turn_id);
        for (id, call) in withdrawn.prompts {
            self.emit(Event::ApprovalResolved {
                id: id.to_string(),
                outcome: cadre_runtime::protocol::ApprovalOutcome::Withdrawn,
            });
            drop(call);
        }
        for (review_id, call) in withdrawn.reviews {
            if let Some(guardian) = self.authority.guardians.remove(&review_id) {
                guardian.stop(None);
            }
            self.settle(call, guardian::failed("the review was cancelled"));
        }
    }

    /// Delivers a decision not made by a person: audit, event, ledger.
    fn settle(&mut self, call: HeldCall, decision: Decision) {
        let posture = self.live.posture();
        let line = decision.line(posture, &call.tool);
        let agent_id = self.spec.path.to_string();
        self.authority.audit.record(AuditRecord {
            time: now(),
            session_id: self.spec.session_id.clone(),
            agent_id: agent_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.args.clone(),
            posture,
            decision: decision.clone(),
            line: line.clone(),
        });
        self.emit_for_turn(Event::PermissionDecision {
            agent_id,
            call_id: call.call_id,
            tool: call.tool,
            decision: decision.clone(),
            line,
        });
        let trip = self.authority.ledger.record(posture, &decision);
        let _ = call.reply.send(decision);
        if let Some(trip) = trip {
            self.pause_autonomy(trip.reason());
        }
    }

    fn pause_autonomy(&mut self, reason: String) {
        if self.authority.interactive {
            self.publish_posture();
            self.emit(Event::AutonomyPaused {
                reason,
                fallback: Some(Posture::Suggest),
            });
            self.emit(Event::PostureChanged {
                posture: Posture::Suggest,
            });
        } else {
            self.emit(Event::AutonomyPaused {
                reason: reason.clone(),
                fallback: None,
            });
            if let Some(turn) = &self.turn {
                let _ = turn.cast(TurnMsg::Halt {
                    category: FailureCategory::PausedByDenials,
                    message: format!("paused_by_denials: {reason}"),
                });
            }
        }
    }
}
