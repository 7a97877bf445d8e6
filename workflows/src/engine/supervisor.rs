//! The run's supervisor (W5, W6): steps the [`Scheduler`] and performs
//! its effects.
//!
//! Each dispatched instance gets a [`StepActor`] linked to the supervisor;
//! a failure of one (a panic, a crash) is its supervision event and fails
//! that instance only. Instance states are written to the store in
//! batches, and an event about a state goes out only once the state is
//! stored, so what a consumer saw is what a resume finds. Cancel requests
//! left in the store by other processes are taken twice a second.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use cadre_actors::delegation::Caller;
use cadre_actors::store::StoreRequest;
use cadre_runtime::agent::AgentPath;
use cadre_runtime::config::RoleConfig;
use cadre_runtime::protocol::{ApprovalDecision, Event, Op, Usage};
use cadre_runtime::store::{InstanceRecord, StoreError};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;

use super::ids::{inner_approval_id, parse_outer};
use super::step::StepMsg;
use crate::cluster::Cluster;
use crate::cluster::places::Place;
use crate::model::Check;
use crate::scheduler::{Effect, Input, InstanceId, MergeFailure, Report, Scheduler, Target};

mod dispatch;
mod spec;

/// Cancel requests from other processes are looked for this often.
const POLL_CANCELS: Duration = Duration::from_millis(500);

/// What a step actor tells its supervisor.
#[derive(Debug)]
pub enum StepReport {
    /// The agent answered.
    Answered {
        /// Its final answer.
        output: String,
        /// The tool calls behind it.
        calls: Vec<String>,
    },
    /// The attempt ended without an answer.
    Failed {
        /// Why.
        reason: String,
    },
    /// The attempt could not start (its worktree, its agent, or its node).
    Unstarted {
        /// Why.
        reason: String,
        /// Its node could not be reached: the attempt goes elsewhere,
        /// not counted against the step's retries.
        unplaced: bool,
    },
    /// The model endpoint failed in a way that may pass later (after the
    /// client's own retries): back to the queue.
    Requeue {
        /// Why.
        reason: String,
    },
    /// The worktree was merged back (the files), or not (why).
    Merged(Result<Vec<String>, MergeFailure>),
    /// The check ran.
    Checked {
        /// Exit 0.
        passed: bool,
        /// What it printed.
        detail: String,
    },
    /// Tokens spent by a turn.
    Tokens(u64),
    /// What a turn or a sub-agent's response spent, in detail (cached and
    /// reasoning tokens, cost) for the run's summary; its tokens come as
    /// `Tokens` too, which the budget counts.
    Spent(Usage),
    /// The model endpoint refused in a way no retry fixes: stop dispatching.
    Halt(String),
    /// An event the caller must see (ids already the step's).
    Event(Box<Event>),
}

/// Messages to a run's supervisor.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// From a step actor.
    Step(InstanceId, StepReport),
    /// Cancel the run (`*`), a step (`name`) or an instance (`name[i]`).
    Cancel(String),
    /// Answer a step's approval prompt.
    Approve {
        /// `step:<name>[<i>]:approval:<n>`.
        id: String,
        /// The answer.
        decision: ApprovalDecision,
        /// What the person said with it, for the step's model.
        reason: Option<String>,
    },
    /// Instance states were written (or not).
    Flushed(Result<(), StoreError>),
    /// Look for cancel requests from other processes.
    Poll,
    /// Cancel requests found.
    Cancels(Vec<String>),
}

impl ractor::Message for SupervisorMsg {}

/// What a run starts with.
pub struct SupervisorArgs {
    /// The run's id: its store rows, its events and its agents' ids are
    /// under it.
    pub run_id: String,
    /// The machine, built with the workflow and the stored results.
    pub scheduler: Scheduler,
    /// The agent that runs the workflow: every step's authority is
    /// narrowed from its own, and the run's events go to its host.
    pub caller: Caller,
    /// Where the run keeps its files (large outputs, its agents'
    /// directories).
    pub run_dir: PathBuf,
    /// Agent numbers already used under the run (a resume starts after them).
    pub next_agent: u32,
    /// The roles a step may name, by name.
    pub roles: std::collections::BTreeMap<String, RoleConfig>,
    /// Gets the report when the run is over.
    pub done: oneshot::Sender<Report>,
    /// The nodes steps may run on; `None` runs every step here.
    pub cluster: Option<Cluster>,
}

