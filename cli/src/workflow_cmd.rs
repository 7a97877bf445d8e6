//! `cadre workflow validate|run|resume|list|show|cancel`.
//!
//! `run` and `resume` build a host like `exec` (the same session flags),
//! start the run through the workflow engine and follow its events: a live
//! view on a terminal, plain lines elsewhere, or JSON; then a final table.
//! `list`, `show` and `cancel` read the store offline; `cancel` of a run
//! another process runs leaves a request in the store, which that process
//! takes within half a second.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cadre_actors::EventSink;
use cadre_actors::store::StoreRequest;
use cadre_runtime::protocol::{Event, ModelSource};
use cadre_runtime::store::{LeaseOwner, RunStatus, Store, StoreError, store_path};
use cadre_workflows::diagnostic::Source;
use cadre_workflows::engine::{Launch, Resumed, RunSettings, StartError};
use cadre_workflows::model::{ForEach, Workflow};
use cadre_workflows::scheduler::Report;
use cadre_workflows::validate::{Options, validate};
use cadre_workflows::{Host, RunError};
use serde_json::json;

use crate::args::{
    OutputFormat, WorkflowAction, WorkflowArgs, WorkflowResumeArgs, WorkflowRunArgs,
    WorkflowValidateArgs,
};
use crate::config::{Environment, RunConfig};
use crate::exit::{self, CliError};
use crate::launch::{host, host_error, session_options};
use crate::render::TextView;
use crate::workflow_view::{Progress, table};

/// Runs one `cadre workflow` subcommand.
pub fn run(
    args: WorkflowArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, CliError> {
    let data_dir = |given: Option<PathBuf>| {
        given
            .or_else(|| crate::default_data_dir(&env))
            .ok_or_else(|| CliError::usage("no data directory: pass --data-dir or set CADRE_HOME"))
    };
    match args.action {
        WorkflowAction::Validate(a) => validate_cmd(a, &env, config_dir.as_deref()),
        WorkflowAction::Run(a) => crate::block_on(run_cmd(*a, env, config_dir)),
        WorkflowAction::Resume(a) => crate::block_on(resume_cmd(*a, env, config_dir)),
        WorkflowAction::List { limit, data_dir: d } => list(&data_dir(d)?, limit),
        WorkflowAction::Show { run, data_dir: d } => show(&data_dir(d)?, &run),
        WorkflowAction::Cancel {
            run,
            target,
            data_dir: d,
        } => cancel(&data_dir(d)?, &run, target.as_deref()),
    }
}

/// `KEY=VALUE` pairs.
fn vars(given: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    given
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(CliError::usage(format!(
                "--var '{pair}': expected KEY=VALUE"
            ))),
        })
        .collect()
}

fn read(file: &Path) -> Result<Source, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    Ok(Source::file(file.display().to_string(), text))
}

/// Validates; prints warnings; an invalid file is printed and is exit 2.
fn checked(source: &Source, options: &Options) -> Result<Workflow, CliError> {
    match validate(source, options) {
        Ok(valid) => {
            for warning in &valid.warnings {
                crate::errln!("{}", source.render(warning));
            }
            Ok(valid.workflow)
        }
        Err(invalid) => Err(CliError::usage(invalid.render())),
    }
}

fn validate_cmd(
    args: WorkflowValidateArgs,
    env: &Environment,
    config_dir: Option<&Path>,
) -> Result<u8, CliError> {
    let paths = cadre_runtime::config::ConfigPaths {
        user: config_dir.map(|d| d.join("config.toml")),
        workspace: args.workspace.clone().or_else(|| env.current_dir.clone()),
        explicit: args.config.clone(),
        trust_book: config_dir.map(|d| d.join(cadre_runtime::trust::TRUST_FILE)),
    };
    let config =
        cadre_runtime::config::Config::load(&paths).map_err(|e| CliError::config(e.to_string()))?;
    let source = read(&args.file)?;
    let options = Options {
        vars: vars(&args.vars)?,
        roles: Some(config.roles.keys().cloned().collect()),
    };
    let workflow = checked(&source, &options)?;
    crate::outln!(
        "{}: workflow {} is valid ({})",
        source.name,
        workflow.name,
        crate::render::count(workflow.steps.len() as u64, "step")
    );
    Ok(exit::SUCCESS)
}

