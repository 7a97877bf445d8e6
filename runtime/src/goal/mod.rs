//! A session's goal (G1–G8), with no I/O: the record, its statuses and the
//! closed set of reasons, what a person's command does to it, and the
//! machines the session actor steps after every turn.
//!
//! A goal is one objective a session works on turn after turn until a
//! separate verifier confirms it is met, a budget runs out, or the work
//! stops making progress. The worker never changes the goal's status
//! itself: `update_goal` only *proposes* `complete` or `blocked`, and the
//! settlement after the turn decides.
//!
//! # Layout
//! - this file: [`Goal`], [`GoalStatus`], [`StatusReason`], [`Budgets`],
//!   [`GoalUsage`], [`GoalSettings`], and [`Goal::command`], what a
//!   person's `/goal …` does.
//! - `settle`: the settlement pipeline after a turn, stage by stage, and
//!   what a verdict does.
//! - `breaker`: the no-progress breaker (G8).
//! - `budget`: which budget is spent, and the guard before every tool call (G7).
//! - `verdict`: reading a verifier's answer (G5).
//! - `continuation`: the continuation messages, their header, and the
//!   recheck before one runs (G6).
//! - `evidence`: the verifier's contract and the evidence digest it is given.
//! - `session`: [`GoalSession`], the one machine a session steps for its
//!   goal (`/goal`, a turn's start and end, the goal tools, the verdict),
//!   returning the effects it performs.

mod breaker;
mod budget;
mod continuation;
mod evidence;
mod session;
mod settle;
mod verdict;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use breaker::{Breaker, BreakerVerdict, Tracing, TurnTrace};
pub use budget::{BudgetGuard, GuardDecision, spent_budget};
pub use continuation::{
    ContinuationHeader, ContinuationKind, Recheck, RecheckInput, continuation_text, recheck,
    summary_text,
};
pub use evidence::{VERIFIER_PROMPT, verifier_request};
pub use session::{Gate, GoalEffect, GoalSession, Step, Surroundings, VerifierOutcome};
pub use settle::{
    Dependencies, Proposal, Settled, Settlement, TurnEnd, TurnFacts, TurnKind, after_verdict,
    settle,
};
pub use verdict::{Verdict, parse_verdict};

/// Where a goal stands (G2). Only `active` continues; `complete` is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Work continues, turn after turn.
    Active,
    /// Stopped until a person resumes it.
    Paused,
    /// The worker reported it cannot go on; a person resumes it.
    Blocked,
    /// A budget is spent; raising (or clearing) that budget reactivates it.
    BudgetLimited,
    /// The model provider refused or failed (quota, rate limit, outage).
    UsageLimited,
    /// Done, for good.
    Complete,
}

impl GoalStatus {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalStatus::Active => "active",
            GoalStatus::Paused => "paused",
            GoalStatus::Blocked => "blocked",
            GoalStatus::BudgetLimited => "budget_limited",
            GoalStatus::UsageLimited => "usage_limited",
            GoalStatus::Complete => "complete",
        }
    }
}

impl fmt::Display for GoalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// Tokens, the worker's and the verifier's.
    Tokens,
    /// Main turns (user turns and continuations; not the summary turn).
    Turns,
    /// Active seconds (time spent in turns and verification).
    Time,
}

impl BudgetKind {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Tokens => "tokens",
            BudgetKind::Turns => "turns",
            BudgetKind::Time => "time",
        }
    }
}

/// Why a goal is in its status: every transition carries one (G2). The
/// set is closed; the wire form is `status(reason)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusReason {
    /// `active`: a person set the goal, or the model created it on request.
    Created,
    /// `active`: a person resumed it.
    UserResumed,
    /// `active`: a person raised or cleared the budget that ran out.
    BudgetRaised,
    /// `complete`: the verifier confirmed the worker's claim.
    VerifierMet,
    /// `complete`: accepted on the worker's word (verification `none`).
    WorkerProposal,
    /// `complete` or `blocked`: a person said so (`/goal complete|blocked`).
    UserMarked,
    /// `blocked`: the worker reported it cannot go on.
    WorkerReported,
    /// `paused`: a person paused it, or cancelled a turn.
    UserRequested,
    /// `paused`: the breaker tripped, or the verifier returned the same
    /// gaps too many times.
    NoProgress,
    /// `paused`: the breaker tripped after a completion claim.
    NoProgressAfterCompletionClaim,
    /// `paused`: the verifier could not run, or gave no verdict.
    VerifierUnavailable,
    /// `paused`: the verifier found the objective partly met.
    VerifierPartial,
    /// `paused`: the turn failed (the agent's own failure, not the provider's).
    TurnFailed,
    /// `paused`: a safety layer withdrew the turn (the denial ledger).
    Withdrawn,
    /// `budget_limited`: the token budget is spent.
    Tokens,
    /// `budget_limited`: the main-turn budget is spent.
    MainTurns,
    /// `budget_limited`: the active-time budget is spent.
    Time,
    /// `usage_limited`: the provider failed after its retries.
    ProviderFailure,
}