/// The supervisor.
pub struct SupervisorActor;

/// A running attempt.
struct Live {
    actor: ActorRef<StepMsg>,
    path: AgentPath,
    /// The slot it holds, with a cluster.
    place: Option<Place>,
}

/// An attempt waiting for a free slot.
struct Waiting {
    id: InstanceId,
    prompt: String,
    scope: Vec<String>,
}

/// The supervisor's state: the machine, the attempts it runs, and what
/// is not yet stored.
pub struct SupervisorState {
    /// Whoever waits for the report: taken when it is sent, so it is sent
    /// once.
    args: Option<oneshot::Sender<Report>>,
    run_id: String,
    scheduler: Scheduler,
    caller: Caller,
    run_dir: PathBuf,
    roles: std::collections::BTreeMap<String, RoleConfig>,
    /// The last agent number used under the run: each attempt's agent
    /// takes the next.
    next_agent: u32,
    /// The attempts running, by instance.
    live: HashMap<InstanceId, Live>,
    /// Attempts the machine is done with, told to stop, until their actor
    /// ends (its slot is given back then); the run ends only once none is
    /// left.
    ending: HashMap<ractor::ActorId, Live>,
    cluster: Option<Cluster>,
    /// Attempts waiting for a slot, first first.
    waiting: VecDeque<Waiting>,
    /// Attempts placed on a node, to place again if the node turns out to
    /// be gone before they started; kept apart from `live`, whose entry
    /// the actor's end (a supervision event, handled before the actor's
    /// last report) may remove first.
    unstarted: HashMap<InstanceId, Waiting>,
    /// The node each instance's current attempt runs on.
    nodes: HashMap<InstanceId, String>,
    /// Every agent an instance's attempts ran on, last last.
    agents: HashMap<InstanceId, String>,
    /// The tokens each instance's attempts spent, shown in its events and
    /// stored with it.
    tokens: HashMap<InstanceId, u64>,
    /// The run's usage in detail, since this process took it up.
    spent: Usage,
    /// Instances whose state is not yet stored.
    dirty: BTreeSet<InstanceId>,
    /// The events of those states, let out once they are stored: a state
    /// is stored before its event.
    held: Vec<Event>,
    /// A write of states is under way; the next waits for it, so writes
    /// land in order.
    flushing: bool,
    /// The report once the machine is done; sent when every state is
    /// stored and every step actor has stopped.
    report: Option<Report>,
}

