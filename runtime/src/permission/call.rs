//! One call as the permission layers see it, and the paths it names.
//!
//! A path has two spellings: as the call writes it (made absolute against
//! the workspace root and normalized lexically: `.` dropped, `..` resolved)
//! and where it really leads (every symlink followed). The decision reads
//! no disk, so the real spellings are resolved by the tool layer before
//! the decision ([`RealPaths`], `Workspace::real_paths`) and handed in with
//! the call; rules and the protected-path check look at both.
//!
//! What a call names:
//! - a tool with a path argument (`ToolDefinition::path_arg`) names that
//!   path (the workspace root when it is missing);
//! - a shell tool (`ToolDefinition::shell`) names every word of its
//!   command line that could be a path (see `words`): words, redirection
//!   targets and assignment values, the value after `=` (`of=x`,
//!   `--file=x`) and after `:` (`HEAD:.env`), globs by their fixed
//!   directory, and the trees that recursive readers and copiers walk;
//! - any other tool names nothing.
//!
//! # Layout
//! - `words`: the paths a command line names, with the programs that walk
//!   whole trees.

#[cfg(test)]
mod tests;
pub(crate) mod words;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::tool::{Safety, ToolDefinition};

/// One call that passed the execution gate and its schema, as the rules,
/// the protected paths and the floor see it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The tool's definition: its name and its marks.
    pub def: &'a ToolDefinition,
    /// The schema-valid arguments.
    pub args: &'a Value,
    /// The tool's classification of this call (T5).
    pub safety: Safety,
    /// The workspace root, symlinks resolved.
    pub root: &'a Path,
    /// Where the paths the call names really lead, as the tool layer found
    /// them; a path missing here is judged by its written spelling alone.
    pub real: &'a RealPaths,
    /// The user's home, so `~` and `$HOME` in a command line can be read.
    pub home: Option<&'a Path>,
}

/// No real spellings: every path is judged as written.
static NO_REAL_PATHS: RealPaths = RealPaths(BTreeMap::new());

impl<'a> Call<'a> {
    /// A call whose paths are judged as written, with no home known.
    pub fn new(def: &'a ToolDefinition, args: &'a Value, safety: Safety, root: &'a Path) -> Self {
        Self {
            def,
            args,
            safety,
            root,
            real: &NO_REAL_PATHS,
            home: None,
        }
    }

    /// The same call with the real spellings the tool layer resolved.
    pub fn with_real_paths(mut self, real: &'a RealPaths) -> Self {
        self.real = real;
        self
    }

    /// The same call with the user's home, for `~` in command lines.
    pub fn with_home(mut self, home: Option<&'a Path>) -> Self {
        self.home = home;
        self
    }

    /// The paths the call names, in the order they occur.
    pub fn names(&self) -> Vec<Named> {
        names(self.def, self.args, self.safety, self.root, self.home)
    }

    /// Every spelling of a named path: as written, and where it really
    /// leads when the tool layer found out and it differs.
    pub fn spellings(&self, named: &Named) -> Vec<PathBuf> {
        let mut out = vec![named.lexical.clone()];
        if let Some(real) = self.real.get(&named.raw)
            && real != named.lexical
        {
            out.push(real.to_path_buf());
        }
        out
    }
}

/// The paths a call names, computed without touching the disk. `home`
/// expands `~` in command lines; without it such words are skipped.
pub fn names(
    def: &ToolDefinition,
    args: &Value,
    safety: Safety,
    root: &Path,
    home: Option<&Path>,
) -> Vec<Named> {
    if def.takes_command_line() {
        return match args.get("command").and_then(Value::as_str) {
            Some(line) => words::named(line, root, home),
            None => Vec::new(),
        };
    }
    if def.path_arg.is_none() {
        return Vec::new();
    }
    let text = def.path_in(args).unwrap_or(".");
    let raw = root.join(text);
    vec![Named {
        text: text.to_string(),
        lexical: normalize(&raw),
        raw,
        reach: Reach::Itself,
        access: match safety {
            Safety::ReadOnly => Access::Read,
            Safety::SideEffect => Access::Any,
        },
    }]
}

/// A path a call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The word as written, for messages; empty for the directory a
    /// command runs in, which it walks when given no operand.
    pub text: String,
    /// Absolute, not normalized: the directory it is relative to joined
    /// with the word. The key [`RealPaths`] is filled under, because the
    /// kernel resolves a symlink before the `..` after it.
    pub raw: PathBuf,
    /// Absolute and normalized lexically.
    pub lexical: PathBuf,
    /// Whether the call touches the path alone or a whole tree.
    pub reach: Reach,
    /// How the call uses it, when that is known.
    pub access: Access,
}

impl Named {
    /// The path as a message shows it: the word in quotes, or the
    /// directory the command runs in, which it names by giving no operand.
    pub fn shown(&self) -> String {
        if self.text.is_empty() {
            "the directory it runs in".to_string()
        } else {
            format!("'{}'", self.text)
        }
    }
}

/// How much of the file tree under a named path a call touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The path itself.
    Itself,
    /// The path and everything below it: a recursive reader's or copier's
    /// directory.
    Below,
    /// What a glob expands to; `lexical` is its fixed leading directory.
    Glob(String),
}

/// What a call does with a named path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads it (a search, the source of a copy).
    Read,
    /// Writes it (the destination of a copy, where an archive is unpacked).
    Write,
    /// Not known: a word of a command line may be read or written.
    Any,
}

impl Access {
    /// Whether the call may read the path.
    pub fn may_read(self) -> bool {
        matches!(self, Access::Read | Access::Any)
    }

    /// Whether the call may write the path.
    pub fn may_write(self) -> bool {
        matches!(self, Access::Write | Access::Any)
    }
}

/// Where named paths really lead, keyed by [`Named::raw`]; filled by the
/// tool layer, which may read the disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RealPaths(BTreeMap<PathBuf, PathBuf>);

impl RealPaths {
    /// None resolved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `raw` really leads to `real`.
    pub fn insert(&mut self, raw: PathBuf, real: PathBuf) {
        self.0.insert(raw, real);
    }

    /// Where `raw` really leads, when it was resolved.
    pub fn get(&self, raw: &Path) -> Option<&Path> {
        self.0.get(raw).map(PathBuf::as_path)
    }

    /// How many paths were resolved.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `path` with `.` dropped and `..` resolved, without touching the disk;
/// `..` at the filesystem root stays there, as it does for the kernel.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
