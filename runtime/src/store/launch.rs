//! How a session or a workflow run chose its model and its session rules,
//! kept so that a resume talks to the same model under the same rules
//! (LLM9): a session started against a server never wakes up on the
//! built-in demo because a flag was left out the second time.
//!
//! One row per owner (a session's id or a run's), written when the owner
//! starts and again when a flag changes the choice. A key is never stored:
//! only the name of the variable it came from, so a resume can say which
//! one is missing.

use std::path::PathBuf;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, now};
use crate::model::ModelParams;
use crate::permission::rules::PermissionRules;

/// The model a session or run was started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelRecord {
    /// An OpenAI-compatible server.
    Server {
        /// Its base URL, including `/v1`.
        base_url: String,
        /// The model name.
        model: String,
        /// Whether responses were streamed.
        stream: bool,
        /// The environment variable the key came from, when one was set:
        /// a resume without it fails naming it rather than sending no key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key_env: Option<String>,
        /// The provider it was chosen by (`[providers.NAME]`): a resume
        /// takes its URL, headers and key variable from the configuration
        /// again, never from the store.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Its model parameters (reasoning effort, output limit, …).
        #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
        params: ModelParams,
    },
    /// A model script file, by absolute path.
    Script {
        /// The script's path.
        path: PathBuf,
    },
    /// The built-in demo script.
    Demo,
}

impl ModelRecord {
    /// One line for a person: `gpt-4.1 at https://api.openai.com/v1`,
    /// `the script s.toml`, `the built-in demo script`.
    pub fn describe(&self) -> String {
        match self {
            ModelRecord::Server {
                base_url,
                model,
                provider: Some(provider),
                ..
            } => format!("{model} at {base_url} (provider {provider})"),
            ModelRecord::Server {
                base_url, model, ..
            } => format!("{model} at {base_url}"),
            ModelRecord::Script { path } => format!("the script {}", path.display()),
            ModelRecord::Demo => "the built-in demo script".to_string(),
        }
    }
}

/// What a resume takes from the run that started a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// The model.
    pub model: ModelRecord,
    /// The session's own rules (`--allow`, `--ask`, `--deny`): the
    /// configuration files' rules are read again at every start.
    #[serde(default)]
    pub rules: PermissionRules,
}

impl Store {
    /// Records (or replaces) how `owner` was launched.
    pub fn record_launch(&mut self, owner: &str, record: &LaunchRecord) -> Result<(), StoreError> {
        let text = serde_json::to_string(record)?;
        self.conn
            .prepare_cached(
                "INSERT INTO launches (owner, record, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(owner) DO UPDATE SET record = ?2, updated_at = ?3",
            )?
            .execute(params![owner, text, now()])?;
        Ok(())
    }

    /// How `owner` was launched, if that was recorded (sessions from
    /// before the record existed have none).
    pub fn launch(&self, owner: &str) -> Result<Option<LaunchRecord>, StoreError> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT record FROM launches WHERE owner = ?1")?
            .query_row([owner], |r| r.get(0))
            .optional()?;
        text.map(|t| serde_json::from_str(&t).map_err(StoreError::from))
            .transpose()
    }
}
