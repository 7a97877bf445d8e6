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
//! - [`acp`]: `cadre acp`, the Agent Client Protocol over stdio, for editors.
//! - [`shell`]: `cadre` with no subcommand, the interactive shell.
//! - [`config_cmd`]: `cadre config get|set|list` over `settings.toml`.
//! - [`trust_cmd`]: `cadre trust show|yes|no` and `/trust`: a workspace's
//!   trust; the notice of what an untrusted project's config lost.
//! - [`sessions_cmd`]: `cadre sessions list|show|fork` and `cadre plan …`,
//!   offline against the store.
//! - [`attach`]: what a session gets besides the built-ins: MCP servers'
//!   tools and workspace snapshots.
//! - [`mcp_cmd`]: `cadre mcp list`.
//! - [`mcp_serve`]: `cadre mcp serve`, cadre as an MCP server for other
//!   agents.
//! - [`lease`]: an offline command's write under the session's lease.
//! - [`restore_cmd`]: `cadre restore list|apply`, offline against the
//!   snapshots and the store.
//! - [`workflow_cmd`]: `cadre workflow validate|run|resume|list|show|cancel`.
//! - [`workflow_view`]: a workflow run's progress and final table, with no I/O.
//! - [`cluster_cmd`]: `cadre node`, and the nodes of `workflow run --nodes`.
//! - [`goal_cmd`]: `cadre exec --goal` flags, goal exit codes, `cadre goal show|pause|resume|clear|budget`.
//! - [`render`]: text, json and stream-json renderings of the event stream.
//! - [`printable`]: control characters in text for a terminal made visible.
//! - [`spinner`]: the spinner a terminal shows while a turn waits for the
//!   model.
//! - [`exit`]: exit codes.
//! - [`out`]: every write to stdout and stderr; a closed reader is a quiet
//!   exit.
//! - [`followup`]: the commands cadre prints for a person to run next.
//!
//! **Invariant:** this is the only crate that reads the process environment
//! or writes to stdout, and it writes only through [`out`].

// `print!` and friends panic on a closed pipe: writes go through `out`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod acp;
pub mod args;
pub mod attach;
pub mod cluster_cmd;
pub mod config;
pub mod config_cmd;
pub mod exec;
pub mod exit;
pub mod followup;
pub mod goal_cmd;
pub mod launch;
pub mod lease;
pub mod mcp_cmd;
pub mod mcp_serve;
pub mod out;
pub mod printable;
pub mod render;
pub mod restore_cmd;
pub mod sessions_cmd;
pub mod shell;
pub mod spinner;
pub mod trust_cmd;
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
    let logging = init_tracing(cli.verbose);
    let env = environment();
    let default_config_dir = env.platform_config_dir.as_ref().map(|d| d.join("cadre"));
    let config_dir = cli.config_dir.or_else(|| default_config_dir.clone());
    // Printed commands name a configuration directory only when it is not
    // the one a bare `cadre` finds.
    let custom_config_dir = config_dir
        .clone()
        .filter(|d| Some(d) != default_config_dir.as_ref());
    let globals = Globals {
        config_dir: config_dir.clone(),
        custom_config_dir,
        verbose: cli.verbose,
        logging,
    };
    finish(match cli.command {
        None => run_shell(cli.session, cli.cluster, cli.prompt, env, globals),
        Some(Command::Exec(args)) => run_exec(*args, env, globals),
        // Settings need no async runtime; not starting one keeps `config` fast.
        Some(Command::Sessions(args)) => offline_store(args.data_dir.clone(), &env)
            .and_then(|(dir, followup)| sessions_cmd::sessions(args, dir, &followup)),
        Some(Command::Plan(args)) => offline_store(args.data_dir.clone(), &env)
            .and_then(|(dir, followup)| sessions_cmd::plan(args, dir, &followup)),
        Some(Command::Restore(args)) => restore_cmd::run(args, &env, config_dir.as_deref()),
        Some(Command::Mcp(args)) => match args.action {
            args::McpAction::List(list) => block_on(mcp_cmd::run(
                list,
                env.current_dir.clone(),
                config_dir.clone(),
            )),
            args::McpAction::Serve(serve) => {
                let workspace = serve.session.workspace.clone().or(env.current_dir.clone());
                let configs = session_configs(serve.session, env, globals);
                match workspace {
                    Some(workspace) => block_on(mcp_serve::run(configs, workspace)),
                    None => Err(exit::CliError::usage(
                        "cannot tell the current directory; pass --workspace",
                    )),
                }
            }
        },
        Some(Command::Workflow(args)) => workflow_cmd::run(args, env, config_dir),
        Some(Command::Node(args)) => block_on(cluster_cmd::node(*args, env, config_dir)),
        Some(Command::Goal(args)) => offline_store(args.data_dir.clone(), &env)
            .and_then(|(dir, followup)| goal_cmd::run(args, dir, &followup)),
        Some(Command::Acp(args)) => run_acp(*args, env, globals),
        Some(Command::Trust(args)) => {
            trust_cmd::run(args, env.current_dir.clone(), config_dir.as_deref())
        }
        Some(Command::Config(args)) => match config_dir {
            Some(dir) => {
                let settings = Settings::in_dir(&dir);
                config_cmd::run(args, &config_cmd::Places::new(&settings, &dir))
            }
            None => Err(exit::CliError::usage(
                "no configuration directory: pass --config-dir or set CADRE_CONFIG_DIR",
            )),
        },
    })
}

