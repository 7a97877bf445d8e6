//! Running workflows: a supervisor actor per run, a step actor per running
//! instance, the run in the store.
//!
//! [`start`] records a new run (or takes a stored one to resume), spawns
//! its [`supervisor::SupervisorActor`] and hands back a [`RunHandle`]; the
//! run's events go to the caller's sink. [`Engine`] is the same for the
//! Operate `workflow` tool: it validates the model's plan, runs it under
//! the caller's authority and answers with the report.
//!
//! # Layout
//! - `supervisor`: the run's actor; performs the scheduler's effects,
//!   stores instance states before their events go out.
//! - `step`: one attempt of one instance: the step's agent, watchdogs,
//!   the check, the ids the caller sees.
//! - `check`: a check command under a read-only sandbox.
//! - `verify`: a verifier agent's check: its authority, request, verdict.
//! - `ids`: `step:<name>[<i>]:approval:<n>` and back.
//! - `delegate`: the actor serving the engine's mailbox to sessions.
//! - `live`: the delegated runs in progress, and where an answer to a
//!   step's prompt goes.
//! - `meter`: a step's sub-agents' tokens, counted as the step's.

pub mod delegate;
pub mod ids;
mod live;
mod meter;
mod step;
pub mod supervisor;
pub mod verify;
pub mod worktree;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use cadre_actors::delegation::Caller;
use cadre_actors::store::{RunDraft, StoreRequest};
use cadre_runtime::protocol::ApprovalDecision;
use cadre_runtime::store::{InstanceRecord, StoreError};
use cadre_runtime::tool::{ToolError, ToolOutcome};
use ractor::{Actor, ActorRef};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::cluster::Cluster;
use crate::diagnostic::Source;
use crate::format::json_to_toml;
use crate::model::Workflow;
use crate::scheduler::{Report, Scheduler, Settings, State, Stored};
use crate::validate::{Options, validate};
pub use live::StepsInUse;
use live::{Answer, Delegations, Routed};
use supervisor::{SupervisorActor, SupervisorArgs, SupervisorMsg, role_names};

/// What a run was started with besides its text, stored with it so a
/// resume validates the same workflow the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettings {
    /// `--var` overrides.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// `--max-parallel`.
    #[serde(default)]
    pub max_parallel: Option<u32>,
}

/// A run to start.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The validated workflow.
    pub workflow: Workflow,
    /// Its text, stored with the run.
    pub source: Source,
    /// The file it came from.
    pub file: Option<String>,
    /// Its variables and flags, stored so a resume validates it the same
    /// way.
    pub settings: RunSettings,
    /// Resume this stored run instead of starting a new one.
    pub resume: Option<Resumed>,
    /// Run again what failed before.
    pub retry_failed: bool,
}

/// A stored run being resumed (its lease already taken).
#[derive(Debug, Clone)]
pub struct Resumed {
    /// The run's id.
    pub run_id: String,
    /// Its instances as stored.
    pub instances: Vec<InstanceRecord>,
    /// Agents it started: the resumed run numbers its next after them.
    pub agents: u32,
}

/// A started run.
pub struct RunHandle {
    /// Its id, which `cadre workflow resume` takes.
    pub run_id: String,
    /// Its supervisor: cancel, approve.
    pub supervisor: ActorRef<SupervisorMsg>,
    /// The report, once the run is over (closed if the supervisor crashed).
    pub done: oneshot::Receiver<Report>,
    /// Ends when the supervisor has stopped.
    pub join: tokio::task::JoinHandle<()>,
}

impl RunHandle {
    /// Cancels the run (`*`), a step (`name`) or an instance (`name[i]`).
    pub fn cancel(&self, target: &str) {
        let _ = self
            .supervisor
            .cast(SupervisorMsg::Cancel(target.to_string()));
    }

    /// Answers a step's approval prompt.
    pub fn approve(&self, id: &str, decision: ApprovalDecision, reason: Option<String>) {
        let _ = self.supervisor.cast(SupervisorMsg::Approve {
            id: id.to_string(),
            decision,
            reason,
        });
    }
}

/// Why a run did not start.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store could not record or open the run; see
    /// [`StoreError::is_retryable`].
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller has no store to keep the run in. Not retryable.
    #[error("workflows need a store")]
    NoStore,
    /// The supervisor could not start. Not retryable.
    #[error("the workflow could not start: {0}")]
    Actor(String),
}

