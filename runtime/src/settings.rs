//! User defaults in `settings.toml` (M6): the mode and posture sessions start
//! in, the model, and switches such as `plan.agent_entry`.
//!
//! The file lives in cadre's configuration directory
//! (`<config dir>/cadre/settings.toml`); the host names it, this module reads
//! no environment. Keys are dotted (`plan.agent_entry` is `agent_entry` in a
//! `[plan]` table), and [`KNOWN_KEYS`] is the one list of what may be set and
//! what each value must be.
//!
//! # Writing
//!
//! Several processes (two shells, an editor plugin) may change settings at
//! once, and any of them may be reading while another writes. Every write is
//! a read-modify-replace in one critical section, guarded three ways:
//!
//! - **A process-wide mutex** serializes this process's writers. std's
//!   `File::lock` is `flock` on Linux and macOS, where two handles in one
//!   process do exclude each other, but std does not promise that: where it
//!   is a per-process lock, a second thread's lock would succeed at once and
//!   both would write. The mutex makes in-process exclusion not depend on the
//!   platform.
//! - **An exclusive lock on `settings.toml.lock`**, a sibling file that is
//!   never replaced, serializes processes. Under it the writer re-reads the
//!   current file, so a key another process wrote a moment ago is kept, not
//!   overwritten with a stale copy. (The lock cannot be on `settings.toml`
//!   itself: the rename replaces that inode, and a waiter would then hold a
//!   lock on a file nobody else sees.)
//! - **A temporary file renamed over `settings.toml`**: the new text is
//!   written to `settings.toml.tmp-<pid>-<n>` in the same directory, synced,
//!   and renamed; then the directory is synced so the rename survives a
//!   crash. Rename is atomic, so a reader sees the old file or the new one,
//!   never half of one. Readers therefore take no lock. When
//!   `settings.toml` is a symlink, its target is what gets replaced.
//!
//! A file that does not parse is reported, naming the file and line, and a
//! write refuses to replace it: a hand edit gone wrong is not silently
//! discarded. A write edits the file's text in place (`toml_edit`): the
//! key changes, and a person's comments and layout stay.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use toml::Table;
/// A setting's value; re-exported so hosts need not depend on `toml`.
pub use toml::Value;

use crate::mode::Mode;
use crate::permission::Posture;

#[cfg(test)]
mod tests;

/// The file's name in cadre's configuration directory.
pub const FILE_NAME: &str = "settings.toml";

/// Every key that may be set, and what its value must be.
pub const KNOWN_KEYS: &[KnownKey] = &[
    KnownKey {
        key: "default_mode",
        kind: Kind::Mode,
        about: "the mode a session starts in: plan, work or operate",
        default: "\"work\"",
    },
    KnownKey {
        key: "default_posture",
        kind: Kind::Posture,
        about: "the permission posture a session starts in: suggest, auto, bypass or never",
        default: "\"suggest\"",
    },
    KnownKey {
        key: "model",
        kind: Kind::Text,
        about: "the model name",
        default: "none (the built-in demo script, unless a flag or OPENAI_* names a model)",
    },
    KnownKey {
        key: "plan.agent_entry",
        kind: Kind::Bool,
        about: "offer the model enter_plan_mode: true or false",
        default: "false",
    },
];

/// One settable key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownKey {
    /// The dotted key.
    pub key: &'static str,
    /// What its value must be.
    pub kind: Kind,
    /// One line for help texts.
    pub about: &'static str,
    /// What a run uses when nothing sets it: TOML, or a sentence.
    pub default: &'static str,
}

/// The type of a setting's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A [`Mode`], stored by its canonical name (`agent` is stored as `work`).
    Mode,
    /// A [`Posture`], stored by its canonical name.
    Posture,
    /// `true` or `false`.
    Bool,
    /// A non-empty string.
    Text,
}

