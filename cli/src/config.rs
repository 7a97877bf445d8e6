//! From arguments to a validated run configuration, and from that to the
//! model client. Every failure here is a usage or configuration error
//! (exit code 2) that names what is wrong and where.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::model::{
    ModelClient, OpenAiClient, OpenAiConfig, RetryPolicy, Retrying, Script, ScriptedModel,
};

use crate::args::{ExecArgs, OutputFormat};
use crate::exit::CliError;

/// Which model the run talks to.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// An OpenAI-compatible server.
    Server {
        /// Its base URL.
        base_url: String,
        /// The model name.
        model: String,
        /// The bearer token, if any.
        api_key: Option<String>,
        /// Stream or not.
        stream: bool,
    },
    /// A script file.
    Script(PathBuf),
    /// The built-in demo script.
    Demo,
}

/// A validated `exec` run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The prompt.
    pub prompt: String,
    /// The starting mode.
    pub mode: Mode,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The model.
    pub model: ModelChoice,
    /// Output format.
    pub output: OutputFormat,
    /// Model requests per turn.
    pub max_iterations: u32,
    /// The retry policy for model requests.
    pub retry: RetryPolicy,
    /// The default tool timeout.
    pub tool_timeout: Duration,
}

/// What the environment contributes besides clap's `env` fallbacks.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `OPENAI_API_KEY`.
    pub api_key: Option<String>,
    /// The current directory.
    pub current_dir: Option<PathBuf>,
    /// The platform data directory.
    pub platform_data_dir: Option<PathBuf>,
}

impl RunConfig {
    /// Validates `exec` arguments. Does no I/O.
    pub fn from_args(args: ExecArgs, env: Environment) -> Result<Self, CliError> {
        let mode: Mode = args
            .mode
            .parse()
            .map_err(|e| CliError::usage(format!("--mode: {e}")))?;
        if args.prompt.trim().is_empty() {
            return Err(CliError::usage("the prompt is empty"));
        }
        if args.max_iterations == 0 {
            return Err(CliError::usage("--max-iterations must be at least 1"));
        }
        let workspace = match args.workspace.or(env.current_dir) {
            Some(dir) => dir,
            None => {
                return Err(CliError::usage(
                    "cannot tell the current directory; pass --workspace",
                ));
            }
        };
        let data_dir = match args
            .data_dir
            .or(env.platform_data_dir.map(|d| d.join("cadre")))
        {
            Some(dir) => dir,
            None => {
                return Err(CliError::usage(
                    "no data directory: pass --data-dir or set CADRE_HOME",
                ));
            }
        };
        let model = match (args.script, args.base_url) {
            (Some(path), _) => ModelChoice::Script(path),
            (None, Some(base_url)) => {
                if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                    return Err(CliError::usage(format!(
                        "--base-url '{base_url}' must start with http:// or https://"
                    )));
                }
                let Some(model) = args.model.filter(|m| !m.trim().is_empty()) else {
                    return Err(CliError::usage(
                        "--model (or OPENAI_MODEL) is required with --base-url",
                    ));
                };
                ModelChoice::Server {
                    base_url,
                    model,
                    api_key: env.api_key.filter(|k| !k.is_empty()),
                    stream: !args.no_stream,
                }
            }
            (None, None) => ModelChoice::Demo,
        };
        Ok(Self {
            prompt: args.prompt,
            mode,
            workspace,
            data_dir,
            model,
            output: args.output_format,
            max_iterations: args.max_iterations,
            retry: RetryPolicy {
                max_attempts: args.max_retries.saturating_add(1),
                ..RetryPolicy::default()
            },
            tool_timeout: Duration::from_secs(args.tool_timeout.max(1)),
        })
    }

    /// Builds the model client; a script that does not parse is a config error.
    pub fn model_client(&self) -> Result<Arc<dyn ModelClient>, CliError> {
        Ok(match &self.model {
            ModelChoice::Server {
                base_url,
                model,
                api_key,
                stream,
            } => {
                let mut config = OpenAiConfig::new(base_url.clone(), model.clone());
                config.api_key = api_key.clone();
                config.stream = *stream;
                let client =
                    OpenAiClient::new(config).map_err(|e| CliError::config(e.to_string()))?;
                Arc::new(Retrying::new(Arc::new(client), self.retry))
            }
            ModelChoice::Script(path) => {
                let script = Script::load(path).map_err(|e| CliError::config(e.to_string()))?;
                Arc::new(ScriptedModel::new(
                    script,
                    format!("script:{}", path.display()),
                ))
            }
            ModelChoice::Demo => {
                let script = Script::demo().map_err(|e| CliError::config(e.to_string()))?;
                Arc::new(ScriptedModel::new(script, "built-in demo script"))
            }
        })
    }
}
