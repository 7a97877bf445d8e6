//! `cadre config get|set|list`: user defaults in `settings.toml` (M6).
//!
//! Values print bare for `get` (a string without quotes, so scripts can use
//! it as is) and as TOML for `list` (`key = "value"`, one per line, sorted).
//! `get` of a key that is not set exits 1, like `git config`; every error
//! about a key, a value or the file exits 2.

use cadre_runtime::settings::{Settings, SettingsError, Value};

use crate::args::{ConfigAction, ConfigArgs};
use crate::exit::{self, CliError};

/// `get` of a key that is not set.
const NOT_SET: u8 = 1;

/// Runs a `cadre config` action against `settings` and returns the exit code.
pub fn run(args: ConfigArgs, settings: &Settings) -> Result<u8, CliError> {
    match args.action {
        ConfigAction::Get { key } => match settings.get(&key).map_err(cli_error)? {
            Some(value) => {
                crate::outln!("{}", bare(&value));
                Ok(exit::SUCCESS)
            }
            None => Err(CliError {
                code: NOT_SET,
                message: format!("{key} is not set"),
            }),
        },
        ConfigAction::Set { key, value } => {
            settings.set(&key, &value).map_err(cli_error)?;
            Ok(exit::SUCCESS)
        }
        ConfigAction::List => {
            for (key, value) in settings.read().map_err(cli_error)? {
                crate::outln!("{key} = {value}");
            }
            Ok(exit::SUCCESS)
        }
    }
}

/// Every settings error is about the input or the file: exit 2.
pub fn cli_error(err: SettingsError) -> CliError {
    CliError::config(err.to_string())
}

fn bare(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
