//! The schedule as a pure machine (W3, W4, W9–W11): `step(input) ->
//! effects`, no I/O, no clock.
//!
//! Each step becomes instances (one, or one per `for_each` item, expanded
//! when the steps it needs have results). An instance goes
//! `pending → dispatched → finalized → verified | failed | blocked |
//! cancelled`: *finalized* when its agent answered (and the answer parsed
//! and matched its schema), *verified* when its check passed. A step
//! without a check ends finalized. Only verified results are handed forward
//! from a step with a check; only finalized or verified ones at all.
//!
//! At most `max_parallel` instances are dispatched at once; the rest wait
//! in order. A step starts only when every step it needs has a result; a
//! failed, blocked or cancelled step blocks its dependents, with the cause,
//! and independent branches go on. A fan-out has a result when
//! `min_success` items (default: all) succeeded; `fail_fast` stops as soon
//! as that cannot happen. Failed attempts are retried `retries` times.
//!
//! Resume is exact: every instance is keyed by its step, item, rendered
//! prompt, settings and the outputs it builds on ([`key`]); an instance
//! whose key has a stored result takes it instead of running again.

mod key;
pub mod outputs;
mod report;

pub use key::instance_key;
pub use report::{Counts, InstanceReport, Report, StepReport};

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Check, ForEach, OnFailure, OutputKind, StepId, Workflow};
use crate::template::Ref;
use outputs::{Element, FILE_THRESHOLD, capped, capped_array, output_file};

/// One instance of a step: the step and the item's index (0 for a step
/// without `for_each`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId {
    /// The step.
    pub step: StepId,
    /// The item's index.
    pub index: usize,
}