/// The results a stored run's instances keep, by key.
fn stored_results(instances: &[InstanceRecord]) -> HashMap<String, Stored> {
    instances
        .iter()
        .filter_map(|i| {
            let state = i.state;
            let kept = matches!(state, State::Verified | State::Finalized | State::Failed);
            (kept && i.key.is_some()).then(|| {
                (
                    i.key.clone().unwrap_or_default(),
                    Stored {
                        state,
                        output: i.output.clone(),
                        reason: i.reason.clone(),
                    },
                )
            })
        })
        .collect()
}

/// Starts (or resumes) a run for `caller`, every step here.
pub async fn start(caller: Caller, launch: Launch) -> Result<RunHandle, StartError> {
    start_on(caller, launch, None).await
}

/// Starts (or resumes) a run for `caller`, its steps placed on `cluster`'s
/// nodes and here by free slots.
pub async fn start_on(
    caller: Caller,
    launch: Launch,
    cluster: Option<Cluster>,
) -> Result<RunHandle, StartError> {
    let store = caller.services.store.clone().ok_or(StartError::NoStore)?;
    let (run_id, stored, next_agent) = match &launch.resume {
        Some(resumed) => (
            resumed.run_id.clone(),
            stored_results(&resumed.instances),
            resumed.agents,
        ),
        None => {
            let id = uuid::Uuid::now_v7().to_string();
            let draft = RunDraft {
                id: id.clone(),
                caller_id: caller.session_id.clone(),
                name: launch.workflow.name.clone(),
                file: launch.file.clone(),
                source: launch.source.text.clone(),
                settings: serde_json::to_string(&launch.settings).unwrap_or_default(),
                workspace: caller.spec.workspace.root().to_path_buf(),
                mode: launch.workflow.mode,
                posture: caller.live.posture(),
            };
            store
                .ask(|reply| StoreRequest::CreateRun(Box::new(draft), reply))
                .await?;
            (id, HashMap::new(), 0)
        }
    };
    let run_dir = caller.runs_dir.join(&run_id);
    let max_parallel = launch
        .settings
        .max_parallel
        .map_or(launch.workflow.max_parallel, |flag| {
            flag.min(launch.workflow.max_parallel)
        });
    let scheduler = Scheduler::new(
        launch.workflow,
        Settings {
            max_parallel: max_parallel.max(1) as usize,
            stored,
            retry_failed: launch.retry_failed,
            outputs_dir: run_dir.join("outputs"),
        },
    );
    let roles = caller
        .services
        .subagents
        .as_ref()
        .map(|s| s.roles.clone())
        .unwrap_or_default();
    let (done, report) = oneshot::channel();
    let args = SupervisorArgs {
        run_id: run_id.clone(),
        scheduler,
        caller,
        run_dir,
        next_agent,
        roles,
        done,
        cluster,
    };
    let (supervisor, join) = Actor::spawn(None, SupervisorActor, args)
        .await
        .map_err(|e| StartError::Actor(e.to_string()))?;
    Ok(RunHandle {
        run_id,
        supervisor,
        done: report,
        join,
    })
}

/// The engine behind the Operate `workflow` tool: one per host, shared by
/// every session; it knows the runs in progress to route approvals.
/// Sessions reach it through its mailbox ([`delegate::serve`]).
#[derive(Default)]
pub struct Engine {
    /// The delegated runs in progress: the session tree that delegated
    /// each, the step names its prompts carry and its supervisor, to which
    /// that session's answers to those prompts are passed (`live.rs`).
    live: Mutex<Delegations<ActorRef<SupervisorMsg>>>,
    /// The nodes its runs' steps may run on.
    cluster: Option<Cluster>,
}

/// A delegated run's place in [`Engine::live`], given up however its
/// `run` ends (done, failed, or dropped by its caller).
struct Admitted<'a> {
    engine: &'a Engine,
    key: u64,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.engine.runs().ended(self.key);
    }
}

/// A delegated run whose caller may go away before its report: dropped
/// unanswered (the `workflow` call cancelled with its turn), it cancels
/// the run, whose steps would otherwise go on for nobody.
struct Orphanable(Option<ActorRef<SupervisorMsg>>);

impl Drop for Orphanable {
    fn drop(&mut self) {
        if let Some(supervisor) = self.0.take() {
            let _ = supervisor.cast(SupervisorMsg::Cancel("*".into()));
        }
    }
}

