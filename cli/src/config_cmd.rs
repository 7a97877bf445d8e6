//! `cadre config get|set|list`: user defaults in `settings.toml` (M6).
//!
//! Values print bare for `get` (a string without quotes, so scripts can use
//! it as is) and as TOML for `list` (`key = "value"`, one per line, sorted).
//! `get` of a key that is not set exits 1, like `git config`; every error
//! about a key, a value or the file exits 2.
//!
//! Settings are the lowest layer: the user's config file that sets the same
//! thing (`model` in `config.toml`) wins in a run. So every command says so: `get`
//! and `set` with a note on stderr, `list` with a TOML comment after the
//! line. A key that belongs in a config file (`base_url`) is refused with
//! where to write it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cadre_runtime::config::ConfigFile;
use cadre_runtime::settings::{KNOWN_KEYS, Settings, SettingsError, Value};

use crate::args::{ConfigAction, ConfigArgs};
use crate::exit::{self, CliError};

/// `get` of a key that is not set.
const NOT_SET: u8 = 1;

/// The top-level keys of a config file (`config.toml`), which `config set`
/// points to instead of taking.
const CONFIG_FILE_KEYS: &[&str] = &[
    "mode",
    "posture",
    "model",
    "base_url",
    "max_subagents",
    "permissions",
    "guardian",
    "roles",
    "plan",
    "sandbox",
    "limits",
    "mcp_servers",
    "snapshots",
    "cluster",
];

/// Where `config` commands look: the settings, and the user's config file
/// above them. (A project's config files are left out: what they may set
/// depends on the workspace's trust, which `cadre trust` shows.)
pub struct Places<'a> {
    /// `settings.toml`.
    pub settings: &'a Settings,
    /// The config files above it, lowest first.
    pub files: Vec<PathBuf>,
}

impl<'a> Places<'a> {
    /// The places of a configuration directory.
    pub fn new(settings: &'a Settings, config_dir: &Path) -> Self {
        Self {
            settings,
            files: vec![config_dir.join("config.toml")],
        }
    }
}

/// Runs a `cadre config` action and returns the exit code.
pub fn run(args: ConfigArgs, places: &Places<'_>) -> Result<u8, CliError> {
    let settings = places.settings;
    match args.action {
        ConfigAction::Get { key } => {
            let value = settings.get(&key).map_err(|e| refused(e, &key, places))?;
            note_overrides(&key, places);
            match value {
                Some(value) => {
                    crate::outln!("{}", bare(&value));
                    Ok(exit::SUCCESS)
                }
                None => Err(CliError {
                    code: NOT_SET,
                    message: format!("{key} is not set"),
                }),
            }
        }
        ConfigAction::Set { key, value } => {
            settings
                .set(&key, &value)
                .map_err(|e| refused(e, &key, places))?;
            note_overrides(&key, places);
            Ok(exit::SUCCESS)
        }
        ConfigAction::List => {
            for line in list(&settings.read().map_err(cli_error)?, places) {
                crate::outln!("{line}");
            }
            Ok(exit::SUCCESS)
        }
    }
}

/// `config list`: every setting, in the order of [`KNOWN_KEYS`], with what
/// a run uses and where that comes from; still TOML (what is not set, or
/// set elsewhere, is a comment). A key the file holds that cadre does not
/// know comes last, as it is.
fn list(set: &BTreeMap<String, Value>, places: &Places<'_>) -> Vec<String> {
    let mut lines = vec![format!(
        "# {}; a run reads {} over it",
        places.settings.path().display(),
        match places.files.as_slice() {
            [] => "no config file".to_string(),
            files => files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" then "),
        }
    )];
    for known in KNOWN_KEYS {
        let key = known.key;
        let over = overrides(key, places).pop();
        lines.push(match (set.get(key), over) {
            (Some(value), Some((path, used))) => {
                format!(
                    "{key} = {value}  # a run uses {used} from {}",
                    path.display()
                )
            }
            (Some(value), None) => format!("{key} = {value}"),
            (None, Some((path, used))) => format!(
                "# {key} is not set: a run uses {used} from {}",
                path.display()
            ),
            (None, None) => format!("# {key} is not set: a run uses {}", known.default),
        });
    }
    for (key, value) in set {
        if !KNOWN_KEYS.iter().any(|k| k.key == key) {
            lines.push(format!("{key} = {value}  # not a setting cadre knows"));
        }
    }
    lines
}

/// Every settings error is about the input or the file: exit 2.
pub fn cli_error(err: SettingsError) -> CliError {
    CliError::config(err.to_string())
}

/// A settings error, saying where a config file's key goes instead.
fn refused(err: SettingsError, key: &str, places: &Places<'_>) -> CliError {
    let top = key.split('.').next().unwrap_or(key);
    let in_files = CONFIG_FILE_KEYS.contains(&top);
    match (&err, places.files.first()) {
        (SettingsError::UnknownKey { known, .. }, Some(user)) if in_files => {
            CliError::config(format!(
                "'{key}' is not a setting but a config file's key: write it in {} (or in \
                 .cadre/config.toml for one project); settings are {known}",
                user.display()
            ))
        }
        _ => cli_error(err),
    }
}

/// Says on stderr which config files set what `key` defaults, since a run
/// uses theirs.
fn note_overrides(key: &str, places: &Places<'_>) {
    for (path, set) in overrides(key, places) {
        crate::errln!(
            "cadre: note: {} sets {set}, which a run uses over this setting",
            path.display()
        );
    }
}

/// The config files (lowest first) that set what the setting `key`
/// defaults, each with what it sets (`model = "gpt-4.1"`).
fn overrides(key: &str, places: &Places<'_>) -> Vec<(PathBuf, String)> {
    if !KNOWN_KEYS.iter().any(|k| k.key == key) {
        return Vec::new();
    }
    places
        .files
        .iter()
        .filter(|path| path.is_file())
        .filter_map(|path| {
            // A file that cannot be read stops a run with its own error;
            // here it sets nothing.
            let file = ConfigFile::read(path).ok()?;
            Some((path.clone(), set_by(&file, key)?))
        })
        .collect()
}

/// What `file` sets for the setting `key`, written as in the file.
fn set_by(file: &ConfigFile, key: &str) -> Option<String> {
    match key {
        "default_mode" => file.mode.map(|m| format!("mode = \"{m}\"")),
        "default_posture" => file.posture.map(|p| format!("posture = \"{p}\"")),
        "model" => file.model.as_ref().map(|m| format!("model = {m:?}")),
        "plan.agent_entry" => file
            .plan
            .agent_entry
            .map(|b| format!("plan.agent_entry = {b}")),
        _ => None,
    }
}

fn bare(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
