//! Path confinement for file tools (T6), and where a call's paths really
//! lead.
//!
//! A path argument is resolved against the workspace root: `..` that climbs
//! out, absolute paths elsewhere, and symlinks whose target lies outside are
//! refused with `outside_workspace`, unless trust is on or the path lies under
//! an explicitly trusted directory. The session's canonical plan file is the
//! one path outside the workspace a file tool may name, and only by its exact
//! absolute spelling.
//!
//! Before a call is decided, [`ToolContext::real_paths`] resolves every path
//! it names (`permission::call`): a file tool's path as the tool will open
//! it, a command line's words as the kernel will (a symlink before the `..`
//! after it; a dangling link to where a write through it lands). The
//! permission decision reads no disk; it gets both spellings this way.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::definition::{ErrorCode, Safety, ToolContext, ToolDefinition, ToolError};
use crate::permission::RealPaths;
use crate::permission::call;

/// The root file tools are confined to, and the exceptions to it.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The root as the user gave it, made absolute (a model may use this spelling).
    given_root: PathBuf,
    /// The root with every symlink resolved; what confinement is checked against.
    real_root: PathBuf,
    /// Directories outside the root that file tools may also reach.
    trusted: Vec<PathBuf>,
    /// When on, confinement is off altogether.
    trust_all: bool,
}

impl Workspace {
    /// Confines file tools to `root`, which must exist.
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Self> {
        let given = root.as_ref();
        let root = std::path::absolute(given)?;
        let real_root = root.canonicalize()?;
        Ok(Self {
            given_root: normalize(&root).unwrap_or_else(|| root.clone()),
            real_root,
            trusted: Vec::new(),
            trust_all: false,
        })
    }

    /// Also lets file tools reach under `dir` (which must exist).
    pub fn trust(mut self, dir: impl AsRef<Path>) -> std::io::Result<Self> {
        self.trusted.push(dir.as_ref().canonicalize()?);
        Ok(self)
    }

    /// Turns confinement off (trust mode).
    pub fn trust_everything(mut self) -> Self {
        self.trust_all = true;
        self
    }

    /// The same confinement (trusted directories, trust mode) at another
    /// root, which must exist: a workflow step's own git worktree.
    pub fn moved_to(&self, root: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(Self {
            trusted: self.trusted.clone(),
            trust_all: self.trust_all,
            ..Self::new(root)?
        })
    }

    /// The workspace root, symlinks resolved.
    pub fn root(&self) -> &Path {
        &self.real_root
    }

    /// Resolves a path argument to a real path inside the workspace (or a
    /// trusted directory). The file itself need not exist.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.is_empty() {
            return Err(ToolError::invalid("'path' must not be empty"));
        }
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.real_root.join(given)
        };
        let Some(lexical) = normalize(&joined) else {
            return Err(outside(path, "it climbs above the filesystem root"));
        };
        // Accept either spelling of the root, then re-anchor on the real one.
        let lexical = match lexical.strip_prefix(&self.given_root) {
            Ok(rest) if self.given_root != self.real_root => self.real_root.join(rest),
            _ => lexical,
        };
        if !self.reaches(&lexical) {
            return Err(outside(path, "it is not inside the workspace"));
        }
        let real = resolve_symlinks(&lexical).map_err(|err| ToolError::io(path, &err))?;
        let Some(real) = real else {
            return Err(outside(path, "it is a dangling symlink"));
        };
        if !self.reaches(&real) {
            return Err(outside(path, "a symlink on it leads out of the workspace"));
        }
        Ok(real)
    }

    fn reaches(&self, path: &Path) -> bool {
        self.trust_all
            || path.starts_with(&self.real_root)
            || self.trusted.iter().any(|dir| path.starts_with(dir))
    }
}

impl ToolContext {
    /// The agent's mode now (S2: a parent's narrowing shows at once).
    pub fn mode(&self) -> crate::mode::Mode {
        self.authority.mode()
    }

    /// The agent's posture now, narrowed by its ancestors': with the mode
    /// it decides how far a command may write (P9).
    pub fn posture(&self) -> crate::permission::Posture {
        self.authority.posture()
    }