impl StatusReason {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::Created => "created",
            StatusReason::UserResumed => "user_resumed",
            StatusReason::BudgetRaised => "budget_raised",
            StatusReason::VerifierMet => "verifier_met",
            StatusReason::WorkerProposal => "worker_proposal",
            StatusReason::UserMarked => "user_marked",
            StatusReason::WorkerReported => "worker_reported",
            StatusReason::UserRequested => "user_requested",
            StatusReason::NoProgress => "no_progress",
            StatusReason::NoProgressAfterCompletionClaim => "no_progress_after_completion_claim",
            StatusReason::VerifierUnavailable => "verifier_unavailable",
            StatusReason::VerifierPartial => "verifier_partial",
            StatusReason::TurnFailed => "turn_failed",
            StatusReason::Withdrawn => "withdrawn",
            StatusReason::Tokens => "tokens",
            StatusReason::MainTurns => "main_turns",
            StatusReason::Time => "time",
            StatusReason::ProviderFailure => "provider_failure",
        }
    }

    /// The reason for a spent budget.
    pub fn for_budget(kind: BudgetKind) -> Self {
        match kind {
            BudgetKind::Tokens => StatusReason::Tokens,
            BudgetKind::Turns => StatusReason::MainTurns,
            BudgetKind::Time => StatusReason::Time,
        }
    }
}

/// How a completion claim is checked (G5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyMode {
    /// Accept the worker's claim.
    None,
    /// A read-only verifier agent reads the workspace and answers a verdict.
    #[default]
    Subagent,
    /// A check command: exit 0 passes.
    Command,
}

impl VerifyMode {
    /// The name on the wire and in flags.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::None => "none",
            VerifyMode::Subagent => "subagent",
            VerifyMode::Command => "command",
        }
    }
}

impl std::str::FromStr for VerifyMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "none" => Ok(VerifyMode::None),
            "subagent" => Ok(VerifyMode::Subagent),
            "command" => Ok(VerifyMode::Command),
            other => Err(format!(
                "unknown verification '{other}': expected none, subagent or command"
            )),
        }
    }
}

/// Optional limits (G1). `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Budgets {
    /// Tokens, the worker's and the verifier's together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Main turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// Active seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

/// What the goal has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalUsage {
    /// Tokens, the verifier's included.
    pub tokens: u64,
    /// Main turns.
    pub turns: u64,
    /// Active seconds.
    pub seconds: u64,
    /// Of `tokens`, the verifier's.
    pub verifier_tokens: u64,
    /// Of `tokens`, prompt tokens the server read from its cache (the
    /// goal's turns and its verifier's; shown apart, counted in full by
    /// the budget).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Of `tokens`, reasoning tokens (the turns' and the verifier's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// What the goal's turns and its verifier cost at the configured prices.
    #[serde(default, skip_serializing_if = "crate::model::Cost::is_zero")]
    pub cost: crate::model::Cost,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The tunables (config `[goal]`), fixed when the goal is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GoalSettings {
    /// How completion claims are checked.
    pub verify: VerifyMode,
    /// The check command of [`VerifyMode::Command`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_command: Option<String>,
    /// How long the check command may run, in seconds.
    pub verify_timeout_secs: u64,
    /// Refusals that still ask for a summary once a budget is spent
    /// (1..=3); later calls are told tools are disabled.
    pub grace_steps: u32,
    /// Repeats that pause the goal (the breaker's limit).
    pub breaker_limit: u32,
    /// The same gap list this many times in a row pauses the goal.
    pub repeated_gaps_limit: u32,
    /// A status audit every this many continuations.
    pub audit_every: u32,
}

impl Default for GoalSettings {
    fn default() -> Self {
        Self {
            verify: VerifyMode::Subagent,
            verify_command: None,
            verify_timeout_secs: 600,
            grace_steps: 1,
            breaker_limit: 3,
            repeated_gaps_limit: 5,
            audit_every: 5,
        }
    }
}

impl GoalSettings {
    /// The settings with every number in its range: grace steps 1..=3, the
    /// limits at least 1.
    pub fn clamped(mut self) -> Self {
        self.grace_steps = self.grace_steps.clamp(1, 3);
        self.breaker_limit = self.breaker_limit.max(1);
        self.repeated_gaps_limit = self.repeated_gaps_limit.max(1);
        self.audit_every = self.audit_every.max(1);
        self
    }
}