impl Actor for SupervisorActor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(POLL_CANCELS, || SupervisorMsg::Poll);
        Ok(SupervisorState {
            args: Some(args.done),
            run_id: args.run_id,
            scheduler: args.scheduler,
            caller: args.caller,
            run_dir: args.run_dir,
            roles: args.roles,
            next_agent: args.next_agent,
            live: HashMap::new(),
            ending: HashMap::new(),
            cluster: args.cluster,
            waiting: VecDeque::new(),
            unstarted: HashMap::new(),
            nodes: HashMap::new(),
            agents: HashMap::new(),
            tokens: HashMap::new(),
            spent: Usage::default(),
            dirty: BTreeSet::new(),
            held: Vec::new(),
            flushing: false,
            report: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let workflow = state.scheduler.workflow();
        state.caller.events.send(Event::WorkflowStarted {
            run_id: state.run_id.clone(),
            workflow: workflow.name.clone(),
            steps: workflow.steps.iter().map(|s| s.name.clone()).collect(),
        });
        // Every single step's instance is pending from the start.
        for (s, run) in state.scheduler.steps().iter().enumerate() {
            for index in 0..run.instances.len() {
                state.dirty.insert(InstanceId { step: s, index });
            }
        }
        let effects = state.scheduler.step(Input::Start);
        state.perform(&myself, effects).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Step(id, report) => state.step_report(&myself, id, report).await,
            SupervisorMsg::Cancel(target) => {
                if let Some(target) = state.target(&target) {
                    let effects = state.scheduler.step(Input::Cancel(target));
                    state.perform(&myself, effects).await;
                }
            }
            SupervisorMsg::Approve {
                id,
                decision,
                reason,
            } => state.approve(&id, decision, reason),
            SupervisorMsg::Flushed(result) => {
                state.flushing = false;
                if let Err(err) = result {
                    tracing::error!(run_id = %state.run_id, %err, "step states could not be stored");
                }
                state.flush(&myself);
                state.finish_if_done(&myself).await;
            }
            SupervisorMsg::Poll => {
                state.place_waiting(&myself).await;
                let store = state.caller.services.store.clone();
                let run_id = state.run_id.clone();
                let me = myself.clone();
                if let Some(store) = store {
                    tokio::spawn(async move {
                        if let Ok(targets) = store
                            .ask(|reply| StoreRequest::TakeCancels { run_id, reply })
                            .await
                            && !targets.is_empty()
                        {
                            let _ = me.cast(SupervisorMsg::Cancels(targets));
                        }
                    });
                }
            }
            SupervisorMsg::Cancels(targets) => {
                for target in targets {
                    if let Some(target) = state.target(&target) {
                        let effects = state.scheduler.step(Input::Cancel(target));
                        state.perform(&myself, effects).await;
                    }
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                if let Some(done) = state.ending.remove(&cell.get_id()) {
                    state.release(&done);
                    state.place_waiting(&myself).await;
                    state.finish_if_done(&myself).await;
                    return Ok(());
                }
                let crashed = state
                    .live
                    .iter()
                    .find(|(_, l)| l.actor.get_id() == cell.get_id())
                    .map(|(id, _)| *id);
                if let Some(id) = crashed {
                    if let Some(live) = state.live.remove(&id) {
                        state.release(&live);
                    }
                    let effects = state.scheduler.step(Input::AttemptFailed {
                        id,
                        reason: format!("the step crashed: {error}"),
                    });
                    state.perform(&myself, effects).await;
                }
            }
            SupervisionEvent::ActorTerminated(cell, ..) => {
                let ended: Vec<InstanceId> = state
                    .live
                    .iter()
                    .filter(|(_, l)| l.actor.get_id() == cell.get_id())
                    .map(|(id, _)| *id)
                    .collect();
                for id in ended {
                    if let Some(live) = state.live.remove(&id) {
                        state.release(&live);
                    }
                }
                if let Some(done) = state.ending.remove(&cell.get_id()) {
                    state.release(&done);
                }
                state.place_waiting(&myself).await;
                state.finish_if_done(&myself).await;
            }
            _ => {}
        }
        Ok(())
    }
}

impl SupervisorState {
    async fn step_report(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: InstanceId,
        report: StepReport,
    ) {
        // It reports, so it started. (Tokens may come late from an
        // earlier attempt's sub-agents, so they prove nothing.)
        if !matches!(
            report,
            StepReport::Unstarted { .. } | StepReport::Tokens(_) | StepReport::Spent(_)
        ) {
            self.unstarted.remove(&id);
        }
        let input = match report {
            StepReport::Answered { output, calls } => Input::Answered { id, output, calls },
            StepReport::Failed { reason } => Input::AttemptFailed { id, reason },
            StepReport::Unstarted { reason, unplaced } => {
                if let (true, Some(again)) = (unplaced, self.unstarted.remove(&id)) {
                    // Its slot is freed now (the actor is ending; its end,
                    // when it comes, finds nothing left to release), and the
                    // attempt placed again at once.
                    tracing::info!(run_id = %self.run_id, %reason, "a step goes elsewhere");
                    if let Some(live) = self.live.remove(&id) {
                        self.release(&live);
                    }
                    self.nodes.remove(&id);
                    self.waiting.push_front(again);
                    Box::pin(self.place_waiting(myself)).await;
                    return;
                }
                Input::AttemptFailed {
                    id,
                    reason: format!("the step could not start: {reason}"),
                }
            }
            StepReport::Requeue { reason } => Input::Requeue { id, reason },
            StepReport::Merged(result) => Input::Merged { id, result },
            StepReport::Checked { passed, detail } => Input::Checked { id, passed, detail },
            StepReport::Tokens(n) => {
                let spent = self.tokens.entry(id).or_default();
                *spent = spent.saturating_add(n);
                self.dirty.insert(id);
                Input::Tokens(n)
            }
            StepReport::Spent(usage) => {
                self.spent.add(usage);
                return;
            }
            StepReport::Halt(why) => Input::Halt(why),
            StepReport::Event(event) => {
                let spawned = matches!(*event, Event::AgentSpawned { .. });
                self.caller.events.send(*event);
                if !spawned {
                    return;
                }
                Input::AgentsStarted(1)
            }
        };
        let effects = self.scheduler.step(input);
        self.perform(myself, effects).await;
    }