/// The run configuration from the session flags, as `exec` builds it.
fn run_config(
    session: crate::args::SessionArgs,
    env: Environment,
    config_dir: Option<&Path>,
    output: OutputFormat,
) -> Result<RunConfig, CliError> {
    if session.resume.is_some() || session.continue_latest {
        return Err(CliError::usage(
            "--resume and --continue are for sessions; resume a run with `cadre workflow resume RUN`",
        ));
    }
    let files = crate::load_config(&session, &env, config_dir)?;
    let defaults = crate::load_defaults(config_dir)?;
    let mut config = RunConfig::from_session(session, env, files, defaults)?;
    config
        .sandbox
        .protected
        .extend(config_dir.map(Path::to_path_buf));
    config.protect_config_dir(config_dir);
    config.output = output;
    Ok(config)
}

async fn run_cmd(
    args: WorkflowRunArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, CliError> {
    let cluster_settings = crate::load_config(&args.session, &env, config_dir.as_deref())?
        .settings
        .cluster;
    let env_for_cluster = env.clone();
    let mut config = run_config(args.session, env, config_dir.as_deref(), args.output_format)?;
    let source = read(&args.file)?;
    let settings = RunSettings {
        vars: vars(&args.vars)?,
        max_parallel: args.max_parallel,
    };
    let options = Options {
        vars: settings.vars.clone(),
        roles: Some(config.roles.keys().cloned().collect()),
    };
    let workflow = checked(&source, &options)?;
    if args.dry_run {
        crate::out!("{}", dry_run(&workflow, &config, args.max_parallel));
        return Ok(exit::SUCCESS);
    }
    config.cluster =
        crate::cluster_cmd::coordinator(&args.cluster, &cluster_settings, &env_for_cluster).await?;
    let host = host(&config).await?;
    let launch = Launch {
        workflow,
        file: Some(args.file.display().to_string()),
        source,
        settings,
        resume: None,
        retry_failed: false,
    };
    drive(host, &config, launch).await
}

async fn resume_cmd(
    args: WorkflowResumeArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, CliError> {
    let cluster_settings = crate::load_config(&args.session, &env, config_dir.as_deref())?
        .settings
        .cluster;
    let env_for_cluster = env.clone();
    let mut config = run_config(args.session, env, config_dir.as_deref(), args.output_format)?;
    // The run's steps talk to the model the run was started with, unless a
    // flag changes it: a resume never finishes a run on the demo.
    let stored = open(&config.data_dir)?
        .resolve_run(&args.run)
        .map_err(store_error)?;
    let record = crate::launch::recorded(&config.data_dir, &stored.id)?;
    crate::launch::keep_recorded(&mut config, record.as_ref())?;
    config.cluster =
        crate::cluster_cmd::coordinator(&args.cluster, &cluster_settings, &env_for_cluster).await?;
    let host = host(&config).await?;
    let spec = args.run.clone();
    let opened = host
        .sessions()
        .store()
        .ask(|reply| StoreRequest::OpenRun { spec, reply })
        .await
        .map_err(store_error)?;
    let run = opened.run;
    let mut settings: RunSettings = serde_json::from_str(&run.settings).unwrap_or_default();
    settings.max_parallel = args.max_parallel.or(settings.max_parallel);
    // An edited file runs as edited: what changed (and what builds on it)
    // runs again, the rest is taken from the store.
    let source = match run.file.as_deref().map(Path::new).filter(|f| f.exists()) {
        Some(file) => read(file)?,
        None => Source::file(
            run.file.clone().unwrap_or_else(|| "workflow".into()),
            run.source.clone(),
        ),
    };
    let options = Options {
        vars: settings.vars.clone(),
        roles: Some(config.roles.keys().cloned().collect()),
    };
    let workflow = checked(&source, &options)?;
    config.workspace = PathBuf::from(&run.workspace);
    let launch = Launch {
        workflow,
        source,
        file: run.file.clone(),
        settings,
        resume: Some(Resumed {
            run_id: run.id.clone(),
            instances: opened.instances,
            agents: opened.agents,
        }),
        retry_failed: args.retry_failed,
    };
    drive(host, &config, launch).await
}

fn store_error(err: StoreError) -> CliError {
    match err {
        StoreError::NotFound(why) => CliError::usage(why),
        other if other.is_retryable() => CliError::tempfail(other.to_string()),
        other => CliError::config(other.to_string()),
    }
}

/// Starts the run and follows it to its end; the exit code says how it
/// ended.
async fn drive(host: Host, config: &RunConfig, launch: Launch) -> Result<u8, CliError> {
    let (tx, mut events) = cadre_actors::events::channel();
    let handle = host
        .run(launch, &session_options(config, false), EventSink::new(tx))
        .await
        .map_err(|e| match e {
            RunError::Host(e) => host_error(e),
            RunError::Start(StartError::Store(store)) => store_error(store),
            other @ (RunError::Start(_) | RunError::Cluster(_)) => {
                CliError::internal(other.to_string())
            }
        })?;
    crate::launch::record(&config.data_dir, &handle.run_id, config)?;
    let demo = config.model_source == ModelSource::Demo;
    if demo {
        crate::errln!("{}", crate::exec::DEMO_START);
    }
    let mut out = Output::new(config.output);
    let mut done = handle.done;
    let mut interrupted = false;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let report = loop {
        tokio::select! {
            Some(envelope) = events.recv() => out.event(&envelope.event),
            report = &mut done => break report,
            _ = tick.tick() => out.redraw(),
            _ = tokio::signal::ctrl_c() => {
                if interrupted {
                    return Ok(exit::INTERRUPTED);
                }
                interrupted = true;
                crate::errln!("cadre: cancelling the run (Ctrl-C again to quit at once)");
                let _ = handle.supervisor.cast(cadre_workflows::engine::supervisor::SupervisorMsg::Cancel("*".into()));
            }
        }
    };
    while let Ok(envelope) = events.try_recv() {
        out.event(&envelope.event);
    }
    let _ = handle.join.await;
    host.close().await;
    let Ok(report) = report else {
        return Err(CliError::internal(
            "the run's supervisor stopped without a report",
        ));
    };
    out.finish(&handle.run_id, &report);
    if demo {
        crate::errln!("{}", crate::exec::DEMO_END);
    }
    Ok(match report.status {
        RunStatus::Completed => exit::SUCCESS,
        RunStatus::Cancelled if interrupted => exit::INTERRUPTED,
        RunStatus::Cancelled | RunStatus::Failed | RunStatus::Running => exit::AGENT_FAILED,
    })
}

/// Where a run's events go.
struct Output {
    format: OutputFormat,
    progress: Progress,
    /// Redraw in place (a terminal): how many lines were drawn last.
    live: Option<usize>,
    plain: TextView,
}

impl Output {
    fn new(format: OutputFormat) -> Self {
        let live = (format == OutputFormat::Text && std::io::stderr().is_terminal()).then_some(0);
        Self {
            format,
            progress: Progress::default(),
            live,
            plain: TextView::default(),
        }
    }

    fn event(&mut self, event: &Event) {
        self.progress.apply(event, Instant::now());
        match self.format {
            OutputFormat::StreamJson => {
                if let Ok(line) = serde_json::to_string(event) {
                    crate::outln!("{line}");
                }
            }
            OutputFormat::Json => {}
            OutputFormat::Text => match self.live {
                Some(_) => {
                    // Prompts and decisions still print, above the view.
                    if matches!(
                        event,
                        Event::ApprovalRequested { .. }
                            | Event::PermissionDecision { .. }
                            | Event::AutonomyPaused { .. }
                    ) && let Some(piece) = self.plain.event(event)
                    {
                        self.clear();
                        crate::err!("{}", piece.text);
                    }
                    self.redraw();
                }
                None => {
                    if let Some(piece) = self.plain.event(event) {
                        crate::err!("{}", piece.text);
                    }
                }
            },
        }
    }

    fn clear(&mut self) {
        if let Some(drawn) = self.live.as_mut()
            && *drawn > 0
        {
            crate::err!("\x1b[{}A\x1b[J", *drawn);
            *drawn = 0;
        }
    }

    fn redraw(&mut self) {
        if self.live.is_none() {
            return;
        }
        self.clear();
        let lines = self.progress.lines(Instant::now());
        crate::err!(
            "{}",
            lines.iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        self.live = Some(lines.len());
    }

    fn finish(&mut self, run_id: &str, report: &Report) {
        match self.format {
            OutputFormat::Text => {
                self.redraw();
                self.live = None;
                crate::out!("{}", table(report));
                crate::outln!("run {run_id}");
            }
            OutputFormat::Json => {
                let value = json!({"run_id": run_id, "report": report});
                crate::outln!("{value}");
            }
            OutputFormat::StreamJson => {}
        }
    }
}

/// What `--dry-run` prints: the instances that would launch, their roles,
/// modes and models, and the limits.
/// The model a step uses when neither it nor its role names one, as a
/// person reads it.
fn model_name(choice: &crate::config::ModelChoice) -> String {
    use crate::config::ModelChoice;
    match choice {
        ModelChoice::Server { model, .. } => model.clone(),
        ModelChoice::Script(path) => format!("the script {}", path.display()),
        ModelChoice::ScriptText { name, .. } => format!("the script {name}"),
        ModelChoice::Demo => "the built-in demo".to_string(),
        ModelChoice::Client(client) => client.model().to_string(),
    }
}

/// The provider and reasoning effort a step's requests go with (its
/// role's, else the session's): ` · provider local · effort high`, each
/// left out when nothing sets it.
fn served_by(
    role: Option<&cadre_runtime::config::RoleConfig>,
    session: &crate::config::ModelChoice,
) -> String {
    let options = match session {
        crate::config::ModelChoice::Server { options, .. } => Some(options),
        crate::config::ModelChoice::Script(_)
        | crate::config::ModelChoice::ScriptText { .. }
        | crate::config::ModelChoice::Demo
        | crate::config::ModelChoice::Client(_) => None,
    };
    let provider = role
        .and_then(|r| r.provider.clone())
        .or_else(|| role.and_then(|r| r.base_url.clone()))
        .or_else(|| options.and_then(|o| o.provider.clone()));
    let effort = role
        .and_then(|r| r.reasoning_effort)
        .or_else(|| options.and_then(|o| o.params.reasoning_effort));
    let mut out = String::new();
    if let Some(provider) = provider {
        out.push_str(&format!(" · provider {provider}"));
    }
    if let Some(effort) = effort {
        out.push_str(&format!(" · effort {effort}"));
    }
    out
}

fn dry_run(workflow: &Workflow, config: &RunConfig, max_parallel: Option<u32>) -> String {
    let parallel = max_parallel.map_or(workflow.max_parallel, |m| m.min(workflow.max_parallel));
    let model = model_name(&config.model);
    let mut out = format!(
        "workflow {} · {} · up to {parallel} at once · posture {} (ceiling {})\n",
        workflow.name,
        crate::render::count(workflow.steps.len() as u64, "step"),
        config.posture,
        workflow
            .posture
            .map_or_else(|| "none".to_string(), |p| p.to_string())
    );
    for step in &workflow.steps {
        let instances = match &step.for_each {
            None => "1 instance".to_string(),
            Some(ForEach::Literal(items)) => format!("{} instances", items.len()),
            Some(ForEach::Output(source)) => format!(
                "one instance per item of {}'s output",
                workflow.steps[*source].name
            ),
        };
        let role = step.role.as_deref().unwrap_or("-");
        let model = step
            .model
            .clone()
            .or_else(|| {
                step.role
                    .as_ref()
                    .and_then(|r| config.roles.get(r)?.model.clone())
            })
            .unwrap_or_else(|| model.clone());
        let role_config = step.role.as_ref().and_then(|r| config.roles.get(r));
        out.push_str(&format!(
            "- {}: {instances} · mode {} · role {role} · model {model}{}{}{}\n",
            step.name,
            step.mode,
            served_by(role_config, &config.model),
            if step.needs.is_empty() {
                String::new()
            } else {
                format!(
                    " · after {}",
                    step.needs
                        .iter()
                        .map(|&n| workflow.steps[n].name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            step.check
                .as_ref()
                .map(|c| format!(" · check {}", c.describe()))
                .unwrap_or_default()
        ));
    }
    let budget = &workflow.budget;
    out.push_str(&format!(
        "budget: {} tokens, {} agents\n",
        budget
            .tokens
            .map_or_else(|| "no limit on".to_string(), |t| t.to_string()),
        budget
            .agents
            .map_or_else(|| "no limit on".to_string(), |a| a.to_string())
    ));
    out
}

fn open(data_dir: &Path) -> Result<Store, CliError> {
    Store::open(&store_path(data_dir)).map_err(|e| CliError::config(e.to_string()))
}

fn list(data_dir: &Path, limit: usize) -> Result<u8, CliError> {
    let store = open(data_dir)?;
    let runs = store
        .runs(limit)
        .map_err(|e| CliError::internal(e.to_string()))?;
    if runs.is_empty() {
        crate::errln!("no workflow runs in {}", data_dir.display());
    }
    for run in runs {
        crate::outln!(
            "{}  {:<11}  {}  {}",
            run.id,
            shown_status(&store, &run),
            run.name,
            run.file.as_deref().unwrap_or("(Operate)")
        );
    }
    Ok(exit::SUCCESS)
}

/// A run's status as people need it: the stored one, except that a run
/// stored as running whose process is gone (killed, crashed) is
/// `interrupted`, and resumable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShownStatus {
    /// As stored.
    Stored(RunStatus),
    /// Stored as running, with no process holding its lease.
    Interrupted,
}

impl std::fmt::Display for ShownStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShownStatus::Stored(status) => status.fmt(f),
            // `pad`, so the width of `cadre workflow list` applies.
            ShownStatus::Interrupted => f.pad("interrupted"),
        }
    }
}

fn shown_status(store: &Store, run: &cadre_runtime::store::RunRecord) -> ShownStatus {
    let interrupted =
        run.status == RunStatus::Running && !store.lease_is_held(&run.id).unwrap_or(true);
    match interrupted {
        true => ShownStatus::Interrupted,
        false => ShownStatus::Stored(run.status),
    }
}

fn show(data_dir: &Path, spec: &str) -> Result<u8, CliError> {
    let store = open(data_dir)?;
    let run = store.resolve_run(spec).map_err(store_error)?;
    let instances = store
        .instances(&run.id)
        .map_err(|e| CliError::internal(e.to_string()))?;
    let status = shown_status(&store, &run);
    crate::outln!("run {} · workflow {} · {status}", run.id, run.name);
    if status == ShownStatus::Interrupted {
        crate::outln!(
            "its process is gone; `cadre workflow resume {}` runs what it left unfinished",
            run.id
        );
    }
    crate::outln!("workspace {}", run.workspace);
    if let Some(file) = &run.file {
        crate::outln!("file {file}");
    }
    for i in instances {
        let name = if i.item.is_some() {
            format!("{}[{}]", i.step, i.index)
        } else {
            i.step.clone()
        };
        // What a finished instance answered, even when a resume restored
        // it; why an unfinished one ended.
        let restored = i
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("restored from"));
        let note = match (&i.output, &i.reason) {
            (Some(output), _) if restored => format!("(restored) {output}"),
            (_, Some(reason)) => reason.clone(),
            (Some(output), None) => output.clone(),
            (None, None) => String::new(),
        };
        let note: String = note
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(100)
            .collect();
        crate::outln!(
            "  {name:<24} {:<10} attempts {} · {} tokens  {note}",
            i.state,
            i.attempts,
            i.tokens
        );
    }
    Ok(exit::SUCCESS)
}

fn cancel(data_dir: &Path, spec: &str, target: Option<&str>) -> Result<u8, CliError> {
    let mut store = open(data_dir)?;
    let run = store.resolve_run(spec).map_err(store_error)?;
    let me = LeaseOwner::this_process();
    match store.acquire_lease(&run.id, &me) {
        // Nobody runs it: a whole-run cancel is recorded; what it left
        // unfinished stays so until a resume.
        Ok(()) => {
            let result = match target {
                None => store.finish_run(&run.id, RunStatus::Cancelled).map(|()| {
                    crate::outln!("run {} is not running; marked cancelled", run.id);
                    exit::SUCCESS
                }),
                Some(target) => {
                    crate::errln!(
                        "cadre: run {} is not running; nothing of {target} runs",
                        run.id
                    );
                    Ok(exit::AGENT_FAILED)
                }
            };
            let _ = store.release_lease(&run.id, &me);
            result.map_err(|e| CliError::internal(e.to_string()))
        }
        Err(StoreError::Leased { holder, .. }) => {
            store
                .request_cancel(&run.id, target.unwrap_or("*"))
                .map_err(|e| CliError::internal(e.to_string()))?;
            crate::outln!(
                "asked {holder}, which runs {}, to cancel {}",
                run.id,
                target.unwrap_or("the run")
            );
            Ok(exit::SUCCESS)
        }
        Err(other) => Err(store_error(other)),
    }
}
