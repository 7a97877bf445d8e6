//! The `cadre` command line.
//!
//! Arguments are parsed into plain data ([`args`]), validated into a run
//! configuration without I/O ([`config`]), and only then are actors started
//! ([`launch`], for [`exec`] and the [`shell`]). Errors map to the
//! documented exit codes ([`exit`]).
//!
//! # Layout
//! - [`args`]: clap definitions.
//! - [`config`]: validation into `RunConfig`; building the model client.
//! - [`launch`]: starting a session from a `RunConfig` (store, model,
//!   tools, sub-agents).
//! - [`exec`]: `cadre exec`.
//! - [`shell`]: `cadre` with no subcommand, the interactive shell.
//! - [`config_cmd`]: `cadre config get|set|list` over `settings.toml`.
//! - [`sessions_cmd`]: `cadre sessions list|show|fork` and `cadre plan …`,
//!   offline against the store.
//! - [`attach`]: what a session gets besides the built-ins: MCP servers'
//!   tools and workspace snapshots.
//! - [`mcp_cmd`]: `cadre mcp list`.
//! - [`restore_cmd`]: `cadre restore list|apply`, offline against the
//!   snapshots and the store.
//! - [`workflow_cmd`]: `cadre workflow validate|run|resume|list|show|cancel`.
//! - [`workflow_view`]: a workflow run's progress and final table, with no I/O.
//! - [`cluster_cmd`]: `cadre node`, and the nodes of `workflow run --nodes`.
//! - [`goal_cmd`]: `cadre exec --goal` flags, goal exit codes, `cadre goal show|pause|resume|clear|budget`.
//! - [`render`]: text, json and stream-json renderings of the event stream.
//! - [`exit`]: exit codes.
//!
//! **Invariant:** this is the only crate that reads the process environment
//! or writes to stdout.

pub mod args;
pub mod attach;
pub mod cluster_cmd;
pub mod config;
pub mod config_cmd;
pub mod exec;
pub mod exit;
pub mod goal_cmd;
pub mod launch;
pub mod mcp_cmd;
pub mod render;
pub mod restore_cmd;
pub mod sessions_cmd;
pub mod shell;
pub mod workflow_cmd;
pub mod workflow_view;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use cadre_runtime::config::{Config, ConfigPaths};
use cadre_runtime::settings::Settings;

use crate::args::{Cli, Command};
use crate::config::{Environment, RunConfig, UserDefaults};

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let cli = match parsed {
        Ok((cli, matches)) => {
            if cli.command.is_some()
                && let Some(flag) = shell_flag(&matches)
            {
                return finish(Err(exit::CliError::usage(format!(
                    "{flag} is a flag of the shell; put it after the subcommand"
                ))));
            }
            cli
        }
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    init_tracing(cli.verbose);
    let env = environment();
    let config_dir = cli
        .config_dir
        .or_else(|| env.platform_config_dir.as_ref().map(|d| d.join("cadre")));
    finish(match cli.command {
        None => run_shell(cli.session, env, config_dir),
        Some(Command::Exec(args)) => run_exec(*args, env, config_dir),
        // Settings need no async runtime; not starting one keeps `config` fast.
        Some(Command::Sessions(args)) => {
            match args.data_dir.clone().or_else(|| default_data_dir(&env)) {
                Some(dir) => sessions_cmd::sessions(args, dir),
                None => Err(exit::CliError::usage(
                    "no data directory: pass --data-dir or set CADRE_HOME",
                )),
            }
        }
        Some(Command::Plan(args)) => match args.data_dir.clone().or_else(|| default_data_dir(&env))
        {
            Some(dir) => sessions_cmd::plan(args, dir),
            None => Err(exit::CliError::usage(
                "no data directory: pass --data-dir or set CADRE_HOME",
            )),
        },
        Some(Command::Restore(args)) => restore_cmd::run(args, &env, config_dir.as_deref()),
        Some(Command::Mcp(args)) => block_on(mcp_cmd::run(
            args,
            env.current_dir.clone(),
            config_dir.clone(),
        )),
        Some(Command::Workflow(args)) => workflow_cmd::run(args, env, config_dir),
        Some(Command::Node(args)) => block_on(cluster_cmd::node(*args, env, config_dir)),
        Some(Command::Goal(args)) => match args.data_dir.clone().or_else(|| default_data_dir(&env))
        {
            Some(dir) => goal_cmd::run(args, dir),
            None => Err(exit::CliError::usage(
                "no data directory: pass --data-dir or set CADRE_HOME",
            )),
        },
        Some(Command::Config(args)) => match config_dir {
            Some(dir) => config_cmd::run(args, &Settings::in_dir(&dir)),
            None => Err(exit::CliError::usage(
                "no configuration directory: pass --config-dir or set CADRE_CONFIG_DIR",
            )),
        },
    })
}

