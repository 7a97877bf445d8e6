//! The session as the permission authority for its calls (P1–P8).
//!
//! Tool tasks ask by message ([`SessionMsg::Authorize`]); the session runs
//! the pure engine, and when a person or the guardian must answer it keeps
//! the reply and returns to its mailbox, so it keeps answering cancel,
//! status and other approvals while one waits. Every decision not made by a
//! person is audited and emitted as one `permission.decision` line, and
//! counted by the denial ledger.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cadre_runtime::model::RequestContext;
use cadre_runtime::permission::guardian::{self, GuardianConfig, HeldCall};
use cadre_runtime::permission::ledger::DenialLedger;
use cadre_runtime::permission::rules::RuleSet;
use cadre_runtime::permission::{
    Call, Decision, Evaluation, Layer, Policy, Posture, ProtectedPaths, Verdict, evaluate,
};
use cadre_runtime::protocol::{ApprovalDecision, ApprovalOutcome, Event, FailureCategory};
use cadre_runtime::tool::{Authorization, Authorizer, DecisionFuture};
use ractor::{Actor, ActorRef};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{SessionMsg, SessionState};
use crate::audit::{AuditLog, AuditRecord, now};
use crate::guardian::{GuardianActor, GuardianArgs, GuardianMsg};
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

/// The permission state a session keeps.
pub(super) struct Authority {
    pub(super) config: PermissionConfig,
    /// The posture the user chose (the ledger may narrow what is in force).
    pub(super) posture: Posture,
    pub(super) ledger: DenialLedger,
    /// Calls a person allowed for the rest of the session.
    allowed_for_session: HashSet<String>,
    approvals: HashMap<String, PendingApproval>,
    approvals_made: u64,
    reviews: HashMap<u64, PendingReview>,
    reviews_made: u64,
    pub(super) audit: AuditLog,
}

struct Pending {
    turn_id: u64,
    call_id: String,
    tool: String,
    args: Value,
    reply: oneshot::Sender<Decision>,
}

struct PendingApproval {
    call: Pending,
    key: String,
}

struct PendingReview {
    call: Pending,
    guardian: ActorRef<GuardianMsg>,
}

impl Authority {
    pub(super) fn new(config: PermissionConfig, audit: AuditLog) -> Self {
        Self {
            posture: config.posture,
            config,
            ledger: DenialLedger::default(),
            allowed_for_session: HashSet::new(),
            approvals: HashMap::new(),
            approvals_made: 0,
            reviews: HashMap::new(),
            reviews_made: 0,
            audit,
        }
    }

    /// The posture in force: Ask while the ledger has paused autonomy in an
    /// interactive host.
    pub(super) fn effective_posture(&self) -> Posture {
        if self.ledger.is_paused() && self.config.interactive && self.posture == Posture::Auto {
            Posture::Suggest
        } else {
            self.posture
        }
    }
}

/// The key under which "allow for session" remembers a call.
fn session_key(tool: &str, args: &Value) -> String {
    format!("{tool}\u{1f}{args}")
}

/// Sends a turn's calls to its session for a decision.
pub(crate) struct SessionAuthorizer {
    pub(crate) session: ActorRef<SessionMsg>,
    pub(crate) turn_id: u64,
}

impl Authorizer for SessionAuthorizer {
    fn authorize(&self, request: Authorization) -> DecisionFuture {
        let session = self.session.clone();
        let turn_id = self.turn_id;
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let asked = session.cast(SessionMsg::Authorize {
                turn_id,
                request: Box::new(request),
                reply,
            });
            if asked.is_err() {
                return Decision::new(Verdict::Deny, Layer::Posture, "the session has stopped");
            }
            answer.await.unwrap_or_else(|_| {
                Decision::new(Verdict::Deny, Layer::Posture, "the decision was withdrawn")
            })
        })
    }
}