impl KnownKey {
    /// The entry for `key`, or the error listing the known keys.
    pub fn lookup(key: &str) -> Result<&'static KnownKey, SettingsError> {
        KNOWN_KEYS
            .iter()
            .find(|k| k.key == key)
            .ok_or_else(|| SettingsError::UnknownKey {
                key: key.to_string(),
                known: KNOWN_KEYS
                    .iter()
                    .map(|k| k.key)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Turns a value typed by a person into the value stored.
    pub fn parse(&self, text: &str) -> Result<Value, SettingsError> {
        let invalid = |message: String| SettingsError::InvalidValue {
            key: self.key.to_string(),
            message,
        };
        match self.kind {
            Kind::Mode => text
                .parse::<Mode>()
                .map(|m| Value::String(m.as_str().into()))
                .map_err(|e| invalid(e.to_string())),
            Kind::Posture => text
                .parse::<Posture>()
                .map(|p| Value::String(p.as_str().into()))
                .map_err(|e| invalid(e.to_string())),
            Kind::Bool => match text.trim() {
                "true" => Ok(Value::Boolean(true)),
                "false" => Ok(Value::Boolean(false)),
                other => Err(invalid(format!("'{other}' is not true or false"))),
            },
            Kind::Text if text.trim().is_empty() => Err(invalid("the value is empty".into())),
            Kind::Text => Ok(Value::String(text.to_string())),
        }
    }
}

/// Why settings could not be read or written. None is retryable as is: each
/// needs the file, its directory or the input fixed.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file, its directory, lock or temporary file could not be read or
    /// written. Not retryable as is.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML. Not retryable until it is fixed.
    #[error("{}{}: {message}", path.display(), at_line(*line))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the error, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// A key that is not in [`KNOWN_KEYS`]. Not retryable.
    #[error("unknown setting '{key}': known settings are {known}")]
    UnknownKey {
        /// The key asked for.
        key: String,
        /// The known keys, comma-separated.
        known: String,
    },
    /// A value that does not fit its key, given to [`Settings::set`]. Not
    /// retryable.
    #[error("{key}: {message}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A value in the file that does not fit its key, or a non-table where a
    /// dotted key needs a table (a hand edit). Not retryable until the file
    /// is fixed.
    #[error("{}: {key}: {message}", path.display())]
    InvalidStored {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
}

/// `: line N`, when the line is known.
fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(": line {l}")).unwrap_or_default()
}

/// Serializes this process's writers (see the module doc).
static WRITER: Mutex<()> = Mutex::new(());

/// Makes each temporary file's name unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The settings file: read without locks, written under the writer mutex and
/// the cross-process lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `settings.toml`.
    path: PathBuf,
}

impl Settings {
    /// The store at `path` (normally `<config dir>/cadre/settings.toml`).
    /// Touches nothing until read or written.
    pub fn open(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The store in cadre's configuration directory `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self::open(dir.join(FILE_NAME))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every key in the file, dotted, including keys this version does not
    /// know (a newer cadre may have written them). A missing file is empty.
    pub fn read(&self) -> Result<BTreeMap<String, Value>, SettingsError> {
        Ok(flatten(self.read_table()?))
    }

    /// The value of a known key, or `None` when it is not set.
    pub fn get(&self, key: &str) -> Result<Option<Value>, SettingsError> {
        KnownKey::lookup(key)?;
        Ok(self.read()?.remove(key))
    }

    /// The mode sessions start in, when set.
    pub fn default_mode(&self) -> Result<Option<Mode>, SettingsError> {
        self.parsed("default_mode")
    }

    /// The posture sessions start in, when set.
    pub fn default_posture(&self) -> Result<Option<Posture>, SettingsError> {
        self.parsed("default_posture")
    }

    /// The model name, when set.
    pub fn model(&self) -> Result<Option<String>, SettingsError> {
        self.parsed("model")
    }

    /// Sets a known key to a value typed by a person, keeping every other
    /// key, including ones another process wrote since this one last read.
    /// Returns the value stored. Refuses to replace a file that does not
    /// parse.
    pub fn set(&self, key: &str, text: &str) -> Result<Value, SettingsError> {
        let value = KnownKey::lookup(key)?.parse(text)?;
        // A panic while holding the mutex leaves the file whole (it is only
        // ever renamed into place), so a poisoned mutex is still usable.
        let _writer = WRITER.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = parent(&self.path);
        std::fs::create_dir_all(&dir).map_err(io(&dir, "create the directory"))?;
        let lock_path = sibling(&self.path, ".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path, "open the lock file"))?;
        lock.lock().map_err(io(&lock_path, "lock"))?;
        let written = self.replace(key, value.clone());
        // Closing the file releases the lock too; unlocking first says so.
        let unlocked = lock.unlock().map_err(io(&lock_path, "unlock"));
        written.and(unlocked).map(|()| value)
    }

    /// The critical section: re-read, change, write whole, rename.
    fn replace(&self, key: &str, value: Value) -> Result<(), SettingsError> {
        let current = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(&self.path, "read")(e)),
        };
        // Parsed as a table first: the same errors as a read, with a line.
        parse_table(&current, &self.path)?;
        let cannot = |message: String| SettingsError::Parse {
            path: self.path.clone(),
            line: None,
            message: format!("cannot write the settings back: {message}"),
        };
        let mut document: toml_edit::DocumentMut = current
            .parse()
            .map_err(|e: toml_edit::TomlError| cannot(e.to_string()))?;
        let item: toml_edit::Value = value
            .to_string()
            .parse()
            .map_err(|e: toml_edit::TomlError| cannot(e.to_string()))?;
        insert(document.as_item_mut(), key, item).map_err(|message| {
            SettingsError::InvalidStored {
                path: self.path.clone(),
                key: key.to_string(),
                message,
            }
        })?;
        let text = document.to_string();
        let target = self.target()?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = sibling(&target, &format!(".tmp-{}-{n}", std::process::id()));
        let result = write_synced(&temp, &text)
            .and_then(|()| std::fs::rename(&temp, &target).map_err(io(&target, "replace")));
        if result.is_err() {
            // Best effort: the error that matters is the one returned.
            let _ = std::fs::remove_file(&temp);
        }
        result?;
        sync_dir(&parent(&target))
    }