    async fn perform(&mut self, myself: &ActorRef<SupervisorMsg>, effects: Vec<Effect>) {
        for effect in effects {
            if let Some(id) = effect.ends_attempt(self.scheduler.workflow()) {
                self.retire(id);
            }
            match effect {
                Effect::Expanded { step, items } => {
                    for index in 0..items.len() {
                        self.dirty.insert(InstanceId { step, index });
                    }
                }
                Effect::State {
                    step,
                    index,
                    state,
                    reason,
                } => {
                    let id = index.map(|index| InstanceId { step, index });
                    let name = &self.scheduler.workflow().steps[step].name;
                    let fan_out = self.scheduler.workflow().steps[step].for_each.is_some();
                    let item = id.and_then(|id| self.scheduler.instance(id)?.item.clone());
                    let event = Event::StepState {
                        run_id: self.run_id.clone(),
                        step: name.clone(),
                        index: index.filter(|_| fan_out).map(|i| i as u64),
                        item,
                        state,
                        agent_id: id.and_then(|id| self.agents.get(&id).cloned()),
                        node: id.and_then(|id| self.nodes.get(&id).cloned()),
                        reason,
                        tokens: id.and_then(|id| self.tokens.get(&id).copied()).unwrap_or(0),
                    };
                    match id {
                        Some(id) => {
                            self.dirty.insert(id);
                            self.held.push(event);
                        }
                        None => {
                            self.caller.events.send(event);
                        }
                    }
                }
                Effect::Dispatch {
                    id, prompt, scope, ..
                } => self.dispatch(myself, id, prompt, scope).await,
                Effect::RunCheck { id, check, env } => match self.live.get(&id) {
                    Some(live) => {
                        // A verifier is an agent of the run, numbered like
                        // the steps' (so a resume numbers after it).
                        let verifier = (check == Check::Verifier).then(|| {
                            self.next_agent += 1;
                            AgentPath::root().child(self.next_agent)
                        });
                        let _ = live.actor.cast(StepMsg::Check {
                            check,
                            verifier,
                            env,
                        });
                    }
                    None => {
                        let more = self.scheduler.step(Input::Checked {
                            id,
                            passed: false,
                            detail: "the step ended before its check could run".into(),
                        });
                        Box::pin(self.perform(myself, more)).await;
                    }
                },
                Effect::Merge { id } => match self.live.get(&id) {
                    Some(live) => {
                        let _ = live.actor.cast(StepMsg::Merge);
                    }
                    None => {
                        let more = self.scheduler.step(Input::Merged {
                            id,
                            result: Err(MergeFailure::Ended),
                        });
                        Box::pin(self.perform(myself, more)).await;
                    }
                },
                // Its actor, if it has one, was retired above.
                Effect::Stop { id } => {
                    self.waiting.retain(|w| w.id != id);
                    // An attempt still starting is not placed again.
                    self.unstarted.remove(&id);
                }
                Effect::Output { id, output, file } => {
                    if let Some(file) = file {
                        if let Some(dir) = file.parent() {
                            let _ = std::fs::create_dir_all(dir);
                        }
                        if let Err(err) = std::fs::write(&file, &output) {
                            tracing::warn!(%err, file = %file.display(), "an output could not be written");
                        }
                    }
                    let name = &self.scheduler.workflow().steps[id.step];
                    let fan_out = name.for_each.is_some();
                    self.dirty.insert(id);
                    self.held.push(Event::StepOutput {
                        run_id: self.run_id.clone(),
                        step: name.name.clone(),
                        index: fan_out.then_some(id.index as u64),
                        output: cadre_runtime::tool::truncate_middle(&output, 2000),
                    });
                }
                Effect::Done(report) => {
                    // Every instance is settled: no attempt is left to
                    // wait for.
                    let left: Vec<InstanceId> = self.live.keys().copied().collect();
                    for id in left {
                        self.retire(id);
                    }
                    self.report = Some(Report {
                        usage: self.spent,
                        ..report
                    });
                }
            }
        }
        self.flush(myself);
        self.finish_if_done(myself).await;
    }

