//! Settlement after every turn of a session with a goal (G4), as pure
//! stages run in the spec's order: usage accounting, staleness, exception
//! classification, budget wrap-up, dependency check, verification,
//! breaker, commit, and what to schedule next.
//!
//! [`settle`] runs the stages on the stored goal; when a completion claim
//! needs a verifier it stops with [`Settlement::Verify`], and the session
//! feeds the verifier's answer to [`after_verdict`], which finishes the
//! settlement. Neither does any I/O: the session stores the goal they
//! leave and carries out [`Settled::next`].

use super::breaker::{BreakerVerdict, TurnTrace};
use super::verdict::Verdict;
use super::{BudgetKind, Goal, GoalStatus, StatusReason, VerifyMode};
use crate::protocol::Usage;

/// Who asked for the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    /// A person's message.
    User,
    /// A continuation.
    Continuation,
    /// The summary turn after a budget stop (it counts no main turn).
    Summary,
}

/// How the turn ended, as the exception classification reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// A final answer.
    Completed,
    /// The agent's own failure (its iteration limit, a crashed turn).
    Failed,
    /// A person cancelled it.
    Cancelled,
    /// A safety layer withdrew it (the denial ledger paused autonomy).
    Withdrawn,
    /// The model provider failed after its retries.
    Provider,
}

/// What the worker proposed during the turn (`update_goal` with `status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposal {
    /// The objective is met; the claim says how.
    Complete {
        /// What the worker says it did.
        claim: String,
    },
    /// The worker cannot go on.
    Blocked {
        /// Why.
        reason: String,
    },
}

/// What the goal would have to wait for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// A plan questionnaire waits for its answer.
    pub questionnaire: bool,
    /// A permission prompt waits for its answer.
    pub approval: bool,
    /// Background sub-agents still running.
    pub background: usize,
}

impl Dependencies {
    /// The first thing to wait for, named.
    pub fn first(&self) -> Option<String> {
        if self.questionnaire {
            Some("a plan questionnaire waits for an answer".into())
        } else if self.approval {
            Some("a permission prompt waits for an answer".into())
        } else if self.background > 0 {
            Some(format!(
                "{} background sub-agent(s) still run",
                self.background
            ))
        } else {
            None
        }
    }
}

/// Everything settlement reads of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFacts {
    /// Who asked for it.
    pub kind: TurnKind,
    /// The goal's revision when the turn started.
    pub revision: u64,
    /// How it ended.
    pub end: TurnEnd,
    /// What it spent: every token counts toward the budget; the cached,
    /// reasoning and cost figures are shown apart.
    pub usage: Usage,
    /// Seconds it ran.
    pub seconds: u64,
    /// What the breaker reads.
    pub trace: TurnTrace,
    /// The worker's proposal, if it made one.
    pub proposal: Option<Proposal>,
    /// What is pending when it ended.
    pub dependencies: Dependencies,
}

/// What the session schedules after a settlement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Admit the next continuation.
    Continue,
    /// Admit the summary turn (a budget stopped the goal).
    Summary,
    /// Nothing now: continue once this clears.
    Wait(String),
    /// Nothing: the goal is not active (or there is no goal work to do).
    Stop,
}

/// How [`settle`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Settled: store the goal and do this.
    Done(Settled),
    /// The worker claims completion and the claim must be verified: run
    /// the verifier, then call [`after_verdict`].
    Verify {
        /// The claim.
        claim: String,
    },
}

/// Stage 1: usage accounting. The summary turn counts no main turn.
pub(super) fn account(goal: &mut Goal, facts: &TurnFacts) {
    goal.usage.tokens += facts.usage.total();
    goal.usage.cached_tokens += facts.usage.cached_tokens;
    goal.usage.reasoning_tokens += facts.usage.reasoning_tokens;
    goal.usage.cost = goal.usage.cost + facts.usage.cost;
    goal.usage.seconds += facts.seconds;
    if facts.kind != TurnKind::Summary {
        goal.usage.turns += 1;
    }
}

/// Stage 2: staleness. A proposal made under an older revision (the goal
/// was edited during the turn) is discarded.
pub(super) fn fresh_proposal(goal: &Goal, facts: &TurnFacts) -> Option<Proposal> {
    (facts.revision == goal.revision)
        .then(|| facts.proposal.clone())
        .flatten()
}

/// Stage 3: exception classification. A turn that did not complete
/// stops the goal, with the status its ending calls for.
pub(super) fn classify(end: TurnEnd) -> Option<(GoalStatus, StatusReason)> {
    match end {
        TurnEnd::Completed => None,
        TurnEnd::Failed => Some((GoalStatus::Paused, StatusReason::TurnFailed)),
        TurnEnd::Cancelled => Some((GoalStatus::Paused, StatusReason::UserRequested)),
        TurnEnd::Withdrawn => Some((GoalStatus::Paused, StatusReason::Withdrawn)),
        TurnEnd::Provider => Some((GoalStatus::UsageLimited, StatusReason::ProviderFailure)),
    }
}