/// The last FAIL's gaps and how many times in a row they came back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapHistory {
    /// The gaps, as the verifier listed them.
    pub gaps: Vec<String>,
    /// Consecutive FAIL verdicts with exactly these gaps.
    pub repeats: u32,
}

/// A session's goal (G1). Stored whole; `revision` counts a person's edits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    /// What to achieve.
    pub objective: String,
    /// Where it stands.
    pub status: GoalStatus,
    /// Why.
    pub reason: StatusReason,
    /// Its limits.
    pub budgets: Budgets,
    /// What it used.
    pub usage: GoalUsage,
    /// Bumped by every edit a person makes (objective, budget, status):
    /// a turn that started under an older revision has its proposal
    /// discarded, and a continuation written for one is dropped.
    pub revision: u64,
    /// The tunables.
    pub settings: GoalSettings,
    /// The breaker's counters.
    pub breaker: Breaker,
    /// The verifier's last gaps.
    pub gaps: GapHistory,
    /// Continuations scheduled so far.
    pub continuations: u64,
    /// The next continuation says the goal was edited.
    pub edited: bool,
    /// The next continuation asks to call `get_goal` first (after a resume).
    pub resumed: bool,
    /// The worker claimed completion and the claim was not accepted: a
    /// breaker trip now is `no_progress_after_completion_claim`.
    pub claimed: bool,
    /// A budget stopped the goal and its one summary turn has not run yet.
    pub summary_due: bool,
    /// The verifier's latest gaps have not been shown to the worker yet.
    pub gaps_unreported: bool,
}

impl Goal {
    /// A new active goal.
    pub fn new(objective: impl Into<String>, budgets: Budgets, settings: GoalSettings) -> Self {
        Self {
            objective: objective.into(),
            status: GoalStatus::Active,
            reason: StatusReason::Created,
            budgets,
            usage: GoalUsage::default(),
            revision: 1,
            settings: settings.clamped(),
            breaker: Breaker::default(),
            gaps: GapHistory::default(),
            continuations: 0,
            edited: false,
            resumed: false,
            claimed: false,
            summary_due: false,
            gaps_unreported: false,
        }
    }

    /// Writes the next continuation and counts it: what it reports (an
    /// edit, a resume, the gaps) is not reported again.
    pub fn take_continuation(&mut self) -> String {
        self.continuations += 1;
        let text = continuation_text(self, self.continuations);
        self.edited = false;
        self.resumed = false;
        self.gaps_unreported = false;
        text
    }

    /// Writes the summary turn's message (a budget stopped the goal).
    pub fn take_summary(&mut self) -> String {
        self.continuations += 1;
        summary_text(self, self.continuations, self.spent())
    }

    /// `status(reason)`, as people read it.
    pub fn label(&self) -> String {
        format!("{}({})", self.status, self.reason.as_str())
    }

    /// Moves to `status` for `reason`.
    pub fn set(&mut self, status: GoalStatus, reason: StatusReason) {
        self.status = status;
        self.reason = reason;
    }

    /// The budget that is spent now, if any.
    pub fn spent(&self) -> Option<BudgetKind> {
        spent_budget(&self.budgets, &self.usage)
    }

    /// The goal's one-line progress, as the text output shows it after a turn.
    pub fn progress_line(&self) -> String {
        progress_line(self.status, self.reason, &self.usage, &self.budgets)
    }

