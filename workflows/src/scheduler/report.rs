//! What a run ends with: counts per state, each step's outcome, and what
//! comes next (M5: completed / blocked / next). "Every step ran" and
//! "every check passed" are reported apart.

use std::collections::BTreeMap;

use cadre_runtime::store::RunStatus;
use serde::Serialize;

use super::{InstanceId, Scheduler, State, StepStatus, instance_name};

/// Instances per state.
pub type Counts = BTreeMap<State, usize>;

/// One instance in a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceReport {
    /// `review[3]` or `summary`.
    pub name: String,
    /// Its state.
    pub state: State,
    /// Why it failed, was blocked or cancelled.
    pub reason: Option<String>,
    /// Its accepted output.
    pub output: Option<String>,
    /// Taken from an earlier run.
    pub restored: bool,
    /// The tool calls it really made (`name subject → outcome`).
    pub calls: Vec<String>,
}

/// Where a step stands in a report: its [`StepStatus`] without the
/// reason, which the report carries beside it. Serialized and shown as the
/// lowercase word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    /// It waits for the steps it needs (a run that goes on).
    Waiting,
    /// Its instances exist and are not all done (a run that goes on).
    Running,
    /// It has a result.
    Succeeded,
    /// It has none: an instance failed.
    Failed,
    /// It has none: a step it needs has none.
    Blocked,
    /// It was cancelled.
    Cancelled,
}

impl StepOutcome {
    /// The word serialized and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            StepOutcome::Waiting => "waiting",
            StepOutcome::Running => "running",
            StepOutcome::Succeeded => "succeeded",
            StepOutcome::Failed => "failed",
            StepOutcome::Blocked => "blocked",
            StepOutcome::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so a width (`{:<10}` in the run's table) applies.
        f.pad(self.as_str())
    }
}

impl StepStatus {
    /// Its outcome, and the reason a step without a result has.
    pub fn outcome(&self) -> (StepOutcome, Option<&str>) {
        match self {
            StepStatus::Waiting => (StepOutcome::Waiting, None),
            StepStatus::Running => (StepOutcome::Running, None),
            StepStatus::Succeeded => (StepOutcome::Succeeded, None),
            StepStatus::Failed(why) => (StepOutcome::Failed, Some(why)),
            StepStatus::Blocked(why) => (StepOutcome::Blocked, Some(why)),
            StepStatus::Cancelled(why) => (StepOutcome::Cancelled, Some(why)),
        }
    }
}

/// One step in a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// The step.
    pub name: String,
    /// `succeeded`, `failed`, `blocked`, `cancelled` (or `waiting` and
    /// `running` while a run goes on).
    pub status: StepOutcome,
    /// Why it has no result.
    pub reason: Option<String>,
    /// Its instances.
    pub instances: Vec<InstanceReport>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// `Completed` (every step has a result), `Failed` or `Cancelled`;
    /// never `Running`.
    pub status: RunStatus,
    /// Instances per state.
    pub counts: Counts,
    /// Every instance reached an answer (finalized or verified).
    pub all_ran: bool,
    /// Every instance with a check passed it.
    pub all_checks_passed: bool,
    /// Why dispatching stopped early (a budget), if it did.
    pub halted: Option<String>,
    /// Tokens spent.
    pub tokens: u64,
    /// Of `tokens`, the cached and reasoning ones, and the cost, of the
    /// steps' turns, their sub-agents and their verifiers since the run
    /// was last taken up (filled in by the engine).
    #[serde(skip_serializing_if = "is_unpriced")]
    pub usage: cadre_runtime::protocol::Usage,
    /// Each step.
    pub steps: Vec<StepReport>,
}

fn is_unpriced(usage: &cadre_runtime::protocol::Usage) -> bool {
    *usage == cadre_runtime::protocol::Usage::default()
}

impl Scheduler {
    /// The run as it stands.
    pub fn report(&self) -> Report {
        let mut counts: Counts = State::ALL.into_iter().map(|s| (s, 0)).collect();
        let mut steps = Vec::new();
        let mut all_ran = true;
        let mut all_checks_passed = true;
        for (s, run) in self.steps.iter().enumerate() {
            let has_check = self.workflow.steps[s].check.is_some();
            let mut instances = Vec::new();
            for (index, inst) in run.instances.iter().enumerate() {
                *counts.entry(inst.state).or_default() += 1;
                all_ran &= matches!(inst.state, State::Finalized | State::Verified);
                all_checks_passed &= !has_check || inst.state == State::Verified;
                instances.push(InstanceReport {
                    name: instance_name(&self.workflow, InstanceId { step: s, index }),
                    state: inst.state,
                    reason: inst.reason.clone(),
                    output: inst.output.clone(),
                    restored: inst.restored,
                    calls: inst.calls.clone(),
                });
            }
            if run.instances.is_empty() && run.status != StepStatus::Succeeded {
                all_ran = false;
            }
            let (status, reason) = run.status.outcome();
            steps.push(StepReport {
                name: self.workflow.steps[s].name.clone(),
                status,
                reason: reason.map(str::to_string),
                instances,
            });
        }
        let status = if self.cancelled {
            RunStatus::Cancelled
        } else if steps.iter().all(|s| s.status == StepOutcome::Succeeded) {
            RunStatus::Completed
        } else {
            RunStatus::Failed
        };
        Report {
            status,
            counts,
            all_ran,
            all_checks_passed,
            halted: self.halted.clone(),
            tokens: self.tokens,
            usage: cadre_runtime::protocol::Usage::default(),
            steps,
        }
    }
}

