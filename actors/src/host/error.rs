//! Why a host or a session could not start ([`HostError`]), each way
//! apart, so a host (the CLI) can sort them into its exit codes.

use std::path::{Path, PathBuf};

use cadre_runtime::config::ConfigError;
use cadre_runtime::model::{ModelError, ScriptError};
use cadre_runtime::store::StoreError;
use cadre_runtime::tool::RegistryError;

use crate::kernel::StartError;

/// Why a host or a session could not start. Not `#[non_exhaustive]`: a
/// host (the CLI) sorts every variant into its exit codes, and a new one
/// should make it decide.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A configuration file is wrong; the message names the file and the
    /// place. Not retryable: the file must change.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model script (a file, a given text or the built-in demo) could
    /// not be read or parsed. Not retryable: the script must change.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// The model server's client could not be built from its settings.
    /// Not retryable: the settings must change.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// `[context]`'s summary model could not be served (an unknown
    /// provider, a server with no model, a client its settings refuse).
    /// Not retryable: the configuration must change.
    #[error("[context] model: {0}")]
    Summarizer(cadre_runtime::agent::ModelSourceError),
    /// The host was asked for a built-in tool cadre does not have (the
    /// name). Not retryable: the list of built-ins must change.
    #[error("there is no built-in tool {0:?}")]
    UnknownBuiltin(String),
    /// A tool was refused by the registry (two tools with one name, an
    /// invalid input schema). Not retryable: the tools must change.
    #[error(transparent)]
    Tool(#[from] RegistryError),
    /// The session's workspace does not exist or cannot be resolved. Not
    /// retryable: the caller must name another directory.
    #[error("workspace {}: {source}", path.display())]
    Workspace {
        /// The directory as it was given.
        path: PathBuf,
        /// Why it could not be resolved.
        source: std::io::Error,
    },
    /// No stored session matches what was asked to resume; the store's
    /// message says what was looked for. Not retryable: the caller must
    /// name another session.
    #[error("{0}")]
    NoSession(String),
    /// The store: [`StoreError::is_retryable`] says whether to try again.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The thread that owns the store could not be started (the system
    /// refused a thread). Not retryable by the host; it may succeed once
    /// the machine has resources again.
    #[error("the session could not start: the store's thread could not start: {0}")]
    StoreThread(std::io::Error),
    /// The session's actor did not start. Not retryable.
    #[error("the session could not start: {0}")]
    Start(StartError),
}

impl HostError {
    /// A workspace that cannot be resolved.
    pub(super) fn workspace(path: &Path, source: std::io::Error) -> Self {
        HostError::Workspace {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<StartError> for HostError {
    fn from(err: StartError) -> Self {
        match err {
            StartError::Store(store) => HostError::Store(store),
            other => HostError::Start(other),
        }
    }
}