    /// A person's new budgets: a goal a spent budget stopped runs again
    /// once none is spent.
    fn change_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
        if self.status == GoalStatus::BudgetLimited && self.spent().is_none() {
            self.set(GoalStatus::Active, StatusReason::BudgetRaised);
            self.summary_due = false;
            self.edited = true;
        }
    }

    /// Carries out a person's command (`/goal pause`, …). On success the
    /// goal is changed and its revision bumped; a refusal changes nothing.
    pub fn command(&mut self, command: GoalCommand) -> Result<(), GoalRefusal> {
        use GoalStatus as S;
        if self.status == S::Complete {
            return Err(GoalRefusal::Complete);
        }
        match command {
            GoalCommand::Pause => match self.status {
                S::Active => self.set(S::Paused, StatusReason::UserRequested),
                S::Paused | S::Blocked | S::BudgetLimited | S::UsageLimited | S::Complete => {
                    return Err(GoalRefusal::NotActive(self.status));
                }
            },
            GoalCommand::Resume => match self.status {
                S::Paused | S::Blocked | S::UsageLimited => {
                    self.set(S::Active, StatusReason::UserResumed);
                    self.breaker = Breaker::default();
                    self.gaps = GapHistory::default();
                    self.resumed = true;
                }
                S::BudgetLimited => return Err(GoalRefusal::BudgetSpent(self.spent())),
                S::Active | S::Complete => return Err(GoalRefusal::AlreadyActive),
            },
            GoalCommand::Edit { objective } => {
                let objective = objective.trim();
                if objective.is_empty() {
                    return Err(GoalRefusal::EmptyObjective);
                }
                self.objective = objective.to_string();
                self.edited = true;
                self.gaps = GapHistory::default();
            }
            GoalCommand::Budget(budgets) => self.change_budgets(budgets),
            GoalCommand::TokenBudget(tokens) => self.change_budgets(Budgets {
                tokens,
                ..self.budgets
            }),
            GoalCommand::Complete => self.set(S::Complete, StatusReason::UserMarked),
            GoalCommand::Blocked => self.set(S::Blocked, StatusReason::UserMarked),
        }
        self.revision += 1;
        Ok(())
    }
}

/// What a person can do to a goal (besides setting and clearing it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum GoalCommand {
    /// Stop continuing for now.
    Pause,
    /// Continue again.
    Resume,
    /// Replace the objective.
    Edit {
        /// The new objective.
        objective: String,
    },
    /// Replace the budgets; a budget-limited goal whose spent budget is
    /// raised or cleared becomes active.
    Budget(Budgets),
    /// Replace the token budget alone (`None` clears it), as `Budget`.
    TokenBudget(Option<u64>),
    /// Mark it complete by hand.
    Complete,
    /// Mark it blocked by hand.
    Blocked,
}

/// What `Op::Goal` asks of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GoalAction {
    /// Set a new goal (replacing a complete one); work starts at once.
    Set {
        /// What to achieve.
        objective: String,
        /// Its limits.
        #[serde(default)]
        budgets: Budgets,
        /// Its tunables (verification, grace steps, breaker limits).
        #[serde(default)]
        settings: GoalSettings,
    },
    /// Report the goal (`goal.updated`).
    Show,
    /// A person's command.
    Command {
        /// The command.
        command: GoalCommand,
    },
    /// Remove the goal.
    Clear,
}

/// Why a person's command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalRefusal {
    /// A complete goal is final: clear it and set a new one. Not
    /// retryable.
    #[error("the goal is complete, which is final; clear it and set a new one")]
    Complete,
    /// Only an active goal can be paused. Not retryable until the goal
    /// is active again.
    #[error("the goal is {0}, not active")]
    NotActive(GoalStatus),
    /// The goal is already active. Not retryable: there is nothing to
    /// resume.
    #[error("the goal is already active")]
    AlreadyActive,
    /// A budget-limited goal resumes by raising or clearing its budget.
    /// Not retryable until then.
    #[error("the goal's {} budget is spent: raise or clear it (`/goal budget=…`, `cadre goal budget`)", .0.map_or("", BudgetKind::as_str))]
    BudgetSpent(Option<BudgetKind>),
    /// An objective must say something. Not retryable as is.
    #[error("the objective is empty")]
    EmptyObjective,
}

/// A goal's one-line progress: `goal active(created): tokens 120/5000,
/// turns 2, time 14s`.
pub fn progress_line(
    status: GoalStatus,
    reason: StatusReason,
    usage: &GoalUsage,
    budgets: &Budgets,
) -> String {
    let of = |used: u64, limit: Option<u64>| match limit {
        Some(limit) => format!("{used}/{limit}"),
        None => used.to_string(),
    };
    let mut line = format!(
        "goal {status}({}): tokens {}",
        reason.as_str(),
        of(usage.tokens, budgets.tokens)
    );
    if usage.cached_tokens > 0 || usage.reasoning_tokens > 0 {
        line.push_str(&format!(
            " ({} cached, {} reasoning)",
            usage.cached_tokens, usage.reasoning_tokens
        ));
    }
    line.push_str(&format!(
        ", turns {}, time {}s",
        of(usage.turns, budgets.turns),
        of(usage.seconds, budgets.seconds),
    ));
    if !usage.cost.is_zero() {
        line.push_str(&format!(", cost {}", usage.cost));
    }
    line
}

/// Reads a token count as people write it: `50000`, `50K`, `1.5M`.
pub fn parse_tokens(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1_000.0),
        (i, 'm' | 'M') => (&text[..i], 1_000_000.0),
        _ => (text, 1.0),
    };
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * scale).round() as u64)
}

#[cfg(test)]
mod tests;