    /// `*`, `step` or `step[i]` as a cancel target.
    fn target(&self, text: &str) -> Option<Target> {
        let text = text.trim();
        if text == "*" || text.is_empty() {
            return Some(Target::Run);
        }
        let workflow = self.scheduler.workflow();
        let (name, index) = match text.strip_suffix(']').and_then(|t| t.split_once('[')) {
            Some((name, index)) => (name, Some(index.parse::<usize>().ok()?)),
            None => (text, None),
        };
        let step = workflow.step_id(name)?;
        match index {
            Some(index) if workflow.steps[step].for_each.is_some() => {
                Some(Target::Instance(InstanceId { step, index }))
            }
            _ => Some(Target::Step(step)),
        }
    }

    fn approve(&self, id: &str, decision: ApprovalDecision, reason: Option<String>) {
        let Some((step, index, rest)) = parse_outer(id) else {
            return;
        };
        let Some(s) = self.scheduler.workflow().step_id(step) else {
            return;
        };
        let instance = InstanceId { step: s, index };
        let Some(live) = self.live.get(&instance) else {
            return;
        };
        if let Some(inner) = inner_approval_id(&live.path, rest) {
            let _ = live.actor.cast(StepMsg::Approve(Op::Approve {
                id: inner,
                decision,
                reason,
            }));
        }
    }

    fn record(&self, id: InstanceId) -> Option<(i64, InstanceRecord)> {
        let inst = self.scheduler.instance(id)?;
        let workflow = self.scheduler.workflow();
        Some((
            id.step as i64,
            InstanceRecord {
                step: workflow.steps[id.step].name.clone(),
                index: id.index as i64,
                item: inst.item.as_ref().map(|v| v.to_string()),
                key: inst.key.clone(),
                state: inst.state,
                agent_id: self.agents.get(&id).cloned(),
                output: inst.output.clone(),
                reason: inst.reason.clone(),
                attempts: i64::from(inst.attempts),
                tokens: i64::try_from(self.tokens.get(&id).copied().unwrap_or(0))
                    .unwrap_or(i64::MAX),
            },
        ))
    }

    /// Writes the instances that changed, then lets their events out.
    fn flush(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if self.flushing || (self.dirty.is_empty() && self.held.is_empty()) {
            return;
        }
        let records: Vec<(i64, InstanceRecord)> = std::mem::take(&mut self.dirty)
            .into_iter()
            .filter_map(|id| self.record(id))
            .collect();
        let events = std::mem::take(&mut self.held);
        let Some(store) = self.caller.services.store.clone() else {
            for event in events {
                self.caller.events.send(event);
            }
            return;
        };
        self.flushing = true;
        let run_id = self.run_id.clone();
        let me = myself.clone();
        let sink = self.caller.events.clone();
        tokio::spawn(async move {
            let written = store
                .ask(|reply| StoreRequest::RecordInstances {
                    run_id,
                    instances: records,
                    reply,
                })
                .await;
            for event in events {
                sink.send(event);
            }
            let _ = me.cast(SupervisorMsg::Flushed(written));
        });
    }

    /// The run ends once the machine is done, every state is stored and
    /// every step actor has stopped.
    async fn finish_if_done(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if self.report.is_none()
            || self.flushing
            || !self.dirty.is_empty()
            || !self.live.is_empty()
            || !self.ending.is_empty()
            || !self.waiting.is_empty()
        {
            return;
        }
        let Some(done) = self.args.take() else {
            return;
        };
        let Some(report) = self.report.clone() else {
            return;
        };
        if let Some(store) = &self.caller.services.store {
            let (run_id, status) = (self.run_id.clone(), report.status);
            if let Err(err) = store
                .ask(|reply| StoreRequest::FinishRun {
                    run_id,
                    status,
                    reply,
                })
                .await
            {
                tracing::error!(run_id = %self.run_id, %err, "the run's end could not be stored");
            }
        }
        self.caller.events.send(Event::WorkflowCompleted {
            run_id: self.run_id.clone(),
            status: report.status,
            counts: report
                .counts
                .iter()
                .map(|(state, n)| (state.to_string(), *n as u64))
                .collect(),
        });
        let _ = done.send(report);
        myself.stop(None);
    }
}

/// The roles the caller's agents may take.
pub fn role_names(caller: &Caller) -> Option<BTreeSet<String>> {
    caller
        .services
        .subagents
        .as_ref()
        .map(|s| s.roles.keys().cloned().collect())
}
