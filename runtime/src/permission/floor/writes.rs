//! What a command writes that the floor cannot place: the targets whose
//! path is known only when the line runs, and the descriptor aliases that
//! write whatever a descriptor holds.
//!
//! A write target is a redirection that writes, or an argument of a
//! program that writes its operands ([`WRITERS`]). It is *placed* when the
//! reader knows its text exactly (after brace expansion; `~` and `$HOME`
//! are the home the host named, `~+` the directory it runs in), or when it is a glob, which the protected
//! paths read by the names it may match. Every other target — a variable
//! (`${d}t`, `${d:0:3}`, `${d/x/y}`), a substitution (`$(…)`, backticks),
//! `$'…'`, `$"…"`, arithmetic, a brace expansion the reader could not list,
//! `~-` or another user's home —
//! could spell `.git/hooks/pre-commit` or `.cadre/config.local.toml` when
//! it runs, so it is never proven outside the protected paths: the floor
//! says [`super::FloorVerdict::Unplaced`], which a person or the guardian
//! must see (`engine.rs`).

use crate::permission::shell::Word;
use crate::permission::shell::fd::{Alias, alias};

/// Programs that write, create, move or delete the files their operands
/// and option values name, so an operand the reader cannot place is a
/// write target it cannot place.
pub(super) const WRITERS: &[&str] = &[
    "tee", "cp", "mv", "ln", "install", "dd", "touch", "mkdir", "rm", "rmdir", "truncate", "sed",
    "chmod", "chown", "chgrp", "shred", "split", "csplit", "patch", "sort", "uniq", "rsync", "scp",
    "tar", "unzip", "curl", "wget", "gzip", "gunzip", "bzip2", "xz", "zip", "mkfifo", "mknod",
    "link", "unlink",
];

/// Why the floor cannot place `word` as a write target, if it cannot.
pub(super) fn unplaced(word: &Word) -> Option<String> {
    if let Some(why) = &word.opaque {
        return Some(why.clone());
    }
    if !word.substitutions.is_empty() {
        return Some("a command substitution".into());
    }
    if word.expands && !is_home(&word.text) {
        return Some("a variable".into());
    }
    let text = word.text.as_str();
    if word.tilde && !(text == "~" || text.starts_with("~/")) && word.fields.is_none() {
        return Some("a tilde expansion other than the home".into());
    }
    None
}

/// `$HOME` or `${HOME}` alone before the rest of a path: the home the
/// host named, read like `~`.
fn is_home(text: &str) -> bool {
    ["$HOME", "${HOME}"].iter().any(|home| {
        text.strip_prefix(home)
            .is_some_and(|rest| (rest.is_empty() || rest.starts_with('/')) && !rest.contains('$'))
    })
}

/// The descriptor aliases a program argument mentions: the word itself, a
/// value after `=` (`of=/dev/stdout`), or a path inside a script (`sed 'w
/// /dev/stdout'`, `sed 's/a/b/w /dev/fd/3'`).
pub(super) fn alias_mentions(text: &str) -> Vec<(String, Alias)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = ["/dev/", "/proc/"]
        .iter()
        .filter_map(|p| text[from..].find(p).map(|i| from + i))
        .min()
    {
        let end = text[at..]
            .find(|c: char| c.is_whitespace() || ";'\"}|&<>".contains(c))
            .map_or(text.len(), |i| at + i);
        let path = &text[at..end];
        if let Some(found) = alias(path) {
            out.push((path.to_string(), found));
        }
        from = end.max(at + 1);
    }
    out
}