    /// Resolves a file tool's `path` argument: the exact canonical plan file,
    /// or a path confined to the workspace.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if let Some(plan_file) = self.plan_file.as_deref()
            && Path::new(path) == plan_file
        {
            return self.checked_plan_file(plan_file);
        }
        self.workspace.resolve(path)
    }

    /// Where the paths a call names really lead, for its permission
    /// decision. A path that cannot be resolved is left out; the decision
    /// then judges it as written.
    pub fn real_paths(&self, def: &ToolDefinition, args: &Value, safety: Safety) -> RealPaths {
        let mut out = RealPaths::new();
        for named in call::names(def, args, safety, self.workspace.root(), None) {
            let real = if def.shell {
                real_path(&named.raw)
            } else {
                self.resolve(&named.text).ok()
            };
            if let Some(real) = real {
                out.insert(named.raw, real);
            }
        }
        out
    }

    /// Whether search and listing results leave out the file at `path`
    /// (absolute, real): a read deny rule covers it.
    pub fn withholds(&self, path: &Path) -> bool {
        self.rules
            .as_ref()
            .is_some_and(|rules| rules.withholds(path, self.workspace.root()))
    }

    /// Whether `path` is the canonical plan file, spelled exactly; never
    /// for an agent without one.
    pub fn is_plan_file(&self, path: &str) -> bool {
        self.plan_file
            .as_deref()
            .is_some_and(|plan_file| Path::new(path) == plan_file)
    }

    /// The plan file, refused if someone planted a symlink in its place or
    /// in place of its directory.
    fn checked_plan_file(&self, plan_file: &Path) -> Result<PathBuf, ToolError> {
        let shown = plan_file.display().to_string();
        if let Ok(meta) = std::fs::symlink_metadata(plan_file)
            && meta.file_type().is_symlink()
        {
            return Err(outside(&shown, "the plan file is a symlink"));
        }
        let Some(dir) = plan_file.parent() else {
            return Err(outside(&shown, "the plan file has no directory"));
        };
        std::fs::create_dir_all(dir).map_err(|err| ToolError::io(&shown, &err))?;
        let real_dir = dir
            .canonicalize()
            .map_err(|err| ToolError::io(&shown, &err))?;
        let expected = self
            .session_dir
            .canonicalize()
            .map_err(|err| ToolError::io(&shown, &err))?
            .join("artifacts");
        if real_dir != expected {
            return Err(outside(&shown, "the plan file's directory is a symlink"));
        }
        Ok(plan_file.to_path_buf())
    }
}

fn outside(path: &str, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::OutsideWorkspace,
        format!("'{path}' is refused: {why}"),
    )
}

/// Removes `.` and resolves `..` without touching the filesystem; `None` if
/// `..` climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str())
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
        }
    }
    Some(out)
}

/// Where an absolute path really leads as the kernel resolves it: every
/// symlink followed, each before the `..` after it. A path that does not
/// exist yet leads into its real directory; a dangling symlink to where a
/// write through it would create its target. `None` when its directory
/// does not exist or the links loop.
pub fn real_path(raw: &Path) -> Option<PathBuf> {
    if let Ok(real) = raw.canonicalize() {
        return Some(real);
    }
    let mut path = raw.to_path_buf();
    // The kernel gives up after 40 links; so does this.
    for _ in 0..40 {
        let name = path.file_name()?.to_os_string();
        let dir = path.parent()?.canonicalize().ok()?;
        let here = dir.join(&name);
        match std::fs::read_link(&here) {
            Ok(target) => path = dir.join(target),
            Err(_) => return Some(here),
        }
    }
    None
}

/// Resolves every symlink on an absolute, normalized path whose tail may not
/// exist yet: the longest existing prefix is canonicalized and the rest
/// appended. `None` for a dangling symlink, since writing through it would
/// create its target wherever it points.
fn resolve_symlinks(path: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(meta) => {
                if meta.file_type().is_symlink() && std::fs::metadata(&existing).is_err() {
                    return Ok(None);
                }
                let mut real = existing.canonicalize()?;
                real.extend(rest.iter().rev());
                return Ok(Some(real));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name() else {
                    return Err(err);
                };
                rest.push(name.to_os_string());
                if !existing.pop() {
                    return Err(err);
                }
            }
            Err(err) => return Err(err),
        }
    }
}
