//! Budgets (G1, G7): which one is spent, and the guard every tool call
//! passes while a goal's turn runs.
//!
//! Once a budget is spent mid-turn, a call is refused with an instruction
//! to stop calling tools and summarize, at most `grace_steps` times; after
//! that every refusal says tools are disabled and the turn ends once the
//! calls of that response are answered. So a spent budget is overrun by
//! at most `grace_steps + 1` model requests and by no tool call at all.

use std::time::Duration;

use super::{BudgetKind, Budgets, GoalUsage};

/// The first budget (tokens, then turns, then time) that usage has reached.
pub fn spent_budget(budgets: &Budgets, usage: &GoalUsage) -> Option<BudgetKind> {
    let reached = |limit: Option<u64>, used: u64| limit.is_some_and(|limit| used >= limit);
    if reached(budgets.tokens, usage.tokens) {
        Some(BudgetKind::Tokens)
    } else if reached(budgets.turns, usage.turns) {
        Some(BudgetKind::Turns)
    } else if reached(budgets.seconds, usage.seconds) {
        Some(BudgetKind::Time)
    } else {
        None
    }
}

/// The guard of one turn: what was left of the budgets when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetGuard {
    /// Tokens left when the turn started; `None` is no token budget.
    tokens_left: Option<u64>,
    /// Time left when the turn started; `None` is no time budget.
    time_left: Option<Duration>,
    grace_steps: u32,
    refusals: u32,
}

/// Whether one tool call may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardDecision {
    /// The budget holds.
    Allow,
    /// Spent, within the grace steps: refuse, asking for a summary now.
    Summarize(String),
    /// Spent, past the grace steps: tools are disabled; end the turn.
    Disabled(String),
}

impl BudgetGuard {
    /// A guard for a turn that starts with `usage` against `budgets`.
    pub fn new(budgets: &Budgets, usage: &GoalUsage, grace_steps: u32) -> Self {
        Self {
            tokens_left: budgets.tokens.map(|t| t.saturating_sub(usage.tokens)),
            time_left: budgets
                .seconds
                .map(|s| Duration::from_secs(s.saturating_sub(usage.seconds))),
            grace_steps: grace_steps.clamp(1, 3),
            refusals: 0,
        }
    }

    /// Whether the guard can refuse anything at all.
    pub fn limits_anything(&self) -> bool {
        self.tokens_left.is_some() || self.time_left.is_some()
    }

    /// Decides one call, given the turn's tokens and time so far.
    pub fn before_call(&mut self, tokens: u64, elapsed: Duration) -> GuardDecision {
        let spent = self.tokens_left.is_some_and(|left| tokens >= left)
            || self.time_left.is_some_and(|left| elapsed >= left);
        if !spent {
            return GuardDecision::Allow;
        }
        self.refusals += 1;
        if self.refusals <= self.grace_steps {
            GuardDecision::Summarize(
                "the goal's budget is spent: do not call any more tools. Reply now with a short \
                 summary of what is done and what is left."
                    .into(),
            )
        } else {
            GuardDecision::Disabled(
                "tools are disabled: the goal's budget is spent. Reply with your summary, \
                 without calling tools."
                    .into(),
            )
        }
    }
}
