//! The machine's inputs, effects and bookkeeping types.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{InstanceId, Report, State};
use crate::model::{Check, StepId, Workflow};

/// A result stored by an earlier run of the same workflow, by instance key.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// Verified, finalized (no check) or failed.
    pub state: State,
    /// The accepted output.
    pub output: Option<String>,
    /// Why it failed.
    pub reason: Option<String>,
}

/// What the machine starts with besides the workflow.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Instances dispatched at once (the workflow's, or lower by flag).
    pub max_parallel: usize,
    /// Results of an earlier run, by instance key.
    pub stored: HashMap<String, Stored>,
    /// Run again what failed before (a stored failure is not taken).
    pub retry_failed: bool,
    /// Where outputs larger than [`FILE_THRESHOLD`] are written.
    pub outputs_dir: PathBuf,
}

/// What to cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Everything.
    Run,
    /// Every instance of a step.
    Step(StepId),
    /// One instance.
    Instance(InstanceId),
}

/// What happens to the machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Begin: dispatch what is ready.
    Start,
    /// An instance's agent answered.
    Answered {
        /// The instance.
        id: InstanceId,
        /// Its final answer.
        output: String,
        /// The tool calls it made, as `name subject → outcome`: an answer
        /// with a check and no call behind it is a claim without evidence.
        calls: Vec<String>,
    },
    /// An attempt ended without an answer (the turn failed, timed out,
    /// crashed, or the agent could not start).
    AttemptFailed {
        /// The instance.
        id: InstanceId,
        /// Why.
        reason: String,
    },
    /// An attempt's model requests failed in a way that may pass later
    /// (429, 5xx, a dropped connection, after the model client's own
    /// retries): the instance goes back to the queue, behind what waits,
    /// without spending one of its `retries` (at most
    /// [`MAX_REQUEUES`](super::MAX_REQUEUES) times, then it is a failed
    /// attempt).
    Requeue {
        /// The instance.
        id: InstanceId,
        /// Why.
        reason: String,
    },
    /// An instance's check ran.
    Checked {
        /// The instance.
        id: InstanceId,
        /// Exit 0.
        passed: bool,
        /// What it printed, or why it did not run.
        detail: String,
    },
    /// A `merge = true` instance's worktree was merged back (`Ok`, the
    /// files brought back) or not (`Err`, why: it fails the instance).
    Merged {
        /// The instance.
        id: InstanceId,
        /// What came of it.
        result: Result<Vec<String>, MergeFailure>,
    },
    /// Cancel something.
    Cancel(Target),
    /// Tokens spent by a step or one of its sub-agents.
    Tokens(u64),
    /// Sub-agents started by steps.
    AgentsStarted(u64),
    /// Stop dispatching: the model endpoint refused in a way no retry
    /// fixes (authentication, an exhausted quota). What runs finishes; what
    /// waits is cancelled with the reason.
    Halt(String),
}

/// Why a `merge = true` instance's worktree was not merged back. Its text
/// is the failed instance's reason. None is retryable: the instance fails,
/// and a person decides (`--retry-failed` runs it again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeFailure {
    /// The step had no worktree to merge. Not retryable.
    #[error("the step has no worktree")]
    NoWorktree,
    /// The step's agent ended before its changes could be merged. Not
    /// retryable.
    #[error("the step ended before its changes could be merged")]
    Ended,
    /// These files changed in the workspace too; nothing was brought
    /// back. Not retryable: a person resolves the conflict.
    #[error(
        "merge conflict: {} changed in the workspace too; nothing was brought back, and the step's worktree is kept at {} (branch {branch})",
        .files.join(", "),
        .kept.display()
    )]
    Conflict {
        /// The files, relative to the repository.
        files: Vec<String>,
        /// The worktree, kept for a person.
        kept: PathBuf,
        /// Its branch.
        branch: String,
    },
    /// The step may not write these files (each with why); nothing was
    /// brought back. Not retryable.
    #[error(
        "merge refused: {}; nothing was brought back, and the step's worktree is kept at {} (branch {branch})",
        .files.join(", "),
        .kept.display()
    )]
    Refused {
        /// The files, each with why.
        files: Vec<String>,
        /// The worktree, kept for a person.
        kept: PathBuf,
        /// Its branch.
        branch: String,
    },
    /// git or the file system failed. Not retryable.
    #[error("the merge failed: {why}; the step's worktree is kept at {}", .kept.display())]
    Failed {
        /// What failed.
        why: String,
        /// The worktree, kept for a person.
        kept: PathBuf,
    },
}

