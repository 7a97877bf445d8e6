//! Exit codes, and the error that carries one.

use std::process::ExitCode;

/// The run did what was asked.
pub const SUCCESS: u8 = 0;
/// The agent failed: it hit its iteration limit, crashed, or the model
/// failed in a way retrying will not fix.
pub const AGENT_FAILED: u8 = 1;
/// Bad usage, configuration, script or input.
pub const USAGE: u8 = 2;
/// A goal stopped unfinished and can be resumed: paused, or a budget is
/// spent (`cadre exec --goal`).
pub const UNFINISHED: u8 = 3;
/// A retryable infrastructure failure persisted past the retries (EX_TEMPFAIL).
pub const TEMPFAIL: u8 = 75;
/// The user interrupted the run (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;

/// A failure that ends the process with a documented exit code.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub code: u8,
    /// What went wrong, for stderr.
    pub message: String,
}

impl CliError {
    /// Bad usage (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: USAGE,
            message: message.into(),
        }
    }

    /// Bad configuration or input file (exit 2).
    pub fn config(message: impl Into<String>) -> Self {
        Self::usage(message)
    }

    /// A retryable infrastructure failure (exit 75): the store is busy or
    /// another process runs the session.
    pub fn tempfail(message: impl Into<String>) -> Self {
        Self {
            code: TEMPFAIL,
            message: message.into(),
        }
    }

    /// Anything else that stops the run before it starts (exit 1).
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: AGENT_FAILED,
            message: message.into(),
        }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}