/// The store an offline command reads (`--data-dir`, else `CADRE_HOME`,
/// else the platform's), and the flags its printed commands need.
fn offline_store(
    data_dir: Option<PathBuf>,
    env: &Environment,
) -> Result<(PathBuf, followup::Followup), exit::CliError> {
    let default = default_data_dir(env);
    match data_dir.or_else(|| default.clone()) {
        Some(dir) => {
            let followup = followup::Followup::new(&dir, default.as_deref());
            Ok((dir, followup))
        }
        None => Err(exit::CliError::usage(
            "no data directory: pass --data-dir or set CADRE_HOME",
        )),
    }
}

/// What a session run takes from the global flags.
struct Globals {
    /// cadre's configuration directory.
    config_dir: Option<PathBuf>,
    /// The same, when it is not the default one (printed commands name it).
    custom_config_dir: Option<PathBuf>,
    /// `-v`s: more of each tool's output in text.
    verbose: u8,
    /// Log lines go to stderr (they would cut through a spinner).
    logging: bool,
}

impl Globals {
    /// Applies them to a validated run.
    fn apply(&self, config: &mut RunConfig) {
        config.sandbox.protected.extend(self.config_dir.clone());
        config.protect_config_dir(self.config_dir.as_deref());
        config.followup = std::mem::take(&mut config.followup)
            .config_dir(self.custom_config_dir.as_deref(), None);
        if self.verbose > 0 {
            config.tool_output_lines = render::VERBOSE_TOOL_OUTPUT_LINES;
        }
        config.spinner = !self.logging && std::io::IsTerminal::is_terminal(&std::io::stderr());
    }
}

fn run_exec(
    mut args: args::ExecArgs,
    env: Environment,
    globals: Globals,
) -> Result<u8, exit::CliError> {
    args.prompt = read_prompt(args.prompt.take(), args.prompt_file.as_deref())?;
    prepare_workspace(&args.session)?;
    block_on(async {
        let config_dir = globals.config_dir.as_deref();
        let files = load_config(&args.session, &env, config_dir)?;
        let defaults = load_defaults(config_dir)?;
        let cluster_args = std::mem::take(&mut args.cluster);
        let cluster_settings = files.settings.cluster.clone();
        let for_cluster = env.clone();
        let mut config = RunConfig::from_args(args, env, files, defaults)?;
        globals.apply(&mut config);
        config.cluster =
            cluster_cmd::coordinator(&cluster_args, &cluster_settings, &for_cluster).await?;
        exec::run(config).await
    })
}

/// `cadre acp`: every editor session's configuration is read for its own
/// working directory, as `cadre` started there would read it.
fn run_acp(args: args::AcpArgs, env: Environment, globals: Globals) -> Result<u8, exit::CliError> {
    let key_set = env.api_key.is_some();
    block_on(acp::run(
        session_configs(args.session, env, globals),
        key_set,
    ))
}

/// The run configuration of a session in any workspace (and, for a resume,
/// which stored one), from one command's session flags: what `cadre`
/// started in that workspace would read.
fn session_configs(args: args::SessionArgs, env: Environment, globals: Globals) -> acp::Configs {
    Box::new(move |cwd: &Path, resume: Option<&str>| {
        let mut session = args.clone();
        session.workspace = Some(cwd.to_path_buf());
        session.resume = resume.map(str::to_string);
        session.continue_latest = false;
        let config_dir = globals.config_dir.as_deref();
        let files = load_config(&session, &env, config_dir)?;
        let defaults = load_defaults(config_dir)?;
        let mut config = RunConfig::from_session(session, env.clone(), files, defaults)?;
        globals.apply(&mut config);
        // stdout is the protocol's; nothing else is drawn.
        config.spinner = false;
        Ok(config)
    })
}

/// The shell; `prompt`, when given, is its first message.
fn run_shell(
    args: args::SessionArgs,
    cluster: args::ClusterArgs,
    prompt: Option<String>,
    env: Environment,
    globals: Globals,
) -> Result<u8, exit::CliError> {
    prepare_workspace(&args)?;
    block_on(async {
        let config_dir = globals.config_dir.as_deref();
        let files = load_config(&args, &env, config_dir)?;
        let defaults = load_defaults(config_dir)?;
        let cluster_settings = files.settings.cluster.clone();
        let for_cluster = env.clone();
        let mut config = RunConfig::from_session(args, env, files, defaults)?;
        globals.apply(&mut config);
        config.cluster =
            cluster_cmd::coordinator(&cluster, &cluster_settings, &for_cluster).await?;
        config.prompt = prompt.filter(|p| !p.trim().is_empty());
        let settings = config_dir.map(Settings::in_dir);
        shell::run(config, settings).await
    })
}

