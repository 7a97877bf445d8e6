//! Descriptor aliases: paths that open whatever a descriptor holds.
//!
//! `/dev/stdout`, `/dev/stderr`, `/dev/stdin`, `/dev/fd/N`,
//! `/proc/self/fd/N`, `/proc/thread-self/fd/N` and `/proc/$$/fd/N` name no
//! file of their own: on Linux, opening one opens again the file the
//! descriptor refers to, with the new open's mode. So `printf x
//! 1<.git/config >/dev/stdout` writes `.git/config`, which fd 1 was pointed
//! at a moment before; the name alone says nothing about what is written.
//!
//! [`Descriptors`] follows what each descriptor of one simple command
//! holds as its redirections are applied, left to right, as bash applies
//! them: the ones the command was given (cadre's `/dev/null` and pipes), a
//! file a redirection opened, a copy of another, closed, or unknown. A
//! write through an alias is harmless only when the descriptor still holds
//! what the command was given.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::{Redirect, Word};

/// What one descriptor holds at some point of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// What the command was given: fd 0, 1 or 2 of the shell (cadre gives
    /// `/dev/null` and its own pipes), or a pipe of the pipeline.
    Given(u32),
    /// A file a redirection opened, named by this word.
    File(Word),
    /// Closed (`>&-`): opening its alias fails.
    Closed,
    /// Something the reader does not know: a descriptor nothing opened in
    /// this command, one a `>&$x` copied, one an `exec` may have left.
    Unknown,
}

/// Where an alias leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alias {
    /// One of the shell's own descriptors.
    Fd(u32),
    /// A descriptor of some other process (`/proc/1234/fd/1`,
    /// `/proc/$PPID/fd/1`), or one whose number is not known.
    Foreign,
}

/// The alias `text` spells, if it is one: the path is normalized lexically
/// first (`//dev/./stdout`, `/dev/fd/../fd/1`), so every spelling bash
/// hands the kernel unchanged is recognised. Only absolute spellings are
/// read; a relative one is a path like any other.
pub fn alias(text: &str) -> Option<Alias> {
    if !text.starts_with('/') {
        return None;
    }
    let path = normalize(Path::new(text));
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            Component::RootDir
            | Component::Prefix(_)
            | Component::CurDir
            | Component::ParentDir => None,
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let number = |s: &str| -> Alias {
        match s.parse::<u32>() {
            Ok(n) if s.chars().all(|c| c.is_ascii_digit()) => Alias::Fd(n),
            _ => Alias::Foreign,
        }
    };
    match parts.as_slice() {
        ["dev", "stdin"] => Some(Alias::Fd(0)),
        ["dev", "stdout"] => Some(Alias::Fd(1)),
        ["dev", "stderr"] => Some(Alias::Fd(2)),
        ["dev", "fd", n, ..] => Some(number(n)),
        ["proc", who, "fd", n, ..] => Some(if is_self(who) {
            number(n)
        } else {
            Alias::Foreign
        }),
        ["proc", _, "fd"] | ["dev", "fd"] => Some(Alias::Foreign),
        _ => None,
    }
}

/// The alias a word spells, when the reader knows enough of it: exact, or
/// an exact text but for `$$` or `$BASHPID` in `/proc/…/fd/N`, or with a
/// variable for the number (then [`Alias::Foreign`]). A word with a
/// substitution or an opaque part is not placed at all (the callers treat
/// it as a target they cannot place).
pub fn alias_of(word: &Word) -> Option<Alias> {
    if word.opaque.is_some() || !word.substitutions.is_empty() || word.globs || word.tilde {
        return None;
    }
    alias(&word.text)
}

/// Whether `/proc/WHO` is the shell itself, as the reader writes the word.
fn is_self(who: &str) -> bool {
    matches!(
        who,
        "self" | "thread-self" | "$$" | "${$}" | "$BASHPID" | "${BASHPID}"
    )
}

/// The descriptor table of one simple command while its redirections are
/// applied.
#[derive(Debug, Clone)]
pub struct Descriptors {
    held: BTreeMap<u32, Held>,
}

impl Default for Descriptors {
    fn default() -> Self {
        Self::given()
    }
}

impl Descriptors {
    /// What a command starts with: fds 0, 1 and 2 as given.
    pub fn given() -> Self {
        let held = (0..3).map(|fd| (fd, Held::Given(fd))).collect();
        Self { held }
    }

    /// Every descriptor unknown but none: after an `exec` the reader did
    /// not follow.
    pub fn unknown() -> Self {
        let held = (0..3).map(|fd| (fd, Held::Unknown)).collect();
        Self { held }
    }

    /// What `fd` holds now.
    pub fn held(&self, fd: u32) -> Held {
        self.held.get(&fd).cloned().unwrap_or(Held::Unknown)
    }

    /// What an alias leads to now.
    pub fn through(&self, alias: Alias) -> Held {
        match alias {
            Alias::Fd(fd) => self.held(fd),
            Alias::Foreign => Held::Unknown,
        }
    }

    /// Applies one redirection, as bash does; returns what an alias target
    /// led to before the redirection changed anything (the file it opens).
    pub fn apply(&mut self, redirect: &Redirect) -> Option<Held> {
        let target = &redirect.target;
        let op = redirect.op.as_str();
        let dup_target = target
            .exact()
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '-'));
        let opened = alias_of(target).map(|a| self.through(a));
        let value = match (op, dup_target) {
            (">&" | "<&", Some("-")) => Held::Closed,
            (">&" | "<&", Some(n)) => match n.trim_end_matches('-').parse::<u32>() {
                Ok(from) => self.held(from),
                Err(_) => Held::Unknown,
            },
            // A here-string is a pipe or temporary file of bash's own.
            ("<<<", _) => Held::Unknown,
            _ => match &opened {
                Some(held) => held.clone(),
                None => Held::File(target.clone()),
            },
        };
        for fd in targets(redirect, dup_target.is_some()) {
            self.held.insert(fd, value.clone());
        }
        if dup_target.is_some() {
            return None;
        }
        opened
    }
}

/// The descriptors a redirection changes: its fd, or the operator's
/// default; `&>`, `&>>` and `>&word` (a word that is not a number) change
/// 1 and 2.
fn targets(redirect: &Redirect, is_dup: bool) -> Vec<u32> {
    let op = redirect.op.as_str();
    if let Some(fd) = redirect.fd {
        return vec![fd];
    }
    match op {
        "&>" | "&>>" => vec![1, 2],
        ">&" if !is_dup => vec![1, 2],
        "<" | "<>" | "<<<" | "<&" | "<<" | "<<-" => vec![0],
        _ => vec![1],
    }
}

/// Whether a redirection with this operator opens its target for writing.
pub fn writes(op: &str) -> bool {
    matches!(op, ">" | ">>" | ">|" | "&>" | "&>>" | "<>" | ">&")
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
