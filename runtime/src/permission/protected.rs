//! Protected paths (P10): what no tool call writes, in any posture.
//!
//! cadre's own configuration and data, and git's control files, decide what
//! the next session may do and what code runs: a model that could write
//! `.cadre/config.local.toml` could grant itself `posture = "bypass"`, and
//! one that could write `.git/hooks/pre-commit` or `core.pager` runs code
//! the next time anyone uses git. So these are protected:
//!
//! - `.cadre` and `.git` anywhere in the workspace (every repository inside
//!   it, every nested project), and any path with such a component outside
//!   it; compared without regard to ASCII case, for case-insensitive
//!   filesystems;
//! - the roots the host names in [`ProtectedPaths`]: cadre's data directory,
//!   its configuration directories and its settings file.
//!
//! A write is judged by every spelling of its path (as written, and where
//! symlinks lead), so a link into `.git` protects nothing. The check is
//! part of the deterministic floor: it runs before allow rules and the
//! posture, and is never reviewed.
//!
//! - **File tools** (a side-effect call of a tool with a path argument) are
//!   blocked from a protected path unless an allow rule for the tool names
//!   that path literally (`write_file(.cadre/config.toml)`); a glob
//!   (`write_file(**)`, `write_file(.cadre/*)`) never reaches one. The
//!   session's own plan file, which lives in the data directory, is the
//!   agent's own state and stays writable.
//! - **Shell commands** that are not proven read-only are blocked when they
//!   name a protected path in a way that may write it (`cp x
//!   .git/hooks/pre-commit`, `echo x > .cadre/config.toml`, `ln -s`,
//!   `sed -i`, `tee`, `dd of=`, …: any word, redirection target or
//!   `name=value` value; a glob that may expand into one, such as
//!   `.g?t/config`; a recursive copy or an unpacked archive whose
//!   destination holds the workspace's `.git` or `.cadre`), and when they
//!   write git's configuration or hooks without naming them: `git config`
//!   writes (every scope), `git remote add|set-url|…`, `git submodule
//!   add|init|update|…`, `git lfs install`, `git init|clone --template|-c`,
//!   `pre-commit install`, `husky`. No rule lifts these: a command pattern
//!   cannot name a path literally. Reading protected paths is not
//!   restricted.
//! - **git itself**: `git commit`, `checkout`, `merge`, `fetch` and the like
//!   write objects, refs and the index under `.git` as git's own
//!   bookkeeping, and run; only the routes above, which change what git
//!   runs or where it connects, are blocked. Branch tracking settings
//!   (`git branch -u`, `checkout --track`) are written by git and allowed.

mod git;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::call::{Call, Named, Reach, normalize};
use crate::tool::Safety;

/// The control directories protected wherever they are.
const CONTROL_DIRS: &[(&str, &str)] = &[
    (
        ".git",
        "a .git directory, where git's hooks and config run code",
    ),
    (".cadre", "cadre's project configuration (.cadre)"),
];

/// The roots a host protects beyond the workspace's own `.cadre` and `.git`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedPaths {
    roots: Vec<(PathBuf, Root)>,
    home: Option<PathBuf>,
    /// The configuration directory named last: the one in use (a
    /// `--config-dir` after the platform's), where the user's own
    /// `AGENTS.md` is.
    config: Option<PathBuf>,
}

/// What a protected root is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    DataDir,
    ConfigDir,
    SettingsFile,
}

impl Root {
    fn describe(self) -> &'static str {
        match self {
            Root::DataDir => "cadre's data directory",
            Root::ConfigDir => "cadre's configuration directory",
            Root::SettingsFile => "cadre's settings file",
        }
    }
}

impl ProtectedPaths {
    /// Only the workspace's `.cadre` and `.git` directories.
    pub fn new() -> Self {
        Self::default()
    }

    /// Protects cadre's data directory (sessions, the store).
    pub fn data_dir(self, dir: impl Into<PathBuf>) -> Self {
        self.root(dir.into(), Root::DataDir)
    }

