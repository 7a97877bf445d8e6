//! Continuations (G6): the host-written messages that keep a goal going,
//! admitted to the session's queue like any message (so a crash leaves
//! them stored and a resume runs them once), and the recheck each one
//! passes just before it runs.
//!
//! A continuation's text opens with a header line naming the goal
//! revision it was written for and its number; the recheck drops it when
//! the goal changed since.

use super::{BudgetKind, Goal, GoalStatus};

/// The tag a continuation's text is wrapped in.
const TAG: &str = "cadre_internal_context";

/// What a continuation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContinuationKind {
    /// Keep working on the goal.
    Continue,
    /// A budget stopped the goal: summarize, with no tools.
    Summary,
}

impl ContinuationKind {
    fn as_str(self) -> &'static str {
        match self {
            ContinuationKind::Continue => "continue",
            ContinuationKind::Summary => "summary",
        }
    }
}

/// A continuation's header, read back from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContinuationHeader {
    /// The goal revision it was written for.
    pub revision: u64,
    /// Its number (1 for the first continuation of the goal).
    pub n: u64,
    /// What it asks for.
    pub kind: ContinuationKind,
}

impl ContinuationHeader {
    fn line(&self) -> String {
        format!(
            "<{TAG} source=\"goal\" revision=\"{}\" n=\"{}\" kind=\"{}\">",
            self.revision,
            self.n,
            self.kind.as_str()
        )
    }

    /// Reads the header of a continuation's text.
    pub fn parse(text: &str) -> Option<Self> {
        let first = text.lines().next()?.trim();
        let inner = first
            .strip_prefix(&format!("<{TAG} source=\"goal\" "))?
            .strip_suffix('>')?;
        // Each name with the space before it: `n="` is also the end of
        // `revision="`.
        let inner = format!(" {inner}");
        let attr = |name: &str| -> Option<&str> {
            let start = inner.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = start + inner[start..].find('"')?;
            Some(&inner[start..end])
        };
        let kind = match attr("kind")? {
            "continue" => ContinuationKind::Continue,
            "summary" => ContinuationKind::Summary,
            _ => return None,
        };
        Some(Self {
            revision: attr("revision")?.parse().ok()?,
            n: attr("n")?.parse().ok()?,
            kind,
        })
    }
}

fn wrap(header: ContinuationHeader, body: &str) -> String {
    format!("{}\n{}\n</{TAG}>", header.line(), body.trim_end())
}

/// The full contract, given once, on the first continuation.
fn contract(goal: &Goal) -> String {
    let mut text = format!(
        "You are working on a goal that spans many turns. Objective:\n{}\n\n\
         Work toward it with your tools, one concrete step after another. The host continues \
         you after each turn until the goal settles. When you believe the objective is fully \
         met, call update_goal with status=\"complete\" and a claim saying what you did and \
         how it can be checked; a separate read-only verifier then checks the claim against \
         the workspace, and its gaps come back to you if it is not met. If you cannot go on \
         (missing access, a decision only the user can make), call update_goal with \
         status=\"blocked\" and say why. Do not claim completion you have not checked. \
         Call get_goal to read the goal, its budgets and its usage at any time.",
        goal.objective
    );
    let b = &goal.budgets;
    if b.tokens.is_some() || b.turns.is_some() || b.seconds.is_some() {
        text.push_str(&format!(
            "\nBudgets: tokens {}, turns {}, seconds {}. When a budget is spent your tools are \
             refused: then stop and summarize.",
            b.tokens.map_or("unlimited".into(), |t| t.to_string()),
            b.turns.map_or("unlimited".into(), |t| t.to_string()),
            b.seconds.map_or("unlimited".into(), |t| t.to_string()),
        ));
    }
    text
}

