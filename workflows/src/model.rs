//! A workflow that passed validation: typed, its references resolved to
//! step indices, its templates parsed.

use std::collections::BTreeMap;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use serde_json::Value;

use crate::template::Template;

/// The default number of step instances running at once.
pub const DEFAULT_MAX_PARALLEL: u32 = 4;

/// The default cap, in bytes, on one output handed forward into a template
/// or a report; a larger output is stored as a file and referenced by path.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// A step's index in [`Workflow::steps`].
pub type StepId = usize;

/// A valid workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// Its name.
    pub name: String,
    /// Step instances running at once (before `--max-parallel`).
    pub max_parallel: u32,
    /// The widest posture a step runs with; the caller's narrower one wins.
    pub posture: Option<Posture>,
    /// The steps' default and widest mode.
    pub mode: Mode,
    /// Variables: the file's defaults with `--var` overrides applied.
    pub vars: BTreeMap<String, String>,
    /// The steps, in file order.
    pub steps: Vec<Step>,
    /// The cap on an output handed forward.
    pub max_output_bytes: usize,
    /// The run's budget.
    pub budget: Budget,
}

/// A whole run's limits, nested sub-agents included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// Model tokens (prompt and completion).
    pub tokens: Option<u64>,
    /// Agents started.
    pub agents: Option<u64>,
}

/// The shape of a step's final answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputKind {
    /// Any text.
    #[default]
    Text,
    /// It must parse as JSON (a fenced ```json block is accepted).
    Json,
}

/// What a fan-out step runs once per.
#[derive(Debug, Clone, PartialEq)]
pub enum ForEach {
    /// A list written in the file.
    Literal(Vec<Value>),
    /// The JSON list an earlier step answered.
    Output(StepId),
}

/// How a step's result is checked before it is handed forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// A command run in the workspace under a read-only sandbox; exit 0
    /// verifies.
    Command(String),
    /// A read-only verifier agent judges the answer against the step's
    /// prompt and the calls behind it; `VERDICT: PASS` verifies.
    Verifier,
}

impl Check {
    /// How it is shown: the command, or `verifier`.
    pub fn describe(&self) -> String {
        match self {
            Check::Command(command) => format!("`{command}`"),
            Check::Verifier => "the verifier".to_string(),
        }
    }
}

/// What a fan-out does when an item fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Run every item; the step has a result when `min_success` succeeded.
    #[default]
    Continue,
    /// Stop starting items once `min_success` can no longer be reached, and
    /// cancel the running ones.
    FailFast,
}

/// Where a step runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Isolation {
    /// In the workspace.
    #[default]
    None,
    /// In a git worktree of its own.
    Worktree,
}

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Its unique name.
    pub name: String,
    /// The steps that must have a result first.
    pub needs: Vec<StepId>,
    /// The prompt.
    pub prompt: Template,
    /// Fan-out.
    pub for_each: Option<ForEach>,
    /// The answer's shape.
    pub output: OutputKind,
    /// A JSON Schema the answer must match.
    pub output_schema: Option<Value>,
    /// The step's mode (the workflow's when not set).
    pub mode: Mode,
    /// A configured role.
    pub role: Option<String>,
    /// A model name for its requests.
    pub model: Option<String>,
    /// Globs it may write; empty means everything the caller may.
    pub scope: Vec<Template>,
    /// Its completion check.
    pub check: Option<Check>,
    /// Wall-clock limit per attempt.
    pub timeout: Option<Duration>,
    /// Limit on a stretch with no progress.
    pub idle_timeout: Option<Duration>,
    /// Further attempts after a failure.
    pub retries: u32,
    /// Fan-out failure policy.
    pub on_failure: OnFailure,
    /// Items that must succeed (default: all).
    pub min_success: Option<u32>,
    /// The cap on its output handed forward.
    pub max_output_bytes: usize,
    /// Where it runs.
    pub isolation: Isolation,
    /// Bring a worktree's changes back.
    pub merge: bool,
}

impl Workflow {
    /// The index of the step called `name`.
    pub fn step_id(&self, name: &str) -> Option<StepId> {
        self.steps.iter().position(|s| s.name == name)
    }

    /// Whether step `a` needs step `b`, directly or through others.
    pub fn depends_on(&self, a: StepId, b: StepId) -> bool {
        let mut stack = vec![a];
        let mut seen = vec![false; self.steps.len()];
        while let Some(s) = stack.pop() {
            for &n in &self.steps[s].needs {
                if n == b {
                    return true;
                }
                if !seen[n] {
                    seen[n] = true;
                    stack.push(n);
                }
            }
        }
        false
    }
}
