//! git subcommands whose first operand is a verb: only the verbs that
//! list or show are read-only.
//!
//! - `stash list` (log options), `stash show` (diff options); bare `git
//!   stash` is `git stash push`;
//! - `worktree list`;
//! - `notes`, `notes list`, `notes show`;
//! - `config` with one reading action (`--get`, `--get-all`,
//!   `--get-regexp`, `--get-urlmatch`, `--list`/`-l`, or the verbs `get`
//!   and `list`) and options that only choose how it prints; `config NAME`
//!   alone reads too. Every scope option (`--global`, `--system`,
//!   `--file`, `--blob`), `--edit` and every writing action are refused.

use super::super::options::{Operands, Spec, check_operands};
use super::{DIFF, LOG, git};
use crate::permission::shell::Word;

/// `git stash show`: its diff options, a stash name.
const STASH_SHOW: Spec = Spec {
    more_long: &[DIFF],
    operands: Operands::AtMost(1),
    ..git(
        "pusU::zRwbaWB::M::C::DO:S:G:I:",
        "include-untracked only-untracked",
    )
};

const WORKTREE_LIST: Spec = Spec {
    operands: Operands::AtMost(0),
    ..git("vz", "porcelain verbose expire=")
};

const NOTES: Spec = Spec {
    operands: Operands::AtMost(1),
    ..git("", "")
};

/// `git config`'s reading actions, the options of its `get` and `list`
/// verbs, and the options that only choose how it prints.
const CONFIG: Spec = Spec {
    short: "lz",
    ..git(
        "",
        "get get-all get-regexp get-urlmatch list all regexp url= value= fixed-value \
            show-origin show-scope name-only null type= bool int bool-or-int path expiry-date \
            includes no-includes default= local worktree",
    )
};

/// The actions of `git config` that read, and how many operands each takes.
const CONFIG_READS: &[(&str, usize, usize)] = &[
    ("--get", 1, 2),
    ("--get-all", 1, 2),
    ("--get-regexp", 1, 2),
    ("--get-urlmatch", 2, 2),
    ("--list", 0, 0),
    ("-l", 0, 0),
];

/// Checks `git SUB REST` when `SUB` is one of these; `None` otherwise.
pub(super) fn check(sub: &str, rest: &[Word]) -> Option<Result<(), String>> {
    let verb = rest.first().map(|w| w.text.as_str());
    let after = rest.get(1..).unwrap_or_default();
    Some(match (sub, verb) {
        ("stash", Some("list")) => read("git stash list", &LOG, after),
        ("stash", Some("show")) => read("git stash show", &STASH_SHOW, after),
        ("stash", _) => Err(changes("git stash", verb)),
        ("worktree", Some("list")) => read("git worktree list", &WORKTREE_LIST, after),
        ("worktree", _) => Err(changes("git worktree", verb)),
        ("notes", None) => Ok(()),
        ("notes", Some("list" | "show")) => read("git notes", &NOTES, after),
        ("notes", _) => Err(changes("git notes", verb)),
        ("config", Some("list")) => config(after, Some(("list", 0, 0))),
        ("config", Some("get")) => config(after, Some(("get", 1, 2))),
        ("config", _) => config(rest, None),
        _ => return None,
    })
}

fn changes(label: &str, verb: Option<&str>) -> String {
    match verb {
        Some(verb) => format!("`{label} {verb}` is not a verb known to only read"),
        None => format!("`{label}` with no verb changes the repository"),
    }
}

fn read(label: &str, spec: &Spec, args: &[Word]) -> Result<(), String> {
    let read = spec.read(label, args)?;
    check_operands(label, &spec.operands, &read)
}

/// `git config`: exactly one reading action, given by a verb (`get`,
/// `list`) or an option, or none with one operand (`git config NAME`).
fn config(args: &[Word], verb: Option<(&str, usize, usize)>) -> Result<(), String> {
    let read = CONFIG.read("git config", args)?;
    let options: Vec<&str> = read.options.iter().map(String::as_str).collect();
    let chosen: Vec<(&str, usize, usize)> = CONFIG_READS
        .iter()
        .copied()
        .filter(|(a, _, _)| options.contains(a))
        .chain(verb)
        .collect();
    let (action, min, max) = match chosen.as_slice() {
        [] => ("NAME", 1, 1),
        [one] => *one,
        _ => return Err("`git config` with more than one action".into()),
    };
    let count = read.operands.len();
    if count < min || count > max {
        return Err(format!(
            "`git config {action}` with {count} operand(s) sets or changes configuration"
        ));
    }
    Ok(())
}