fn run_exec(
    args: args::ExecArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, exit::CliError> {
    block_on(async {
        let files = load_config(&args.session, &env, config_dir.as_deref())?;
        let defaults = load_defaults(config_dir.as_deref())?;
        let mut config = RunConfig::from_args(args, env, files, defaults)?;
        config.sandbox.protected.extend(config_dir.clone());
        config.protect_config_dir(config_dir.as_deref());
        exec::run(config).await
    })
}

fn run_shell(
    args: args::SessionArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, exit::CliError> {
    block_on(async {
        let files = load_config(&args, &env, config_dir.as_deref())?;
        let defaults = load_defaults(config_dir.as_deref())?;
        let mut config = RunConfig::from_session(args, env, files, defaults)?;
        config.sandbox.protected.extend(config_dir.clone());
        config.protect_config_dir(config_dir.as_deref());
        let settings = config_dir.as_deref().map(Settings::in_dir);
        shell::run(config, settings).await
    })
}

/// Runs a session host on a fresh async runtime.
pub(crate) fn block_on(
    host: impl Future<Output = Result<u8, exit::CliError>>,
) -> Result<u8, exit::CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            exit::CliError::internal(format!("cannot start the async runtime: {err}"))
        })?;
    let result = runtime.block_on(host);
    // Tool tasks still running (a killed turn's bash, say) must not hold the
    // process open.
    runtime.shutdown_background();
    result
}

/// A shell flag typed before a subcommand (`cadre --mode plan exec …`),
/// which the subcommand would silently ignore. Global flags belong anywhere.
fn shell_flag(matches: &clap::ArgMatches) -> Option<String> {
    let command = Cli::command();
    matches
        .ids()
        // A subcommand's global flags show up here too; only the shell's count.
        .filter_map(|id| command.get_arguments().find(|arg| arg.get_id() == id))
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine))
        .find(|arg| !arg.is_global_set())
        .map(|arg| match arg.get_long() {
            Some(long) => format!("--{long}"),
            None => arg.get_id().to_string(),
        })
}

/// Prints an error and maps the result to the exit code. Every exit path
/// passes here: commands still running (a turn's `bash` that the runtime,
/// shut down in the background, never dropped) are killed first.
fn finish(result: Result<u8, exit::CliError>) -> ExitCode {
    cadre_runtime::sandbox::kill_live_groups();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("cadre: {}", err.message);
            err.exit_code()
        }
    }
}

/// The platform data directory + cadre.
pub(crate) fn default_data_dir(env: &Environment) -> Option<PathBuf> {
    env.platform_data_dir.as_ref().map(|d| d.join("cadre"))
}

fn environment() -> Environment {
    Environment {
        api_key: std::env::var("OPENAI_API_KEY").ok(),
        current_dir: std::env::current_dir().ok(),
        platform_data_dir: dirs::data_dir(),
        platform_config_dir: dirs::config_dir(),
        vars: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
        home: dirs::home_dir(),
    }
}

/// Reads the user, project, local and `--config` files; the user's is in
/// cadre's configuration directory.
pub(crate) fn load_config(
    args: &args::SessionArgs,
    env: &Environment,
    config_dir: Option<&Path>,
) -> Result<Config, exit::CliError> {
    let paths = ConfigPaths {
        user: config_dir.map(|d| d.join("config.toml")),
        workspace: args.workspace.clone().or_else(|| env.current_dir.clone()),
        explicit: args.config.clone(),
    };
    Config::load(&paths).map_err(|e| exit::CliError::config(e.to_string()))
}

/// Reads the user's defaults from `settings.toml`, the lowest layer.
pub(crate) fn load_defaults(config_dir: Option<&Path>) -> Result<UserDefaults, exit::CliError> {
    let Some(dir) = config_dir else {
        return Ok(UserDefaults::default());
    };
    let settings = Settings::in_dir(dir);
    let error = config_cmd::cli_error;
    Ok(UserDefaults {
        mode: settings.default_mode().map_err(error)?,
        posture: settings.default_posture().map_err(error)?,
        model: settings.model().map_err(error)?,
        plan_agent_entry: settings
            .get("plan.agent_entry")
            .map_err(error)?
            .and_then(|v| v.as_bool()),
    })
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    // ractor_cluster warns of every closed peer connection; cadre says
    // what a closed or refused peer means itself.
    let default = match verbose {
        0 => "warn,ractor_cluster=error",
        1 => "info,ractor_cluster=warn",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