/// Where an instance is in its life (W4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting for a slot or for the steps it needs.
    Pending,
    /// Its agent is working.
    Dispatched,
    /// Its agent answered; its check (if any) has not passed yet.
    Finalized,
    /// Its check passed.
    Verified,
    /// It failed (after its retries).
    Failed,
    /// A step it needs has no result.
    Blocked,
    /// Someone cancelled it, or the run's budget ran out.
    Cancelled,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 7] = [
        State::Pending,
        State::Dispatched,
        State::Finalized,
        State::Verified,
        State::Failed,
        State::Blocked,
        State::Cancelled,
    ];

    /// As written in events and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Dispatched => "dispatched",
            State::Finalized => "finalized",
            State::Verified => "verified",
            State::Failed => "failed",
            State::Blocked => "blocked",
            State::Cancelled => "cancelled",
        }
    }

    /// Parses [`State::as_str`].
    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether nothing more happens to it.
    pub fn is_terminal(self) -> bool {
        match self {
            State::Verified | State::Failed | State::Blocked | State::Cancelled => true,
            State::Pending | State::Dispatched | State::Finalized => false,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// An instance's check ran.
    Checked {
        /// The instance.
        id: InstanceId,
        /// Exit 0.
        passed: bool,
        /// What it printed, or why it did not run.
        detail: String,
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
        /// The command.
        command: String,
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
}

impl Instance {
    fn new(item: Option<Value>) -> Self {
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
        }
    }

    /// Whether its result counts: verified, or finalized with no check.
    fn succeeded(&self, has_check: bool) -> bool {
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

/// The scheduler of one run.
#[derive(Debug, Clone)]
pub struct Scheduler {
    workflow: Workflow,
    settings: Settings,
    steps: Vec<StepRun>,
    running: usize,
    cancelled: bool,
    /// Why nothing more is dispatched (a budget ran out).
    halted: Option<String>,
    tokens: u64,
    agents: u64,
    done: bool,
}

impl Scheduler {
    /// A run of `workflow`; nothing happens until [`Input::Start`].
    pub fn new(workflow: Workflow, mut settings: Settings) -> Self {
        settings.max_parallel = settings.max_parallel.max(1);
        let steps = workflow
            .steps
            .iter()
            .map(|s| StepRun {
                status: StepStatus::Waiting,
                instances: if s.for_each.is_none() {
                    vec![Instance::new(None)]
                } else {
                    Vec::new()
                },
            })
            .collect();
        Self {
            workflow,
            settings,
            steps,
            running: 0,
            cancelled: false,
            halted: None,
            tokens: 0,
            agents: 0,
            done: false,
        }
    }

    /// The workflow.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// Every step as it stands.
    pub fn steps(&self) -> &[StepRun] {
        &self.steps
    }

    /// One instance.
    pub fn instance(&self, id: InstanceId) -> Option<&Instance> {
        self.steps.get(id.step)?.instances.get(id.index)
    }

    /// An instance's name: `review[3]`, or `summary` for a step without
    /// `for_each`.
    pub fn name(&self, id: InstanceId) -> String {
        instance_name(&self.workflow, id)
    }

    /// Instances dispatched and not yet answered or checked.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Tokens spent so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether the run has ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes one input; returns what to do, in order.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let mut fx = Vec::new();
        if self.done {
            return fx;
        }
        match input {
            Input::Start => {
                for (s, run) in self.steps.iter().enumerate() {
                    for index in 0..run.instances.len() {
                        fx.push(Effect::State {
                            step: s,
                            index: Some(index),
                            state: State::Pending,
                            reason: None,
                        });
                    }
                }
            }
            Input::Answered { id, output, calls } => self.answered(id, output, calls, &mut fx),
            Input::AttemptFailed { id, reason } => {
                if self.is(id, State::Dispatched) {
                    self.running -= 1;
                    self.attempt_failed(id, reason, &mut fx);
                }
            }
            Input::Checked { id, passed, detail } => {
                if self.is(id, State::Finalized) && self.checking(id) {
                    self.running -= 1;
                    if passed {
                        self.set(id, State::Verified, None, &mut fx);
                    } else {
                        self.attempt_failed(id, format!("check failed: {detail}"), &mut fx);
                    }
                }
            }
            Input::Cancel(target) => self.cancel(target, &mut fx),
            Input::Tokens(n) => {
                self.tokens += n;
                if let Some(limit) = self.workflow.budget.tokens
                    && self.tokens >= limit
                    && self.halted.is_none()
                {
                    let why = format!("the run's token budget ({limit}) is spent");
                    self.halted = Some(why.clone());
                    self.cancel_all(&why, &mut fx);
                }
            }
            Input::AgentsStarted(n) => {
                self.agents += n;
                self.agent_budget(&mut fx);
            }
            Input::Halt(why) => {
                if self.halted.is_none() {
                    self.halt(why, &mut fx);
                }
            }
        }
        self.pump(&mut fx);
        fx
    }

    fn is(&self, id: InstanceId, state: State) -> bool {
        self.instance(id).is_some_and(|i| i.state == state)
    }

    /// Whether a finalized instance's check is running (it has one and
    /// its answer was accepted).
    fn checking(&self, id: InstanceId) -> bool {
        self.workflow.steps[id.step].check.is_some()
    }

    fn inst(&mut self, id: InstanceId) -> &mut Instance {
        &mut self.steps[id.step].instances[id.index]
    }

    fn set(&mut self, id: InstanceId, state: State, reason: Option<String>, fx: &mut Vec<Effect>) {
        let inst = self.inst(id);
        inst.state = state;
        inst.reason.clone_from(&reason);
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state,
            reason,
        });
        if state.is_terminal() {
            self.settle_step(id.step, fx);
        }
    }

    fn answered(
        &mut self,
        id: InstanceId,
        output: String,
        calls: Vec<String>,
        fx: &mut Vec<Effect>,
    ) {
        if !self.is(id, State::Dispatched) {
            return;
        }
        let step = &self.workflow.steps[id.step];
        let json = match step.output {
            OutputKind::Text => None,
            OutputKind::Json => match outputs::parse_json(&output) {
                Ok(v) => Some(v),
                Err(why) => {
                    self.running -= 1;
                    return self.attempt_failed(id, why, fx);
                }
            },
        };
        if let (Some(schema), Some(value)) = (&step.output_schema, &json)
            && let Err(why) = outputs::check_schema(schema, value)
        {
            self.running -= 1;
            return self.attempt_failed(id, why, fx);
        }
        let check = step.check.clone();
        let output = match &json {
            Some(v) if step.output == OutputKind::Json => v.to_string(),
            _ => output,
        };
        let file = (output.len() > FILE_THRESHOLD).then(|| self.file(id));
        let inst = self.inst(id);
        inst.output = Some(output.clone());
        inst.json = json;
        let no_calls = calls.is_empty();
        inst.calls = calls;
        fx.push(Effect::Output { id, output, file });
        match check {
            None => {
                self.running -= 1;
                self.set(id, State::Finalized, None, fx);
                self.settle_step(id.step, fx);
            }
            Some(_) if no_calls => {
                self.running -= 1;
                self.set(id, State::Finalized, None, fx);
                self.attempt_failed(
                    id,
                    "check failed: the step claims a result with no tool call behind it".into(),
                    fx,
                );
            }
            Some(Check::Command(command)) => {
                // The slot stays taken while the check runs.
                self.set(id, State::Finalized, None, fx);
                fx.push(Effect::RunCheck { id, command });
            }
        }
    }

    fn file(&self, id: InstanceId) -> PathBuf {
        output_file(
            &self.settings.outputs_dir,
            &self.workflow.steps[id.step].name,
            id.index,
        )
    }

    /// An attempt failed: retried while attempts are left, else failed.
    fn attempt_failed(&mut self, id: InstanceId, reason: String, fx: &mut Vec<Effect>) {
        let retries = self.workflow.steps[id.step].retries;
        let attempts = self.instance(id).map_or(0, |i| i.attempts);
        if attempts <= retries && !self.cancelled && self.halted.is_none() {
            let inst = self.inst(id);
            inst.output = None;
            inst.json = None;
            self.set(
                id,
                State::Pending,
                Some(format!(
                    "retrying (attempt {} of {}): {reason}",
                    attempts + 1,
                    retries + 1
                )),
                fx,
            );
        } else {
            self.set(id, State::Failed, Some(reason), fx);
        }
    }

    /// A step whose instances are all terminal gets its status; a fan-out
    /// that can no longer reach `min_success` under `fail_fast` stops.
    fn settle_step(&mut self, s: StepId, fx: &mut Vec<Effect>) {
        if !matches!(self.steps[s].status, StepStatus::Running) {
            return;
        }
        let step = &self.workflow.steps[s];
        let has_check = step.check.is_some();
        let total = self.steps[s].instances.len();
        let need = step.min_success.map_or(total, |n| n as usize);
        let instances = &self.steps[s].instances;
        let succeeded = instances.iter().filter(|i| i.succeeded(has_check)).count();
        let open = instances.iter().filter(|i| !i.state.is_terminal()).count()
            - instances
                .iter()
                .filter(|i| i.state == State::Finalized && !has_check)
                .count();
        let hopeless = succeeded + open < need;
        if open > 0 && !(hopeless && step.on_failure == OnFailure::FailFast) {
            return;
        }
        let single = step.for_each.is_none();
        if open > 0 {
            let why = format!(
                "fail_fast: step '{}' can no longer reach {need} successful items",
                step.name
            );
            for index in 0..total {
                let id = InstanceId { step: s, index };
                self.cancel_instance(id, &why, fx);
            }
        }
        let status = if succeeded >= need {
            StepStatus::Succeeded
        } else if total == 1 && single {
            let inst = &self.steps[s].instances[0];
            match inst.state {
                State::Cancelled => StepStatus::Cancelled(inst.reason.clone().unwrap_or_default()),
                _ => StepStatus::Failed(inst.reason.clone().unwrap_or_else(|| "failed".into())),
            }
        } else {
            StepStatus::Failed(format!(
                "{} of {total} items succeeded; it needs {need}",
                succeeded
            ))
        };
        self.steps[s].status = status;
    }

    fn cancel_instance(&mut self, id: InstanceId, why: &str, fx: &mut Vec<Effect>) {
        let Some(state) = self.instance(id).map(|i| i.state) else {
            return;
        };
        let has_check = self.workflow.steps[id.step].check.is_some();
        match state {
            State::Pending => {}
            State::Dispatched => {
                self.running -= 1;
                fx.push(Effect::Stop { id });
            }
            State::Finalized if has_check => {
                self.running -= 1;
                fx.push(Effect::Stop { id });
            }
            State::Finalized
            | State::Verified
            | State::Failed
            | State::Blocked
            | State::Cancelled => return,
        }
        let inst = self.inst(id);
        inst.state = State::Cancelled;
        inst.reason = Some(why.to_string());
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state: State::Cancelled,
            reason: Some(why.to_string()),
        });
    }

    fn cancel(&mut self, target: Target, fx: &mut Vec<Effect>) {
        match target {
            Target::Run => {
                self.cancelled = true;
                self.cancel_all("the run was cancelled", fx);
            }
            Target::Step(s) => {
                let name = self.workflow.steps[s].name.clone();
                self.cancel_step(s, &format!("step '{name}' was cancelled"), fx);
            }
            Target::Instance(id) => {
                let why = format!("{} was cancelled", self.name(id));
                self.cancel_instance(id, &why, fx);
                self.settle_step(id.step, fx);
            }
        }
    }

    fn cancel_step(&mut self, s: StepId, why: &str, fx: &mut Vec<Effect>) {
        match self.steps[s].status {
            StepStatus::Waiting => {
                for index in 0..self.steps[s].instances.len() {
                    self.cancel_instance(InstanceId { step: s, index }, why, fx);
                }
                if self.steps[s].instances.is_empty() {
                    fx.push(Effect::State {
                        step: s,
                        index: None,
                        state: State::Cancelled,
                        reason: Some(why.to_string()),
                    });
                }
                self.steps[s].status = StepStatus::Cancelled(why.to_string());
            }
            StepStatus::Running => {
                for index in 0..self.steps[s].instances.len() {
                    self.cancel_instance(InstanceId { step: s, index }, why, fx);
                }
                self.settle_step(s, fx);
            }
            StepStatus::Succeeded
            | StepStatus::Failed(_)
            | StepStatus::Blocked(_)
            | StepStatus::Cancelled(_) => {}
        }
    }

    /// Cancels every step not done, stopping what runs.
    fn cancel_all(&mut self, why: &str, fx: &mut Vec<Effect>) {
        for s in 0..self.steps.len() {
            self.cancel_step(s, why, fx);
        }
    }

    /// The agent budget: once spent, nothing more starts; what runs goes on.
    fn agent_budget(&mut self, fx: &mut Vec<Effect>) {
        let Some(limit) = self.workflow.budget.agents else {
            return;
        };
        if self.agents < limit || self.halted.is_some() {
            return;
        }
        self.halt(format!("the run's agent budget ({limit}) is spent"), fx);
    }

    /// Nothing more starts; what waits is cancelled with `why`; what runs
    /// goes on.
    fn halt(&mut self, why: String, fx: &mut Vec<Effect>) {
        self.halted = Some(why.clone());
        for s in 0..self.steps.len() {
            for index in 0..self.steps[s].instances.len() {
                let id = InstanceId { step: s, index };
                if self.is(id, State::Pending) {
                    self.cancel_instance(id, &why, fx);
                }
            }
            match self.steps[s].status {
                StepStatus::Waiting => self.cancel_step(s, &why, fx),
                StepStatus::Running => self.settle_step(s, fx),
                _ => {}
            }
        }
    }

    /// Expands, blocks and dispatches what it can; ends the run when
    /// nothing is left.
    fn pump(&mut self, fx: &mut Vec<Effect>) {
        loop {
            let mut changed = false;
            for s in 0..self.steps.len() {
                if self.steps[s].status == StepStatus::Waiting {
                    changed |= self.open_step(s, fx);
                }
            }
            if !changed {
                break;
            }
        }
        if self.halted.is_none() && !self.cancelled {
            'dispatch: for s in 0..self.steps.len() {
                if self.steps[s].status != StepStatus::Running {
                    continue;
                }
                for index in 0..self.steps[s].instances.len() {
                    let id = InstanceId { step: s, index };
                    if !self.is(id, State::Pending) {
                        continue;
                    }
                    if self.running >= self.settings.max_parallel {
                        break 'dispatch;
                    }
                    if let Some(limit) = self.workflow.budget.agents
                        && self.agents >= limit
                    {
                        self.agent_budget(fx);
                        break 'dispatch;
                    }
                    self.dispatch(id, fx);
                }
            }
            // Restored results may have settled steps whose dependents can
            // now open.
            if self.steps.iter().any(|s| s.status == StepStatus::Waiting) && self.ready_any() {
                return self.pump(fx);
            }
        }
        let open = self
            .steps
            .iter()
            .any(|s| matches!(s.status, StepStatus::Waiting | StepStatus::Running));
        if !open && self.running == 0 {
            self.done = true;
            fx.push(Effect::Done(self.report()));
        }
    }

    fn ready_any(&self) -> bool {
        (0..self.steps.len()).any(|s| {
            self.steps[s].status == StepStatus::Waiting
                && self.workflow.steps[s].needs.iter().all(|&n| {
                    !matches!(
                        self.steps[n].status,
                        StepStatus::Waiting | StepStatus::Running
                    )
                })
        })
    }

    /// A waiting step whose needs are settled is blocked or opened (its
    /// fan-out expanded). True when it changed.
    fn open_step(&mut self, s: StepId, fx: &mut Vec<Effect>) -> bool {
        let step = &self.workflow.steps[s];
        let mut cause = None;
        for &n in &step.needs {
            let other = &self.workflow.steps[n].name;
            match &self.steps[n].status {
                StepStatus::Waiting | StepStatus::Running => return false,
                StepStatus::Succeeded => {}
                StepStatus::Failed(why) => {
                    cause.get_or_insert(format!("needs '{other}', which failed: {why}"));
                }
                StepStatus::Blocked(why) => {
                    cause.get_or_insert(format!("needs '{other}', which is blocked: {why}"));
                }
                StepStatus::Cancelled(why) => {
                    cause.get_or_insert(format!("needs '{other}', which was cancelled: {why}"));
                }
            }
        }
        if self.cancelled || self.halted.is_some() {
            let why = self
                .halted
                .clone()
                .unwrap_or_else(|| "the run was cancelled".into());
            self.cancel_step(s, &why, fx);
            return true;
        }
        if let Some(cause) = cause {
            self.block(s, cause, fx);
            return true;
        }
        if let Some(for_each) = step.for_each.clone() {
            let items = match for_each {
                ForEach::Literal(items) => Ok(items),
                ForEach::Output(source) => self.list_of(source),
            };
            match items {
                Ok(items) => {
                    self.steps[s].instances = items
                        .iter()
                        .cloned()
                        .map(|i| Instance::new(Some(i)))
                        .collect();
                    fx.push(Effect::Expanded { step: s, items });
                    for index in 0..self.steps[s].instances.len() {
                        fx.push(Effect::State {
                            step: s,
                            index: Some(index),
                            state: State::Pending,
                            reason: None,
                        });
                    }
                }
                Err(why) => {
                    self.steps[s].status = StepStatus::Failed(why.clone());
                    fx.push(Effect::State {
                        step: s,
                        index: None,
                        state: State::Failed,
                        reason: Some(why),
                    });
                    return true;
                }
            }
        }
        self.steps[s].status = StepStatus::Running;
        // An empty fan-out has its (empty) result at once.
        self.settle_step(s, fx);
        true
    }

    fn block(&mut self, s: StepId, cause: String, fx: &mut Vec<Effect>) {
        if self.steps[s].instances.is_empty() {
            fx.push(Effect::State {
                step: s,
                index: None,
                state: State::Blocked,
                reason: Some(cause.clone()),
            });
        }
        for index in 0..self.steps[s].instances.len() {
            let inst = &mut self.steps[s].instances[index];
            inst.state = State::Blocked;
            inst.reason = Some(cause.clone());
            fx.push(Effect::State {
                step: s,
                index: Some(index),
                state: State::Blocked,
                reason: Some(cause.clone()),
            });
        }
        self.steps[s].status = StepStatus::Blocked(cause);
    }

    /// The JSON list a step answered.
    fn list_of(&self, source: StepId) -> Result<Vec<Value>, String> {
        let name = &self.workflow.steps[source].name;
        match self.steps[source]
            .instances
            .first()
            .and_then(|i| i.json.clone())
        {
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(format!(
                "for_each: step '{name}' answered {}, not a JSON list",
                json_kind(&other)
            )),
            None => Err(format!("for_each: step '{name}' has no JSON answer")),
        }
    }

    fn dispatch(&mut self, id: InstanceId, fx: &mut Vec<Effect>) {
        let step = &self.workflow.steps[id.step];
        let item = self.steps[id.step].instances[id.index].item.clone();
        let prompt = step
            .prompt
            .render(|r| self.lookup(r, item.as_ref(), id.index));
        let scope: Vec<String> = step
            .scope
            .iter()
            .map(|t| t.render(|r| self.lookup(r, item.as_ref(), id.index)))
            .collect();
        let upstream: Vec<String> = step
            .needs
            .iter()
            .flat_map(|&n| self.steps[n].instances.iter())
            .filter_map(|i| i.output.clone())
            .collect();
        let key = instance_key(step, item.as_ref(), &prompt, &scope, &upstream);
        let stored = self.settings.stored.get(&key).cloned();
        self.inst(id).key = Some(key.clone());
        if let Some(stored) = stored {
            let taken = match stored.state {
                State::Verified | State::Finalized => true,
                State::Failed => !self.settings.retry_failed,
                _ => false,
            };
            if taken {
                return self.restore(id, stored, fx);
            }
        }
        let inst = self.inst(id);
        inst.attempts += 1;
        let attempt = inst.attempts;
        self.running += 1;
        self.agents += 1;
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state: State::Dispatched,
            reason: None,
        });
        self.inst(id).state = State::Dispatched;
        fx.push(Effect::Dispatch {
            id,
            prompt,
            scope,
            key,
            attempt,
        });
    }

    fn restore(&mut self, id: InstanceId, stored: Stored, fx: &mut Vec<Effect>) {
        let step = &self.workflow.steps[id.step];
        let json = match (step.output, &stored.output) {
            (OutputKind::Json, Some(text)) => outputs::parse_json(text).ok(),
            _ => None,
        };
        let inst = self.inst(id);
        inst.output = stored.output;
        inst.json = json;
        inst.restored = true;
        let reason = match stored.state {
            State::Failed => stored
                .reason
                .map(|r| format!("failed in an earlier run: {r}")),
            _ => Some("restored from an earlier run".into()),
        };
        self.set(id, stored.state, reason, fx);
        self.settle_step(id.step, fx);
    }

    /// A reference's text for an instance with `item` at `index`.
    fn lookup(&self, r: &Ref, item: Option<&Value>, index: usize) -> String {
        match r {
            Ref::Var(name) => self.workflow.vars.get(name).cloned().unwrap_or_default(),
            Ref::Item => match item {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
            Ref::Index => index.to_string(),
            Ref::Output(name) => {
                let Some(s) = self.workflow.step_id(name) else {
                    return String::new();
                };
                let cap = self.workflow.steps[s].max_output_bytes;
                let id = InstanceId { step: s, index: 0 };
                match self.instance(id).and_then(|i| i.output.as_deref()) {
                    Some(out) => capped(out, cap, &self.file(id), &self.name(id)),
                    None => String::new(),
                }
            }
            Ref::Outputs(name) => {
                let Some(s) = self.workflow.step_id(name) else {
                    return "[]".into();
                };
                let has_check = self.workflow.steps[s].check.is_some();
                let elements: Vec<Element<'_>> = self.steps[s]
                    .instances
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.succeeded(has_check))
                    .filter_map(|(index, i)| {
                        let id = InstanceId { step: s, index };
                        Some(Element {
                            name: self.name(id),
                            text: i.output.as_deref()?,
                            json: i.json.as_ref(),
                            file: self.file(id),
                        })
                    })
                    .collect();
                capped_array(&elements, self.workflow.steps[s].max_output_bytes)
            }
        }
    }
}

/// An instance's name: `review[3]`, or `summary` without `for_each`.
pub fn instance_name(workflow: &Workflow, id: InstanceId) -> String {
    let step = &workflow.steps[id.step];
    if step.for_each.is_some() {
        format!("{}[{}]", step.name, id.index)
    } else {
        step.name.clone()
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
