//! The `cadre` command line.
//!
//! Arguments are parsed into plain data ([`args`]), validated into a run
//! configuration without I/O ([`config`]), and only then are actors started
//! ([`exec`]). Errors map to the documented exit codes ([`exit`]).
//!
//! # Layout
//! - [`args`]: clap definitions.
//! - [`config`]: validation into `RunConfig`; building the model client.
//! - [`exec`]: `cadre exec`.
//! - [`render`]: text, json and stream-json renderings of the event stream.
//! - [`exit`]: exit codes.
//!
//! **Invariant:** this is the only crate that reads the process environment
//! or writes to stdout.

pub mod args;
pub mod config;
pub mod exec;
pub mod exit;
pub mod render;

use std::process::ExitCode;

use clap::Parser;

use cadre_runtime::config::{Config, ConfigPaths};

use crate::args::{Cli, Command};
use crate::config::{Environment, RunConfig};

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cadre: cannot start the async runtime: {err}");
            return ExitCode::from(exit::AGENT_FAILED);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Exec(args) => {
                let env = environment();
                let files = load_config(&args, &env)?;
                let config = RunConfig::from_args(args, env, files)?;
                exec::run(config).await
            }
        }
    });
    // Tool tasks still running (a killed turn's bash, say) must not hold the
    // process open.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("cadre: {}", err.message);
            err.exit_code()
        }
    }
}

fn environment() -> Environment {
    Environment {
        api_key: std::env::var("OPENAI_API_KEY").ok(),
        current_dir: std::env::current_dir().ok(),
        platform_data_dir: dirs::data_dir(),
        platform_config_dir: dirs::config_dir(),
    }
}

/// Reads the user, project, local and `--config` files.
fn load_config(args: &args::ExecArgs, env: &Environment) -> Result<Config, exit::CliError> {
    let paths = ConfigPaths {
        user: env
            .platform_config_dir
            .as_ref()
            .map(|d| d.join("cadre").join("config.toml")),
        workspace: args.workspace.clone().or_else(|| env.current_dir.clone()),
        explicit: args.config.clone(),
    };
    Config::load(&paths).map_err(|e| exit::CliError::config(e.to_string()))
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