    /// Protects one of cadre's configuration directories (the user's
    /// `config.toml` and `settings.toml`).
    pub fn config_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.config = Some(dir.clone());
        self.root(dir, Root::ConfigDir)
    }

    /// Protects the settings file, wherever it is.
    pub fn settings_file(self, file: impl Into<PathBuf>) -> Self {
        self.root(file.into(), Root::SettingsFile)
    }

    /// The user's home, so `~/…` and `$HOME/…` in command lines are read.
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(normalize(&home.into()));
        self
    }

    /// cadre's configuration directory, when the host named it (where the
    /// user's own `AGENTS.md` is).
    pub fn config_dir_path(&self) -> Option<&Path> {
        self.config.as_deref()
    }

    /// The user's home, when the host named it.
    pub fn home_dir(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// Adds, for every root that exists, its spelling with symlinks
    /// resolved, so a real path is recognised as well as a written one.
    /// Reads the disk: for hosts, once at start.
    pub fn with_real_spellings(mut self) -> Self {
        let real: Vec<(PathBuf, Root)> = self
            .roots
            .iter()
            .filter_map(|(path, kind)| Some((path.canonicalize().ok()?, *kind)))
            .filter(|(path, _)| !self.roots.iter().any(|(p, _)| p == path))
            .collect();
        self.roots.extend(real);
        self
    }

    fn root(mut self, path: PathBuf, kind: Root) -> Self {
        self.roots.push((normalize(&path), kind));
        self
    }

    /// What protects `path`, if anything, in a workspace at `root`.
    pub fn area(&self, path: &Path, root: &Path) -> Option<String> {
        if let Some(why) = control_dir(path, root) {
            return Some(why.to_string());
        }
        self.roots
            .iter()
            .find(|(r, _)| path.starts_with(r))
            .map(|(r, kind)| format!("{} ({})", kind.describe(), r.display()))
    }

    /// What protected area a tree at `dir` holds or lies in, if any: the
    /// workspace's own `.git` and `.cadre` are below the root and its
    /// ancestors.
    fn tree_area(&self, dir: &Path, root: &Path) -> Option<String> {
        if let Some(why) = self.area(dir, root) {
            return Some(why);
        }
        if root.starts_with(dir) {
            return Some(format!(
                "the workspace's .git and .cadre, which '{}' holds",
                dir.display()
            ));
        }
        self.roots
            .iter()
            .find(|(r, _)| r.starts_with(dir))
            .map(|(r, kind)| format!("{} ({}), which it holds", kind.describe(), r.display()))
    }

    /// What protected area a glob may expand into: one of its components
    /// may match `.git` or `.cadre` (a leading `.` must be written, as bash
    /// matches it, unless `dotglob` is on), or its fixed directory lies in
    /// or holds a protected root.
    fn glob_area(&self, pattern: &str, fixed: &Path, root: &Path, dotglob: bool) -> Option<String> {
        if let Some(why) = self.area(fixed, root) {
            return Some(why);
        }
        let pattern = Path::new(pattern);
        let below = pattern.strip_prefix(root).unwrap_or(pattern);
        for component in below.components() {
            let text = component.as_os_str().to_string_lossy();
            if !dotglob && !text.starts_with('.') {
                continue;
            }
            let Ok(glob) = globset::GlobBuilder::new(&text)
                .case_insensitive(true)
                .literal_separator(true)
                .build()
            else {
                continue;
            };
            let matcher = glob.compile_matcher();
            if let Some((_, why)) = CONTROL_DIRS.iter().find(|(name, _)| matcher.is_match(name)) {
                return Some(why.to_string());
            }
        }
        self.roots
            .iter()
            .find(|(r, _)| r.starts_with(fixed))
            .map(|(r, kind)| format!("{} ({})", kind.describe(), r.display()))
    }
}

/// The control directory `path` lies in (or is): below the root when it is
/// inside the workspace, anywhere on it otherwise.
fn control_dir(path: &Path, root: &Path) -> Option<&'static str> {
    let below = path.strip_prefix(root).unwrap_or(path);
    below.components().find_map(|c| {
        let name = c.as_os_str().to_str()?;
        CONTROL_DIRS
            .iter()
            .find(|(dir, _)| name.eq_ignore_ascii_case(dir))
            .map(|(_, why)| *why)
    })
}

/// Why the floor blocks `call` for writing a protected path, if it does.
///
/// `plan_file` is the agent's own plan file, always writable by the file
/// tools; `literally_allowed` says whether an allow rule for the tool names
/// a path literally.
pub(crate) fn blocked(
    call: &Call<'_>,
    protected: &ProtectedPaths,
    plan_file: Option<&Path>,
    literally_allowed: impl Fn(&Path) -> bool,
) -> Option<String> {
    if call.safety == Safety::ReadOnly {
        return None;
    }
    if call.def.shell {
        return shell_blocked(call, protected);
    }
    let named = call.names().into_iter().next()?;
    let name = &call.def.name;
    call.spellings(&named)
        .into_iter()
        .filter(|path| Some(path.as_path()) != plan_file)
        .find_map(|path| {
            let area = protected.area(&path, call.root)?;
            if literally_allowed(&path) {
                return None;
            }
            let shown = path.strip_prefix(call.root).unwrap_or(&path).display();
            let via = if path == named.lexical {
                String::new()
            } else {
                format!(" (where '{}' leads)", named.text)
            };
            Some(format!(
                "'{name}' would write '{shown}'{via}, in {area}: protected in every posture; \
                 only an allow rule naming this path literally, such as {name}({shown}), lets \
                 a call write it"
            ))
        })
}

fn shell_blocked(call: &Call<'_>, protected: &ProtectedPaths) -> Option<String> {
    let line = call.args.get("command").and_then(Value::as_str)?;
    if let Some(why) = git::config_writer(line) {
        return Some(format!(
            "{why}; git's configuration and hooks decide what code git runs, so no tool \
             call changes them"
        ));
    }
    let dotglob = line.contains("dotglob") || line.contains("GLOBIGNORE");
    call.names()
        .iter()
        .filter(|named| named.access.may_write())
        .find_map(|named| {
            let area = call
                .spellings(named)
                .into_iter()
                .find_map(|path| match &named.reach {
                    Reach::Itself => protected.area(&path, call.root),
                    Reach::Below => protected.tree_area(&path, call.root),
                    Reach::Glob(pattern) => protected.glob_area(pattern, &path, call.root, dotglob),
                })?;
            Some(shell_message(named, &area))
        })
}

fn shell_message(named: &Named, area: &str) -> String {
    let how = match named.reach {
        Reach::Itself => "names",
        Reach::Below => "writes into",
        Reach::Glob(_) => "has a glob that may expand into",
    };
    format!(
        "the command {how} {}, in {area}, and is not proven read-only: protected in every \
         posture, and no rule lets a shell command write there",
        named.shown()
    )
}
