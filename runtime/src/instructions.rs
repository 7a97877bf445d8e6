//! Project instructions (CX5): the `AGENTS.md` files from the repository's
//! root down to an agent's directory (its workspace, or its file scope's
//! directory), after the user's own in cadre's configuration directory.
//!
//! They are untrusted text: they go into the system prompt as what the
//! project says of itself, and nothing in them is read as configuration
//! (mode, posture, rules, providers and tools come only from cadre's own
//! configuration). Only regular files are read (a symlink is skipped, so a
//! repository cannot pull another file into the prompt), each looked at
//! before it is opened, and the whole is capped at [`MAX_BYTES`].

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The file name read in every directory.
pub const FILE_NAME: &str = "AGENTS.md";

/// The most bytes of instructions an agent is given, all files together;
/// what is past it is cut, with a note saying so.
pub const MAX_BYTES: usize = 32 * 1024;

/// The instructions an agent was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The files read, in order (the user's first, then root to leaf).
    pub files: Vec<PathBuf>,
    /// Their text, each under a line naming it; empty when there are none.
    pub text: String,
    /// SHA-256 of `text`, hex.
    pub sha256: String,
    /// Whether the cap cut them.
    pub truncated: bool,
    /// The directory they were read down to.
    pub dir: PathBuf,
    /// The user's file they began with, if the host named one.
    pub global: Option<PathBuf>,
}

impl Instructions {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Reads the user's `global` file (if any), then every `AGENTS.md` from
    /// the repository root holding `workspace` (the workspace itself when
    /// it is in no repository) down to `dir` (the workspace, or a directory
    /// under it; one outside it counts as the workspace).
    pub fn read(global: Option<&Path>, workspace: &Path, dir: &Path) -> Self {
        let dir = if dir.starts_with(workspace) {
            dir
        } else {
            workspace
        };
        let mut candidates: Vec<PathBuf> = global.map(Path::to_path_buf).into_iter().collect();
        candidates.extend(
            directories(&repository_root(workspace), dir)
                .into_iter()
                .map(|d| d.join(FILE_NAME)),
        );
        let mut out = Self {
            dir: dir.to_path_buf(),
            global: global.map(Path::to_path_buf),
            ..Self::default()
        };
        for path in candidates {
            let room = MAX_BYTES.saturating_sub(out.text.len());
            let Some((text, cut)) = read_small(&path, room) else {
                continue;
            };
            if room == 0 {
                out.truncated = true;
                break;
            }
            out.text.push_str(&format!("--- {} ---\n", path.display()));
            out.text.push_str(text.trim_end());
            out.text.push('\n');
            out.files.push(path);
            if cut {
                out.truncated = true;
                out.text.push_str(&format!(
                    "[… the instructions were cut at {} KiB]\n",
                    MAX_BYTES / 1024
                ));
                break;
            }
        }
        out.sha256 = hex(&Sha256::digest(out.text.as_bytes()));
        out
    }
}

/// The nearest directory at or above `workspace` holding a `.git` (a
/// directory, or a worktree's file); the workspace when there is none.
fn repository_root(workspace: &Path) -> PathBuf {
    workspace
        .ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .unwrap_or(workspace)
        .to_path_buf()
}

/// `root`, then each directory below it down to `dir`, in order. When
/// `dir` is not under `root`, just `dir`.
fn directories(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let Ok(rest) = dir.strip_prefix(root) else {
        return vec![dir.to_path_buf()];
    };
    let mut out = vec![root.to_path_buf()];
    let mut at = root.to_path_buf();
    for part in rest.components() {
        at.push(part);
        out.push(at.clone());
    }
    out
}

/// At most `room` bytes of a regular file (never through a symlink), cut at
/// a character boundary, and whether it was cut; `None` when there is no
/// such file or it is not text.
fn read_small(path: &Path, room: usize) -> Option<(String, bool)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(room as u64 + 1).read_to_end(&mut bytes).ok()?;
    let cut = bytes.len() > room;
    bytes.truncate(room);
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Cut inside a character: keep the whole ones.
        Err(e) if cut => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()?
        }
        Err(_) => return None,
    };
    Some((text, cut))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The directory a file scope (its globs, relative to the workspace)
/// covers: the deepest directory every glob lies under, before any
/// wildcard; `None` for no scope.
pub fn scope_dir(workspace: &Path, globs: &[String]) -> Option<PathBuf> {
    let literal = |glob: &str| -> Vec<String> {
        let parts: Vec<&str> = glob.split('/').collect();
        // The last part is a file (or a pattern): only directories count.
        let dirs = &parts[..parts.len().saturating_sub(1)];
        dirs.iter()
            .take_while(|p| !p.contains(['*', '?', '[', '{']) && **p != "..")
            .filter(|p| !p.is_empty() && **p != ".")
            .map(|p| p.to_string())
            .collect()
    };
    let mut common: Option<Vec<String>> = None;
    for glob in globs {
        let parts = literal(glob.trim_start_matches('/'));
        common = Some(match common {
            None => parts,
            Some(c) => c
                .into_iter()
                .zip(parts)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect(),
        });
    }
    let mut dir = workspace.to_path_buf();
    for part in common? {
        dir.push(part);
    }
    Some(dir)
}

#[cfg(test)]
mod tests;