/// The text of continuation number `n` of `goal` (its counters as they
/// are before it is scheduled): the contract the first time, a short line
/// after, with what changed since ("goal updated", a resume, the
/// verifier's gaps, a status audit, a nudge).
pub fn continuation_text(goal: &Goal, n: u64) -> String {
    let header = ContinuationHeader {
        revision: goal.revision,
        n,
        kind: ContinuationKind::Continue,
    };
    let mut parts = Vec::new();
    if n == 1 {
        parts.push(contract(goal));
    } else if goal.edited {
        parts.push(format!(
            "The goal was updated. Objective now:\n{}\nCall get_goal to read it whole, then \
             continue.",
            goal.objective
        ));
    } else if goal.resumed {
        parts.push(
            "The goal was resumed. Call get_goal first to see where it stands, then continue."
                .to_string(),
        );
    } else {
        parts.push(
            "Continue working on the goal. Call update_goal with status=\"complete\" once it is \
             met, or status=\"blocked\" if you cannot go on."
                .to_string(),
        );
    }
    if goal.gaps_unreported && !goal.gaps.gaps.is_empty() {
        let list: Vec<String> = goal.gaps.gaps.iter().map(|g| format!("- {g}")).collect();
        parts.push(format!(
            "The verifier checked your completion claim and found the goal not met yet. Gaps:\n{}",
            list.join("\n")
        ));
    }
    if n > 1 && (n - 1).is_multiple_of(u64::from(goal.settings.audit_every)) {
        parts.push(
            "Status audit: before going on, list briefly what is done and what remains against \
             the objective, and whether the current approach is working."
                .to_string(),
        );
    }
    if goal.breaker.count > 0 {
        parts.push(format!(
            "Do not spin: {} of your last turns made no progress (the same reply, no tool call, \
             or the same calls with the same results). Change your approach, or call \
             update_goal with status=\"blocked\" and say why.",
            goal.breaker.count
        ));
    }
    wrap(header, &parts.join("\n\n"))
}

/// The text of the one summary turn after a budget stop (no tools run in it).
pub fn summary_text(goal: &Goal, n: u64, spent: Option<BudgetKind>) -> String {
    let header = ContinuationHeader {
        revision: goal.revision,
        n,
        kind: ContinuationKind::Summary,
    };
    wrap(
        header,
        &format!(
            "The goal's {} budget is spent and work on it has stopped. Tools are disabled for \
             this turn. Summarize what is done and what is left of the objective, and say that \
             the user can raise the budget to continue.",
            spent.map_or("", BudgetKind::as_str)
        ),
    )
}

/// What the recheck needs to know, just before a continuation runs.
#[derive(Debug, Clone, Copy)]
pub struct RecheckInput<'a> {
    /// The goal as stored now.
    pub goal: Option<&'a Goal>,
    /// The continuation's header.
    pub header: ContinuationHeader,
    /// A person's message waits in the queue.
    pub user_waiting: bool,
    /// Something the goal must wait for (a questionnaire, an approval, a
    /// background sub-agent), named.
    pub dependency: Option<&'a str>,
}

/// What to do with the continuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recheck {
    /// Run it.
    Run,
    /// Run it as the summary turn, with no tools.
    RunSummary,
    /// Do not run it (it is marked done): why.
    Drop(&'static str),
    /// Do not run it now: the goal waits for this. A new continuation is
    /// scheduled once the dependency clears.
    Wait(String),
    /// Do not run it: this budget is spent; the goal becomes budget-limited.
    BudgetLimited(BudgetKind),
}

/// Decides whether a continuation runs (G6).
pub fn recheck(input: RecheckInput<'_>) -> Recheck {
    let Some(goal) = input.goal else {
        return Recheck::Drop("the goal was cleared");
    };
    if input.header.revision != goal.revision {
        return Recheck::Drop("the goal changed after this continuation was written");
    }
    if input.header.kind == ContinuationKind::Summary {
        return if goal.status == GoalStatus::BudgetLimited && goal.summary_due {
            Recheck::RunSummary
        } else {
            Recheck::Drop("no summary is due")
        };
    }
    if goal.status != GoalStatus::Active {
        return Recheck::Drop("the goal is not active");
    }
    if let Some(kind) = goal.spent() {
        return Recheck::BudgetLimited(kind);
    }
    if input.user_waiting {
        return Recheck::Drop("a message from the user goes first");
    }
    if let Some(what) = input.dependency {
        return Recheck::Wait(what.to_string());
    }
    Recheck::Run
}
