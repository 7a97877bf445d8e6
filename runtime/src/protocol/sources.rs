//! Where a session's model and mode came from, as `session.started` says.

use serde::{Deserialize, Serialize};

/// Where a session's model came from: a run that answers from the demo
/// script, or from another model than the one it started with, says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// `--base-url`, `--model` or `--script`, or `OPENAI_BASE_URL`,
    /// `OPENAI_MODEL` or `OPENAI_API_KEY` in the environment.
    Flags,
    /// `base_url` or `model` in a configuration file or `settings.toml`.
    Config,
    /// A resumed session (or workflow run) keeps the model it started with.
    Recorded,
    /// Nothing named a model: cadre's built-in demo script.
    Demo,
}

impl ModelSource {
    /// The name written to stream-json.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelSource::Flags => "flags",
            ModelSource::Config => "config",
            ModelSource::Recorded => "recorded",
            ModelSource::Demo => "demo",
        }
    }
}

/// Where a session's starting mode came from, lowest layer last: a run that
/// comes up in an unexpected mode says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeSource {
    /// `--mode`.
    Flag,
    /// The `CADRE_MODE` environment variable.
    Env,
    /// `mode` in a configuration file (user, project, local or `--config`).
    Config,
    /// `default_mode` in `settings.toml`, which the shell's `/mode` saves.
    Settings,
    /// Nothing chose it: the built-in default, Work.
    Default,
    /// A resumed session keeps the mode it was in.
    Resumed,
}

impl ModeSource {
    /// The name written to stream-json.
    pub fn as_str(self) -> &'static str {
        match self {
            ModeSource::Flag => "flag",
            ModeSource::Env => "env",
            ModeSource::Config => "config",
            ModeSource::Settings => "settings",
            ModeSource::Default => "default",
            ModeSource::Resumed => "resumed",
        }
    }
}
