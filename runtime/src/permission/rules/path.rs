//! Path globs (`write_file(src/**)`) and where a call's paths lie.
//!
//! Everything here is lexical: no file is read. The real spelling of a path
//! (symlinks followed) comes with the call, resolved by the tool layer.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::permission::call::{Call, Named, Reach};

/// A glob over a path.
#[derive(Debug, Clone)]
pub(super) struct PathPattern {
    matcher: GlobMatcher,
    /// The pattern, `./` and a trailing `/` dropped: its components are
    /// compared with directories and globs a command line names.
    text: String,
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

/// Where one spelling of a call's path lies, lexically.
#[derive(Debug, Clone)]
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
    /// The path argument is there but is not a string.
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
        Ok(Self {
            matcher,
            text: text.to_string(),
            absolute,
        })
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

    /// Whether the pattern is one path, with no wildcard: a rule that
    /// names a path literally.
    pub(super) fn is_literal(&self) -> bool {
        !self.text.contains(['*', '?', '[', ']', '{', '}', '\\'])
    }

    /// Whether a path the pattern matches may be among what a command
    /// line's named path reaches, in any of its spellings.
    pub(super) fn meets(&self, call: &Call<'_>, named: &Named, dotglob: bool) -> bool {
        call.spellings(named).iter().any(|spelling| {
            let (reached, below) = match &named.reach {
                Reach::Itself => {
                    return self.matches(&Target::at(spelling, call.root)) == Some(true);
                }
                Reach::Below => (spelling.clone(), true),
                // The glob's tail, put after this spelling of its fixed part.
                Reach::Glob(pattern) => {
                    let tail = Path::new(pattern)
                        .strip_prefix(&named.lexical)
                        .unwrap_or(Path::new(""));
                    (spelling.join(tail), false)
                }
            };
            let wanted = self.components();
            let Some(have) = self.relative_to(&reached, call.root) else {
                return false;
            };
            meet(&wanted, &have, below, dotglob)
        })
    }

    fn components(&self) -> Vec<String> {
        let text = if self.absolute {
            self.text.trim_start_matches('/')
        } else {
            self.text.as_str()
        };
        text.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect()
    }

    /// `path`'s components as this pattern reads them: all of them for an
    /// absolute pattern, those below the root for a relative one (`None`
    /// outside the root).
    fn relative_to(&self, path: &Path, root: &Path) -> Option<Vec<String>> {
        let path = if self.absolute {
            path
        } else {
            path.strip_prefix(root).ok()?
        };
        Some(
            path.components()
                .filter_map(|c| match c {
                    Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect(),
        )
    }
}

/// Whether a path matching the pattern components `want` may be among the
/// paths `have` reaches: `have` is a path or a glob, and with `below` also
/// everything under what it names. A component with no wildcard must be
/// equal; a wildcard component of `have` must match the pattern's, and in
/// bash does not match a leading `.` unless `dotglob` is on; two wildcards
/// may meet. Errs towards meeting.
fn meet(want: &[String], have: &[String], below: bool, dotglob: bool) -> bool {
    match (want.split_first(), have.split_first()) {
        (None, None) => true,
        (Some((w, rest)), _) if w == "**" => {
            meet(rest, have, below, dotglob)
                || (!have.is_empty() && meet(want, &have[1..], below, dotglob))
                || (have.is_empty() && below)
        }
        (Some(_), None) => below,
        (None, Some(_)) => false,
        (Some((w, want_rest)), Some((h, have_rest))) => {
            component_meets(w, h, dotglob) && meet(want_rest, have_rest, below, dotglob)
        }
    }
}

fn component_meets(want: &str, have: &str, dotglob: bool) -> bool {
    let glob = |text: &str| {
        GlobBuilder::new(text)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher())
            .ok()
    };
    let wild = |text: &str| text.contains(['*', '?', '[', '{']);
    let hidden_from =
        |pattern: &str, name: &str| !dotglob && name.starts_with('.') && !pattern.starts_with('.');
    match (wild(want), wild(have)) {
        (false, false) => want == have,
        (false, true) => !hidden_from(have, want) && glob(have).is_none_or(|g| g.is_match(want)),
        (true, false) => glob(want).is_none_or(|g| g.is_match(have)),
        (true, true) => !(want.starts_with('.') && hidden_from(have, want)),
    }
}

impl Target {
    /// Locates one absolute spelling of a path.
    pub(super) fn at(absolute: &Path, root: &Path) -> Self {
        match absolute.strip_prefix(root) {
            Ok(relative) if relative.as_os_str().is_empty() => Target::Inside {
                relative: PathBuf::from("."),
                absolute: absolute.to_path_buf(),
            },
            Ok(relative) => Target::Inside {
                relative: relative.to_path_buf(),
                absolute: absolute.to_path_buf(),
            },
            Err(_) => Target::Outside(absolute.to_path_buf()),
        }
    }

    /// Every spelling of a path tool's path: as written and where it
    /// really leads. A path argument that is not a string is unreadable.
    pub(super) fn of_call(call: &Call<'_>) -> Vec<Self> {
        let readable = call
            .def
            .path_arg
            .as_deref()
            .and_then(|arg| call.args.get(arg))
            .is_none_or(|v| v.is_null() || v.is_string());
        if !readable {
            return vec![Target::Unreadable];
        }
        call.names()
            .first()
            .map(|named| {
                call.spellings(named)
                    .iter()
                    .map(|s| Target::at(s, call.root))
                    .collect()
            })
            .unwrap_or_else(|| vec![Target::Unreadable])
    }
}