/// The prompt as typed, or read: `-` and `--prompt-file -` read stdin,
/// `--prompt-file FILE` the file, and no prompt at all reads stdin when it
/// is not a terminal (`echo … | cadre exec`). What is read may be any size;
/// trailing line ends are dropped, and nothing but blanks is no prompt.
fn read_prompt(
    typed: Option<String>,
    file: Option<&Path>,
) -> Result<Option<String>, exit::CliError> {
    use std::io::{IsTerminal, Read};
    let stdin = || {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map_err(|e| {
            exit::CliError::usage(format!("cannot read the prompt from stdin: {e}"))
        })?;
        String::from_utf8(bytes)
            .map_err(|_| exit::CliError::usage("the prompt on stdin is not UTF-8 text"))
    };
    let read = match (typed, file) {
        (Some(typed), _) if typed != "-" => return Ok(Some(typed)),
        (Some(_), _) => stdin()?,
        (None, Some(path)) if path == Path::new("-") => stdin()?,
        (None, Some(path)) => std::fs::read(path)
            .map_err(|e| exit::CliError::usage(format!("--prompt-file {}: {e}", path.display())))
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| {
                    exit::CliError::usage(format!(
                        "--prompt-file {}: not UTF-8 text",
                        path.display()
                    ))
                })
            })?,
        (None, None) if !std::io::stdin().is_terminal() => stdin()?,
        (None, None) => return Ok(None),
    };
    let prompt = read.trim_end_matches(['\n', '\r']);
    Ok((!prompt.trim().is_empty()).then(|| prompt.to_string()))
}

/// A `--workspace` that is a file is refused before anything reads it; one
/// that does not exist yet is created for a new session, which says so (a
/// resumed session keeps the workspace it has).
fn prepare_workspace(args: &args::SessionArgs) -> Result<(), exit::CliError> {
    let Some(dir) = &args.workspace else {
        return Ok(());
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(exit::CliError::usage(format!(
            "--workspace {} is not a directory",
            dir.display()
        ))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if args.resume.is_some() || args.continue_latest {
                return Ok(());
            }
            std::fs::create_dir_all(dir).map_err(|e| {
                exit::CliError::usage(format!(
                    "--workspace {}: cannot create it: {e}",
                    dir.display()
                ))
            })?;
            crate::errln!("cadre: created the workspace {}", dir.display());
            Ok(())
        }
        Err(err) => Err(exit::CliError::usage(format!(
            "--workspace {}: {err}",
            dir.display()
        ))),
    }
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
            crate::errln!("cadre: {}", err.message);
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
        trust_book: config_dir.map(|d| d.join(cadre_runtime::trust::TRUST_FILE)),
    };
    let config = Config::load(&paths).map_err(|e| exit::CliError::config(e.to_string()))?;
    trust_cmd::warn(&config);
    Ok(config)
}

/// Reads the user's defaults from `settings.toml`, the lowest layer.
pub(crate) fn load_defaults(config_dir: Option<&Path>) -> Result<UserDefaults, exit::CliError> {
    let Some(dir) = config_dir else {
        return Ok(UserDefaults::default());
    };
    let settings = Settings::in_dir(dir);
    let error = config_cmd::cli_error;
    // A key this cadre does not know may be a newer cadre's, so it does not
    // stop the run; but a misspelt one must not pass in silence.
    for key in settings.read().map_err(error)?.keys() {
        if cadre_runtime::settings::KnownKey::lookup(key).is_err() {
            crate::errln!(
                "cadre: {}: unknown setting '{key}' is ignored (`cadre config --help` lists the known ones)",
                settings.path().display()
            );
        }
    }
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

/// Log output goes to stderr only when asked for (`-v`, `-vv` or
/// `RUST_LOG`): cadre's own lines already say what a person needs (a
/// retry, a failure), and logs would repeat them. Colours only on a
/// terminal, and never under `NO_COLOR`. Returns whether logs are on.
fn init_tracing(verbose: u8) -> bool {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let filter = match (asked, verbose) {
        (Some(directives), _) => EnvFilter::new(directives),
        (None, 0) => return false,
        // ractor_cluster warns of every closed peer connection; cadre says
        // what a closed or refused peer means itself.
        (None, 1) => EnvFilter::new("info,ractor_cluster=warn"),
        (None, _) => EnvFilter::new("debug"),
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && !no_color)
        .with_target(false)
        .try_init()
        .is_ok()
}