/// Step names a host keeps for a run of a session it answers itself (the
/// shell's `/workflow`), from [`Engine::reserve`]; given back when dropped.
pub struct Reserved {
    engine: Arc<Engine>,
    key: u64,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.engine.runs().ended(self.key);
    }
}

impl std::fmt::Debug for Reserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reserved").field("key", &self.key).finish()
    }
}

impl Engine {
    /// An engine with no runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs steps on `cluster`'s nodes too.
    pub fn with_cluster(mut self, cluster: Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Validates and runs `plan` (the workflow as JSON) for `caller`;
    /// resolves, once the run is done, blocked or out of budget, to the
    /// report the model reads. An invalid plan is an error naming each
    /// problem, and nothing runs; so is a plan whose step names a run of
    /// the same session in progress also has (their prompts would share
    /// ids).
    pub async fn run(&self, caller: Caller, plan: serde_json::Value) -> ToolOutcome {
        let text = json_to_toml(&plan).map_err(|e| ToolError::invalid(e.to_string()))?;
        let source = Source {
            name: "workflow".into(),
            text,
            positions: false,
        };
        let options = Options {
            vars: BTreeMap::new(),
            roles: role_names(&caller),
        };
        let validated = validate(&source, &options).map_err(|invalid| {
            ToolError::invalid(format!(
                "the workflow is not valid; nothing ran:\n{}",
                invalid.render()
            ))
        })?;
        // A run that asks nobody shows no prompt, so it reserves no names.
        let steps = match caller.spec.interactive {
            true => validated
                .workflow
                .steps
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            false => BTreeSet::new(),
        };
        let key = self
            .runs()
            .admit(&caller.spec.session_id, steps)
            .map_err(|taken| ToolError::invalid(taken.to_string()))?;
        let _admitted = Admitted { engine: self, key };
        let launch = Launch {
            workflow: validated.workflow,
            source,
            file: None,
            settings: RunSettings::default(),
            resume: None,
            retry_failed: false,
        };
        let handle = start_on(caller, launch, self.cluster.clone())
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let run_id = handle.run_id.clone();
        let mut orphanable = Orphanable(Some(handle.supervisor.clone()));
        {
            // Passed under the lock, so no newer answer overtakes them.
            let mut runs = self.runs();
            for answer in runs.started(key, handle.supervisor.clone()) {
                pass(&handle.supervisor, answer);
            }
        }
        let report = handle.done.await;
        orphanable.0 = None;
        let report = report.map_err(|_| {
            ToolError::failed(format!("workflow run {run_id} stopped without a report"))
        })?;
        Ok(format!(
            "run {run_id}\n{}",
            report.render(REPORT_OUTPUT_BYTES)
        ))
    }

    /// Passes a person's answer to a step's prompt (`id`, given to
    /// `session`) to the one run of that session's tree in progress that
    /// has the step; false when none has it (the answer is refused).
    pub fn approve(
        &self,
        session: &str,
        id: &str,
        decision: ApprovalDecision,
        reason: Option<String>,
    ) -> bool {
        let answer = Answer {
            id: id.to_string(),
            decision,
            reason,
        };
        // Passed under the lock (a cast does not wait), so answers reach
        // a run in the order they were given.
        let mut runs = self.runs();
        match runs.route(session, answer) {
            Routed::To(supervisor, answer) => {
                pass(&supervisor, answer);
                true
            }
            Routed::Held => true,
            Routed::Nobody(_) => false,
        }
    }

    /// Keeps `steps` for a run of `session` that the host answers itself
    /// (the shell's `/workflow`), while the returned [`Reserved`] lives: a
    /// run the session delegates meanwhile must use other names, so every
    /// prompt id of the session stays one step's.
    pub fn reserve(
        self: &Arc<Self>,
        session: &str,
        steps: BTreeSet<String>,
    ) -> Result<Reserved, StepsInUse> {
        let key = self.runs().reserve(session, steps)?;
        Ok(Reserved {
            engine: self.clone(),
            key,
        })
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, Delegations<ActorRef<SupervisorMsg>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Gives a run's supervisor a person's answer to one of its prompts.
fn pass(supervisor: &ActorRef<SupervisorMsg>, answer: Answer) {
    let _ = supervisor.cast(SupervisorMsg::Approve {
        id: answer.id,
        decision: answer.decision,
        reason: answer.reason,
    });
}

/// The cap on each output in a report the model reads.
const REPORT_OUTPUT_BYTES: usize = 4000;