    /// The file the rename replaces: when `settings.toml` is a symlink (a
    /// dotfiles checkout), its target, so the link survives the write.
    fn target(&self) -> Result<PathBuf, SettingsError> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                std::fs::canonicalize(&self.path).map_err(io(&self.path, "resolve the symlink"))
            }
            _ => Ok(self.path.clone()),
        }
    }

    fn read_table(&self) -> Result<Table, SettingsError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => parse_table(&text, &self.path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Table::new()),
            Err(e) => Err(io(&self.path, "read")(e)),
        }
    }

    fn parsed<T>(&self, key: &str) -> Result<Option<T>, SettingsError>
    where
        T: std::str::FromStr,
        T::Err: fmt::Display,
    {
        let Some(value) = self.get(key)? else {
            return Ok(None);
        };
        let invalid = |message: String| SettingsError::InvalidStored {
            path: self.path.clone(),
            key: key.to_string(),
            message,
        };
        let Some(text) = value.as_str() else {
            return Err(invalid(format!("expected a string, found {value}")));
        };
        text.parse()
            .map(Some)
            .map_err(|e: T::Err| invalid(e.to_string()))
    }
}

/// The directory `path` is in.
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `<path's name><suffix>` next to `path`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    if name.is_empty() {
        name.push(FILE_NAME);
    }
    name.push(suffix);
    parent(path).join(name)
}

/// Parses a settings file's text into dotted keys; `path` names it in
/// errors. Never touches the disk.
pub fn parse(text: &str, path: &Path) -> Result<BTreeMap<String, Value>, SettingsError> {
    parse_table(text, path).map(flatten)
}

fn parse_table(text: &str, path: &Path) -> Result<Table, SettingsError> {
    text.parse::<Table>().map_err(|e| SettingsError::Parse {
        path: path.to_path_buf(),
        line: e
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1),
        message: e.message().trim_end().to_string(),
    })
}

/// `{plan = {agent_entry = true}}` → `plan.agent_entry = true`.
fn flatten(table: Table) -> BTreeMap<String, Value> {
    fn walk(prefix: &str, table: Table, out: &mut BTreeMap<String, Value>) {
        for (key, value) in table {
            let dotted = if prefix.is_empty() {
                key
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                Value::Table(inner) => walk(&dotted, inner, out),
                other => {
                    out.insert(dotted, other);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", table, &mut out);
    out
}

/// Sets a dotted key in the document, creating tables on the way and
/// keeping the decor (comments, spacing) of a value it replaces; refuses to
/// turn a value into a table.
fn insert(root: &mut toml_edit::Item, key: &str, value: toml_edit::Value) -> Result<(), String> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut current = root;
    let mut walked = String::new();
    for part in parts {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(part);
        match current.get(part) {
            Some(found) if !found.is_table_like() => {
                return Err(format!(
                    "'{walked}' is {}, not a table",
                    found.to_string().trim()
                ));
            }
            Some(_) => {}
            // A `[part]` table of its own, as a person would write it.
            None => current[part] = toml_edit::Item::Table(toml_edit::Table::new()),
        }
        current = &mut current[part];
    }
    match current.get_mut(last) {
        Some(toml_edit::Item::Value(old)) => {
            let decor = old.decor().clone();
            *old = value;
            *old.decor_mut() = decor;
        }
        _ => current[last] = toml_edit::Item::Value(value),
    }
    Ok(())
}

fn write_synced(path: &Path, text: &str) -> Result<(), SettingsError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io(path, "create"))?;
    file.write_all(text.as_bytes()).map_err(io(path, "write"))?;
    file.sync_all().map_err(io(path, "sync"))
}

/// Makes the rename durable. Only Unix can open a directory to sync it.
fn sync_dir(dir: &Path) -> Result<(), SettingsError> {
    if cfg!(unix) {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir, "sync the directory"))?;
    }
    Ok(())
}

fn io(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> SettingsError {
    let path = path.to_path_buf();
    move |source| SettingsError::Io {
        path,
        action,
        source,
    }
}