impl SessionState {
    /// Decides one call, now or once a person or the guardian answers.
    pub(super) async fn authorize(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        request: Authorization,
        reply: oneshot::Sender<Decision>,
    ) {
        let def = request.tool.definition();
        let call = Pending {
            turn_id,
            call_id: request.call_id.clone(),
            tool: def.name.clone(),
            args: request.args.clone(),
            reply,
        };
        if let Some(refused) = request.refused {
            return self.settle(
                call,
                Decision::new(Verdict::Deny, Layer::Mode, refused.message),
            );
        }
        if !self.is_current(turn_id) {
            return self.settle(
                call,
                Decision::new(Verdict::Deny, Layer::Posture, "the turn has ended"),
            );
        }
        let posture = self.authority.effective_posture();
        if self.authority.ledger.is_paused() && posture == Posture::Auto {
            let paused = Decision::new(
                Verdict::Deny,
                Layer::Ledger,
                "autonomy is paused after too many denials; a person must choose the posture again",
            );
            return self.settle(call, paused);
        }
        let plan_file = self.config.paths.plan_file();
        let protected = &self.authority.config.protected;
        let policy = Policy {
            posture,
            rules: &self.authority.config.rules,
            interactive: self.authority.config.interactive,
            plan_file: &plan_file,
            protected,
        };
        let root = self.config.workspace.root().to_path_buf();
        let decided =
            Call::new(def, &request.args, request.safety, &root).with_real_paths(&request.paths);
        match evaluate(&policy, &decided) {
            Evaluation::Decided(decision) => self.settle(call, decision),
            Evaluation::AskPerson { reason, .. } => self.ask_person(call, reason),
            Evaluation::Review { observations } => self.review(myself, call, observations).await,
        }
    }

    fn ask_person(&mut self, call: Pending, reason: String) {
        let key = session_key(&call.tool, &call.args);
        if self.authority.allowed_for_session.contains(&key) {
            let earlier = Decision::new(
                Verdict::Allow,
                Layer::User,
                "allowed for this session earlier",
            );
            let _ = call.reply.send(earlier);
            return;
        }
        self.authority.approvals_made += 1;
        let id = format!(
            "{}approval:{}",
            self.approval_prefix(),
            self.authority.approvals_made
        );
        self.emit(Event::ApprovalRequested {
            id: id.clone(),
            agent_id: self.config.agent_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.args.clone(),
            reason,
        });
        self.authority
            .approvals
            .insert(id, PendingApproval { call, key });
    }

    /// `agent:<id>:` for a sub-agent's prompts, nothing for the session's own.
    fn approval_prefix(&self) -> String {
        if self.config.agent_id == "main" {
            String::new()
        } else {
            format!("agent:{}:", self.config.agent_id)
        }
    }

    async fn review(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        call: Pending,
        observations: Vec<String>,
    ) {
        let held = HeldCall {
            tool: call.tool.clone(),
            arguments: call.args.clone(),
        };
        let context = RequestContext {
            agent_id: format!("{}:guardian", self.config.agent_id).into(),
            role: "guardian".into(),
            mode: self.mode,
            turn: call.turn_id,
            iteration: 1,
            session_id: self.config.session_id.as_str().into(),
            workspace: self.config.workspace.root().display().to_string().into(),
            plan_file: self.config.paths.plan_file().display().to_string().into(),
        };
        let config: &GuardianConfig = &self.authority.config.guardian;
        let request = match guardian::review_request(&held, &observations, config, context) {
            // Without a guardian model of its own, it asks the agent's model.
            Ok(mut request) => {
                if request.model.is_none() {
                    request.model = self.config.model_override.as_deref().map(Arc::from);
                }
                request
            }
            Err(too_large) => return self.settle(call, too_large.decision()),
        };
        self.authority.reviews_made += 1;
        let review_id = self.authority.reviews_made;
        let args = GuardianArgs {
            model: self.services.model.clone(),
            request,
            timeout: config.timeout,
            session: myself.clone(),
            review_id,
        };
        match Actor::spawn_linked(None, GuardianActor, args, myself.get_cell()).await {
            Ok((guardian, _)) => {
                self.authority
                    .reviews
                    .insert(review_id, PendingReview { call, guardian });
            }
            Err(error) => {
                let why = format!("the guardian could not start ({error})");
                self.settle(call, guardian::failed(&why));
            }
        }
    }