/// What the actors must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// A fan-out step's instances now exist.
    Expanded {
        /// The step.
        step: StepId,
        /// Its items.
        items: Vec<Value>,
    },
    /// An instance changed state (`index` is `None` for a fan-out step
    /// blocked or cancelled before it was expanded).
    State {
        /// The step.
        step: StepId,
        /// The instance's index.
        index: Option<usize>,
        /// The new state.
        state: State,
        /// Why, for failed, blocked, cancelled and retried instances, and
        /// for restored ones.
        reason: Option<String>,
    },
    /// Start an agent on an instance.
    Dispatch {
        /// The instance.
        id: InstanceId,
        /// The rendered prompt.
        prompt: String,
        /// The rendered write scope (empty: the caller's).
        scope: Vec<String>,
        /// The instance's key.
        key: String,
        /// 1 for the first attempt.
        attempt: u32,
    },
    /// Run an instance's check.
    RunCheck {
        /// The instance.
        id: InstanceId,
        /// The check, its references rendered as variables' expansions.
        check: Check,
        /// The variables the check runs with (`CADRE_ITEM`, …).
        env: Vec<(String, String)>,
    },
    /// Bring an instance's worktree changes back into the workspace; its
    /// answer was accepted and its check (if any) passed.
    Merge {
        /// The instance.
        id: InstanceId,
    },
    /// Stop an instance's agent (or check).
    Stop {
        /// The instance.
        id: InstanceId,
    },
    /// An instance's output was accepted (finalized).
    Output {
        /// The instance.
        id: InstanceId,
        /// The output.
        output: String,
        /// Where to store it when it is larger than [`FILE_THRESHOLD`].
        file: Option<PathBuf>,
    },
    /// Nothing is left to run.
    Done(Report),
}

impl Effect {
    /// The instance whose current attempt this effect ends, if it has one
    /// running: told to stop, or moved to a state in which the machine
    /// holds no attempt of it (back to pending for a retry, a terminal
    /// state, or finalized with no check to follow). A step
    /// actor waits after its answer for what comes next (a check, a merge,
    /// or its end), so every such effect must end it: one that did not
    /// left the run waiting for an actor nobody would stop.
    pub fn ends_attempt(&self, workflow: &Workflow) -> Option<InstanceId> {
        match self {
            Effect::Stop { id } => Some(*id),
            Effect::State {
                step,
                index: Some(index),
                state,
                ..
            } => {
                let id = InstanceId {
                    step: *step,
                    index: *index,
                };
                let def = &workflow.steps[*step];
                match state {
                    State::Pending
                    | State::Verified
                    | State::Failed
                    | State::Blocked
                    | State::Cancelled => Some(id),
                    // With a check, its check (and merge) follow; without
                    // one, a merging step is finalized only once merged.
                    State::Finalized => def.check.is_none().then_some(id),
                    State::Dispatched => None,
                }
            }
            Effect::State { index: None, .. }
            | Effect::Expanded { .. }
            | Effect::Dispatch { .. }
            | Effect::RunCheck { .. }
            | Effect::Merge { .. }
            | Effect::Output { .. }
            | Effect::Done(_) => None,
        }
    }
}

/// How a step as a whole stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStatus {
    /// Waiting for the steps it needs.
    Waiting,
    /// Its instances exist and are not all done.
    Running,
    /// It has a result.
    Succeeded,
    /// It has none; the reason says why.
    Failed(String),
    /// A step it needs has no result.
    Blocked(String),
    /// Cancelled.
    Cancelled(String),
}

/// One instance as the machine keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Its item (`None` without `for_each`).
    pub item: Option<Value>,
    /// Its state.
    pub state: State,
    /// Why it failed, was blocked, cancelled or restored.
    pub reason: Option<String>,
    /// Attempts started.
    pub attempts: u32,
    /// Its accepted output.
    pub output: Option<String>,
    /// Its output as JSON (a JSON step).
    pub json: Option<Value>,
    /// Its key, once rendered.
    pub key: Option<String>,
    /// The tool calls of its accepted attempt (`name subject → outcome`).
    pub calls: Vec<String>,
    /// Taken from an earlier run.
    pub restored: bool,
    /// Times it went back to the queue after a transient model failure.
    pub requeues: u32,
    /// Its worktree is being merged back (it holds its slot, and its result
    /// does not count yet).
    pub merging: bool,
}

impl Instance {
    pub(super) fn new(item: Option<Value>) -> Self {
        Self {
            item,
            state: State::Pending,
            reason: None,
            attempts: 0,
            output: None,
            json: None,
            key: None,
            calls: Vec::new(),
            restored: false,
            requeues: 0,
            merging: false,
        }
    }

    /// Whether its result counts: verified, or finalized with no check.
    pub(super) fn succeeded(&self, has_check: bool) -> bool {
        self.state == State::Verified || (self.state == State::Finalized && !has_check)
    }
}

/// One step as the machine keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRun {
    /// How it stands.
    pub status: StepStatus,
    /// Its instances (empty until expanded).
    pub instances: Vec<Instance>,
}