impl Report {
    /// The report as a model or a person reads it: completed steps with
    /// their outputs (each cut to `cap` bytes), failed and blocked ones
    /// with their causes, and what is next.
    pub fn render(&self, cap: usize) -> String {
        let cut = |text: &str| {
            if text.len() <= cap {
                return text.to_string();
            }
            let mut at = cap;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            format!("{}… ({} bytes in all)", &text[..at], text.len())
        };
        let mut out = format!("workflow {}\n", self.status);
        let count = |state: State| self.counts.get(&state).copied().unwrap_or(0);
        out.push_str(&format!(
            "instances: {} verified, {} finalized, {} failed, {} blocked, {} cancelled; every step ran: {}; every check passed: {}\n",
            count(State::Verified),
            count(State::Finalized),
            count(State::Failed),
            count(State::Blocked),
            count(State::Cancelled),
            if self.all_ran { "yes" } else { "no" },
            if self.all_checks_passed { "yes" } else { "no" },
        ));
        if let Some(why) = &self.halted {
            out.push_str(&format!("stopped early: {why}\n"));
        }
        out.push_str("\nCompleted:\n");
        let mut any = false;
        for step in self
            .steps
            .iter()
            .filter(|s| s.status == StepOutcome::Succeeded)
        {
            for inst in &step.instances {
                if matches!(inst.state, State::Verified | State::Finalized) {
                    any = true;
                    out.push_str(&format!(
                        "- {} ({}{}): {}\n",
                        inst.name,
                        inst.state,
                        if inst.restored {
                            ", from an earlier run"
                        } else {
                            ""
                        },
                        cut(inst.output.as_deref().unwrap_or_default().trim())
                    ));
                    if !inst.restored {
                        out.push_str(&format!("  calls made: {}\n", calls_line(&inst.calls)));
                    }
                }
            }
            if step.instances.is_empty() {
                any = true;
                out.push_str(&format!("- {} (no items)\n", step.name));
            }
        }
        if !any {
            out.push_str("- none\n");
        }
        out.push_str("\nFailed or blocked:\n");
        let mut problems = false;
        for step in &self.steps {
            for inst in step
                .instances
                .iter()
                .filter(|i| matches!(i.state, State::Failed | State::Blocked | State::Cancelled))
            {
                problems = true;
                out.push_str(&format!(
                    "- {} {}: {}\n",
                    inst.name,
                    inst.state,
                    inst.reason.as_deref().unwrap_or("no reason given")
                ));
            }
            if step.instances.is_empty()
                && let Some(why) = &step.reason
            {
                problems = true;
                out.push_str(&format!("- {} {}: {why}\n", step.name, step.status));
            }
        }
        if !problems {
            out.push_str("- none\n");
        }
        out.push_str("\nNext:\n");
        let next = match self.status {
            RunStatus::Completed => "every step has a result; integrate them".to_string(),
            RunStatus::Cancelled => {
                "the run was cancelled; resume it to run what is unfinished".to_string()
            }
            // A report of a run that goes on says what stops it so far.
            RunStatus::Failed | RunStatus::Running => {
                let failed: Vec<&str> = self
                    .steps
                    .iter()
                    .filter(|s| s.status == StepOutcome::Failed)
                    .map(|s| s.name.as_str())
                    .collect();
                format!(
                    "fix what made {} fail, then resume the run with --retry-failed; blocked steps run once what they need has a result",
                    if failed.is_empty() {
                        "the run".to_string()
                    } else {
                        failed.join(", ")
                    }
                )
            }
        };
        out.push_str(&format!("- {next}\n"));
        out
    }
}

/// The most calls a report lists per instance.
const CALLS_LISTED: usize = 12;

/// The calls an instance really made, as one line: the evidence behind
/// its answer, whatever the answer claims.
fn calls_line(calls: &[String]) -> String {
    if calls.is_empty() {
        return "none".into();
    }
    let mut line = calls
        .iter()
        .take(CALLS_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    if calls.len() > CALLS_LISTED {
        line.push_str(&format!("; and {} more", calls.len() - CALLS_LISTED));
    }
    line
}