    /// The guardian answered.
    pub(super) fn review_done(&mut self, review_id: u64, decision: Decision) {
        if let Some(review) = self.authority.reviews.remove(&review_id) {
            self.settle(review.call, decision);
        }
    }

    /// A guardian actor crashed.
    pub(super) fn guardian_failed(&mut self, cell_id: ractor::ActorId, error: &str) {
        let crashed = self
            .authority
            .reviews
            .iter()
            .find(|(_, r)| r.guardian.get_id() == cell_id)
            .map(|(id, _)| *id);
        if let Some(id) = crashed
            && let Some(review) = self.authority.reviews.remove(&id)
        {
            self.settle(
                review.call,
                guardian::failed(&format!("the guardian crashed ({error})")),
            );
        }
    }

    /// Whether a prompt with this id waits here (not in a descendant).
    pub(super) fn owns_approval(&self, id: &str) -> bool {
        self.authority.approvals.contains_key(id)
    }

    /// A person answered a prompt.
    pub(super) fn approve(&mut self, id: &str, answer: ApprovalDecision) {
        let Some(pending) = self.authority.approvals.remove(id) else {
            return self.reject("approve", format!("no approval prompt has the id '{id}'"));
        };
        let decision = match answer {
            ApprovalDecision::AllowOnce => {
                Decision::new(Verdict::Allow, Layer::User, "allowed by the user")
            }
            ApprovalDecision::AllowSession => {
                self.authority.allowed_for_session.insert(pending.key);
                Decision::new(
                    Verdict::Allow,
                    Layer::User,
                    "allowed by the user for this session",
                )
            }
            ApprovalDecision::Deny => {
                Decision::new(Verdict::Deny, Layer::User, "denied by the user")
            }
        };
        let outcome = match answer {
            ApprovalDecision::AllowOnce => ApprovalOutcome::AllowOnce,
            ApprovalDecision::AllowSession => ApprovalOutcome::AllowSession,
            ApprovalDecision::Deny => ApprovalOutcome::Deny,
        };
        self.emit(Event::ApprovalResolved {
            id: id.to_string(),
            outcome,
        });
        // The answer is announced before the call runs on it.
        let _ = pending.call.reply.send(decision);
    }

    /// A turn ended: its open prompts are withdrawn and its reviews cancelled
    /// (a cancelled review denies).
    pub(super) fn withdraw(&mut self, turn_id: u64) {
        let ids: Vec<String> = self
            .authority
            .approvals
            .iter()
            .filter(|(_, a)| a.call.turn_id == turn_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.authority.approvals.remove(&id);
            self.emit(Event::ApprovalResolved {
                id,
                outcome: ApprovalOutcome::Withdrawn,
            });
        }
        let reviews: Vec<u64> = self
            .authority
            .reviews
            .iter()
            .filter(|(_, r)| r.call.turn_id == turn_id)
            .map(|(id, _)| *id)
            .collect();
        for id in reviews {
            if let Some(review) = self.authority.reviews.remove(&id) {
                review.guardian.stop(None);
                self.settle(review.call, guardian::failed("the review was cancelled"));
            }
        }
    }

    /// Delivers a decision not made by a person: audit, event, ledger.
    fn settle(&mut self, call: Pending, decision: Decision) {
        let posture = self.authority.effective_posture();
        let line = decision.line(posture, &call.tool);
        self.authority.audit.record(AuditRecord {
            time: now(),
            session_id: self.config.session_id.clone(),
            agent_id: self.config.agent_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.args.clone(),
            posture,
            decision: decision.clone(),
            line: line.clone(),
        });
        self.emit(Event::PermissionDecision {
            agent_id: self.config.agent_id.clone(),
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
        if self.authority.config.interactive {
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
            if let Some(running) = &self.running {
                let _ = running.actor.cast(TurnMsg::Halt {
                    category: FailureCategory::PausedByDenials,
                    message: format!("paused_by_denials: {reason}"),
                });
            }
        }
    }
}
