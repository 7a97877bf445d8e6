//! Path globs (`write_file(src/**)`) and where a call's `path` lies.
//!
//! Everything here is lexical: no file is read, no symlink followed.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

/// The tools whose `path` argument a rule's argument pattern is matched against.
pub(super) const PATH_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
];

/// A glob over a path.
#[derive(Debug, Clone)]
pub(super) struct PathPattern {
    matcher: GlobMatcher,
    /// Matched against the absolute path; otherwise against the path
    /// relative to the workspace root, and only inside it.
    absolute: bool,
}

/// Why a path pattern was refused.
pub(super) enum Problem {
    /// globset refused it.
    Glob(String),
    /// It could never match what it seems to name.
    Path(String),
}

/// Where a call's `path` lies, lexically.
pub(super) enum Target {
    /// Under the workspace root.
    Inside {
        /// Relative to the root; the root itself is `.`.
        relative: PathBuf,
        /// Normalized absolute path.
        absolute: PathBuf,
    },
    /// Elsewhere: only absolute patterns can match.
    Outside(PathBuf),
    /// `path` is there but is not a string.
    Unreadable,
}

impl PathPattern {
    /// Parses the inside of `write_file(…)`, `*` excepted.
    pub(super) fn parse(arg: &str) -> Result<Self, Problem> {
        if arg.starts_with('~') {
            return Err(Problem::Path(
                "'~' is not expanded; write the absolute path".into(),
            ));
        }
        let absolute = arg.starts_with('/');
        let mut text = arg;
        while let Some(rest) = text.strip_prefix("./") {
            text = rest.trim_start_matches('/');
        }
        if text.len() > 1 {
            text = text.trim_end_matches('/');
        }
        if text.is_empty() {
            // `./` is the root, which a call names as `.`.
            text = ".";
        }
        if text.split('/').any(|part| part == "..") {
            return Err(Problem::Path(
                "'..' never matches, since paths are normalized first; write an absolute pattern"
                    .into(),
            ));
        }
        let matcher = GlobBuilder::new(text)
            .literal_separator(true)
            .build()
            .map_err(|e| Problem::Glob(e.kind().to_string()))?
            .compile_matcher();
        Ok(Self { matcher, absolute })
    }

    /// Whether the pattern matches; `None` when the path cannot be read.
    pub(super) fn matches(&self, target: &Target) -> Option<bool> {
        Some(match (target, self.absolute) {
            (Target::Unreadable, _) => return None,
            (Target::Inside { relative, .. }, false) => self.matcher.is_match(relative),
            (Target::Inside { absolute, .. } | Target::Outside(absolute), true) => {
                self.matcher.is_match(absolute)
            }
            (Target::Outside(_), false) => false,
        })
    }
}

impl Target {
    /// Locates the call's `path` argument (the root when it is missing).
    pub(super) fn new(args: &Value, root: &Path) -> Self {
        let path = match args.get("path") {
            None | Some(Value::Null) => ".",
            Some(Value::String(path)) => path.as_str(),
            Some(_) => return Target::Unreadable,
        };
        let root = normalize(root);
        let absolute = normalize(&root.join(path));
        match absolute.strip_prefix(&root) {
            Ok(relative) if relative.as_os_str().is_empty() => Target::Inside {
                relative: PathBuf::from("."),
                absolute,
            },
            Ok(relative) => Target::Inside {
                relative: relative.to_path_buf(),
                absolute,
            },
            Err(_) => Target::Outside(absolute),
        }
    }
}

/// Drops `.` and resolves `..` without touching the filesystem; `..` at the
/// filesystem root stays there, as it does for the kernel.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str())
            }
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = out.parent().is_none() && out.has_root();
                let climbs_relative =
                    out.as_os_str().is_empty() || out.file_name().is_none_or(|name| name == "..");
                if climbs_relative && !at_root {
                    out.push("..");
                } else if !at_root {
                    out.pop();
                }
            }
        }
    }
    out
}