/// Stage 4: budget wrap-up. A spent budget limits the goal, and its one
/// summary turn becomes due.
pub(super) fn wrap_up(goal: &mut Goal) -> Option<BudgetKind> {
    let kind = goal.spent()?;
    goal.set(GoalStatus::BudgetLimited, StatusReason::for_budget(kind));
    goal.summary_due = true;
    Some(kind)
}

/// Stage 6: verification. `Ok` is the settled status (no verifier
/// needed), `Err` the claim to verify.
pub(super) fn verification(
    mode: VerifyMode,
    proposal: Proposal,
) -> Result<(GoalStatus, StatusReason), String> {
    match (proposal, mode) {
        // A blocked report needs no proof: the worker stops either way.
        (Proposal::Blocked { .. }, _) => Ok((GoalStatus::Blocked, StatusReason::WorkerReported)),
        (Proposal::Complete { .. }, VerifyMode::None) => {
            Ok((GoalStatus::Complete, StatusReason::WorkerProposal))
        }
        (Proposal::Complete { claim }, VerifyMode::Subagent | VerifyMode::Command) => Err(claim),
    }
}

/// Stage 7: the breaker. `Some` is the pause it trips into.
pub(super) fn breaker(goal: &mut Goal, trace: &TurnTrace) -> Option<StatusReason> {
    match goal.breaker.observe(trace, goal.settings.breaker_limit) {
        BreakerVerdict::Progress | BreakerVerdict::Nudge(_) => None,
        BreakerVerdict::Trip if goal.claimed => Some(StatusReason::NoProgressAfterCompletionClaim),
        BreakerVerdict::Trip => Some(StatusReason::NoProgress),
    }
}

/// Settles a turn against the stored goal (G4): changes `goal` and says
/// what comes next.
pub fn settle(goal: &mut Goal, facts: &TurnFacts) -> Settlement {
    let was_active = goal.status == GoalStatus::Active;
    account(goal, facts);
    if facts.kind == TurnKind::Summary {
        goal.summary_due = false;
        return Settlement::Done(Settled::Stop);
    }
    if !was_active {
        // Paused or cleared by a person during the turn: only the usage counts.
        return Settlement::Done(Settled::Stop);
    }
    let proposal = fresh_proposal(goal, facts);
    if let Some((status, reason)) = classify(facts.end) {
        goal.set(status, reason);
        return Settlement::Done(Settled::Stop);
    }
    if wrap_up(goal).is_some() {
        return Settlement::Done(Settled::Summary);
    }
    if let Some(what) = facts.dependencies.first() {
        return Settlement::Done(Settled::Wait(what));
    }
    if let Some(proposal) = proposal {
        return match verification(goal.settings.verify, proposal) {
            Ok((status, reason)) => {
                goal.set(status, reason);
                Settlement::Done(Settled::Stop)
            }
            Err(claim) => Settlement::Verify { claim },
        };
    }
    if let Some(reason) = breaker(goal, &facts.trace) {
        goal.set(GoalStatus::Paused, reason);
        return Settlement::Done(Settled::Stop);
    }
    Settlement::Done(Settled::Continue)
}

/// Finishes a settlement with the verifier's verdict (G5). `revision` is
/// the goal's revision when the claim was made: a goal edited since
/// discards the verdict. The verifier's tokens and time count toward the
/// goal's budgets; its cached and reasoning tokens and its cost are shown
/// with the goal's own.
pub fn after_verdict(
    goal: &mut Goal,
    revision: u64,
    verdict: &Verdict,
    verifier: Usage,
    seconds: u64,
) -> Settled {
    goal.usage.tokens += verifier.total();
    goal.usage.verifier_tokens += verifier.total();
    goal.usage.cached_tokens += verifier.cached_tokens;
    goal.usage.reasoning_tokens += verifier.reasoning_tokens;
    goal.usage.cost = goal.usage.cost + verifier.cost;
    goal.usage.seconds += seconds;
    if goal.status != GoalStatus::Active {
        return Settled::Stop;
    }
    if goal.revision != revision {
        return Settled::Continue;
    }
    match verdict {
        Verdict::Pass => {
            goal.set(GoalStatus::Complete, StatusReason::VerifierMet);
            return Settled::Stop;
        }
        Verdict::Partial(gaps) => {
            goal.gaps.gaps.clone_from(gaps);
            goal.set(GoalStatus::Paused, StatusReason::VerifierPartial);
            return Settled::Stop;
        }
        Verdict::Unparseable | Verdict::Unavailable(_) => {
            goal.set(GoalStatus::Paused, StatusReason::VerifierUnavailable);
            return Settled::Stop;
        }
        Verdict::Fail(gaps) => {
            if &goal.gaps.gaps == gaps {
                goal.gaps.repeats += 1;
            } else {
                goal.gaps.gaps.clone_from(gaps);
                goal.gaps.repeats = 1;
            }
            goal.claimed = true;
            goal.gaps_unreported = true;
        }
    }
    if goal.gaps.repeats >= goal.settings.repeated_gaps_limit {
        goal.set(GoalStatus::Paused, StatusReason::NoProgress);
        return Settled::Stop;
    }
    if wrap_up(goal).is_some() {
        return Settled::Summary;
    }
    Settled::Continue
}
