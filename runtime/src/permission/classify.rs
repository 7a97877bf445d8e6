//! Per-call safety of `bash` (T5): a command line is read-only only when it
//! is proven so.
//!
//! [`classify_command`] answers [`Safety::ReadOnly`] only when the command
//! line parses ([`shell::parse`]) and
//! - every simple command runs a program from the table (`table.rs`) with
//!   flags and operands its rule allows, named bare (`ls`, never `./ls` or
//!   `/bin/ls`: a path could be a workspace script called `ls`);
//! - commands are joined only by `|`, `|&`, `&&`, `||` and `;` (no `&`);
//! - no redirection writes (input, descriptor duplication, `/dev/null` and
//!   the call's own `/dev/stdout` and `/dev/stderr` are fine);
//! - there is no command or process substitution, no `sudo` or `doas`;
//! - no variable is assigned but the locale and display ones (`LC_*`,
//!   `LANG`, `TZ`, `NO_COLOR`, `COLUMNS`), and no word expands a variable:
//!   its value is unknown and could be `-delete`;
//! - no unquoted glob is handed to a program with dangerous flags: a file
//!   named `-delete` or `--pre=sh` would become one.
//!
//! Anything else, including anything unknown, is [`Safety::SideEffect`], and
//! the [`Classification`] says why.

mod table;
#[cfg(test)]
mod tests;

use table::{
    GIT_FORBIDDEN, GIT_GLOBAL_FLAGS, GIT_GLOBAL_VALUE, GIT_SUBCOMMANDS, Limits, Operands, PROGRAMS,
    Rule, Style,
};

use super::shell::{self, Join, Redirect, SimpleCommand, Word};
use crate::tool::Safety;

/// The safety of one `bash` command line, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// Read-only only when proven.
    pub safety: Safety,
    /// What proved it, or the first thing that did not: "`rm` is not a
    /// known read-only program", "output redirection to 'b'".
    pub reason: String,
}

/// Classifies one command line for `bash`.
pub fn classify_command(command: &str) -> Classification {
    match read_only_programs(command) {
        Ok(programs) => Classification {
            safety: Safety::ReadOnly,
            reason: if programs.is_empty() {
                "no program runs".to_string()
            } else {
                format!("only read-only programs: {}", programs.join(", "))
            },
        },
        Err(reason) => Classification {
            safety: Safety::SideEffect,
            reason,
        },
    }
}

/// The programs a read-only command line runs, or why it is not read-only.
fn read_only_programs(command: &str) -> Result<Vec<String>, String> {
    let script = shell::parse(command).map_err(|e| format!("could not parse: {e}"))?;
    if script.commands.is_empty() {
        return Err("the command line is empty".into());
    }
    if script.joins.contains(&Join::Background) {
        return Err("`&` runs a command in the background".into());
    }
    let mut programs: Vec<String> = Vec::new();
    for command in &script.commands {
        check_command(command)?;
        if let Some(program) = command.program()
            && !programs.iter().any(|p| p == program)
        {
            programs.push(program.to_string());
        }
    }
    Ok(programs)
}

fn check_command(command: &SimpleCommand) -> Result<(), String> {
    let words = command
        .words
        .iter()
        .chain(command.assignments.iter().map(|(_, w)| w))
        .chain(command.redirects.iter().map(|r| &r.target));
    for word in words {
        if !word.substitutions.is_empty() {
            let kind = if word.text.contains("$(…)") || word.text.contains("`…`") {
                "command substitution"
            } else {
                "process substitution"
            };
            return Err(format!("{kind} in '{}'", word.text));
        }
    }
    for (name, _) in &command.assignments {
        if !inert_assignment(name) {
            return Err(format!(
                "the assignment {name}=… can change what a program does"
            ));
        }
    }
    for redirect in &command.redirects {
        check_redirect(redirect)?;
    }
    let Some((program, args)) = command.words.split_first() else {
        return Ok(());
    };
    if let Some(word) = command.words.iter().find(|w| w.expands) {
        return Err(format!(
            "'{}' expands a variable whose value is unknown",
            word.text
        ));
    }
    let name = program.text.as_str();
    if program.globs {
        return Err(format!("the program name '{name}' is a glob"));
    }
    if name.contains('/') {
        return Err(format!(
            "'{name}' names a program by path, which could be any file"
        ));
    }
    if name == "sudo" || name == "doas" {
        return Err(format!("`{name}` runs a command as another user"));
    }
    let Some((_, rule)) = PROGRAMS.iter().find(|(p, _)| *p == name) else {
        return Err(format!("`{name}` is not a known read-only program"));
    };
    let glob = args.iter().find(|w| w.globs);
    match rule {
        Rule::AnyArgs => Ok(()),
        Rule::Bare => match args.first() {
            None => Ok(()),
            Some(_) => Err(format!("`{name}` is read-only only without arguments")),
        },
        Rule::Limited(limits) => match glob {
            Some(word) => Err(glob_reason(word, name)),
            None => check_limits(name, limits, args),
        },
        Rule::Git => match glob {
            Some(word) => Err(glob_reason(word, name)),
            None => check_git(args),
        },
    }
}

fn glob_reason(word: &Word, program: &str) -> String {
    format!(
        "'{}' is an unquoted glob, and a file name it matches could become a flag of `{program}`",
        word.text
    )
}

/// Assignments that only change language, time zone or layout, which no
/// program reads as an instruction to write or run something.
fn inert_assignment(name: &str) -> bool {
    matches!(name, "LANG" | "LANGUAGE" | "TZ" | "NO_COLOR" | "COLUMNS") || name.starts_with("LC_")
}

fn check_redirect(redirect: &Redirect) -> Result<(), String> {
    let target = &redirect.target;
    let op = redirect.op.as_str();
    let plain = !target.expands && target.substitutions.is_empty();
    if op == "<" && (target.text.starts_with("/dev/tcp/") || target.text.starts_with("/dev/udp/")) {
        return Err(format!(
            "input redirection from '{}' opens a network connection",
            target.text
        ));
    }
    if redirect.is_harmless() {
        return Ok(());
    }
    let writes = matches!(op, ">" | ">>" | ">|" | "&>" | "&>>");
    // The call's own output pipes, written under another name.
    if writes && plain && matches!(target.text.as_str(), "/dev/stdout" | "/dev/stderr") {
        return Ok(());
    }
    Err(if writes || op == ">&" {
        format!("output redirection to '{}'", target.text)
    } else if op == "<>" {
        format!("'<>' opens '{}' for writing", target.text)
    } else {
        format!("the redirection '{op}' from '{}'", target.text)
    })
}

/// `git`'s global options, then a read-only subcommand and its arguments.
fn check_git(args: &[Word]) -> Result<(), String> {
    let mut rest = args;
    while let Some((word, after)) = rest.split_first() {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            break;
        }
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        rest = after;
        if GIT_GLOBAL_VALUE.contains(&name) {
            if !text.contains('=') {
                rest = rest.get(1..).unwrap_or_default();
            }
        } else if name == "-c" || name == "--config-env" {
            return Err(format!(
                "`git {name}` can set configuration that runs a program (core.pager, \
                 core.fsmonitor, diff.external)"
            ));
        } else if !GIT_GLOBAL_FLAGS.contains(&text) {
            return Err(format!(
                "the git option '{text}' is not known to be read-only"
            ));
        }
    }
    let Some((sub, rest)) = rest.split_first() else {
        // Bare `git` prints its usage.
        return Ok(());
    };
    let Some((_, limits)) = GIT_SUBCOMMANDS.iter().find(|(s, _)| *s == sub.text) else {
        return Err(format!(
            "`git {}` is not a known read-only git command",
            sub.text
        ));
    };
    let label = format!("git {}", sub.text);
    check_limits(&label, &GIT_FORBIDDEN, rest)?;
    check_limits(&label, limits, rest)
}

/// Checks `args` of `program` against its [`Limits`].
fn check_limits(program: &str, limits: &Limits, args: &[Word]) -> Result<(), String> {
    let refused = |flag: &str| format!("`{program} {flag}` writes, deletes or runs a program");
    if let Style::Words = limits.style {
        return match args
            .iter()
            .find(|w| limits.forbidden.contains(&w.text.as_str()))
        {
            Some(word) => Err(refused(&word.text)),
            None => Ok(()),
        };
    }
    let mut operands: Vec<&str> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut flags_done = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text.as_str();
        let next_is_value = args.get(i).is_some_and(|w| !w.text.starts_with('-'));
        if flags_done || text == "-" || !text.starts_with('-') {
            operands.push(text);
        } else if text == "--" {
            flags_done = true;
        } else if let Some(long) = text.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let flag = format!("--{name}");
            if limits
                .forbidden
                .iter()
                .any(|f| f.starts_with("--") && f.starts_with(flag.as_str()))
            {
                return Err(refused(text));
            }
            if value.is_none() && next_is_value && limits.takes_value.contains(&flag.as_str()) {
                i += 1;
            }
            seen.push(flag);
        } else {
            let cluster = &text[1..];
            for (at, c) in cluster.char_indices() {
                let flag = format!("-{c}");
                if limits.forbidden.contains(&flag.as_str()) {
                    return Err(refused(text));
                }
                let attached = !cluster[at + c.len_utf8()..].is_empty();
                let takes_value = limits.takes_value.contains(&flag.as_str());
                let stop = takes_value || limits.attached_value.contains(&flag.as_str());
                seen.push(flag);
                if stop {
                    if takes_value && !attached && next_is_value {
                        i += 1;
                    }
                    break;
                }
            }
        }
    }
    match limits.operands {
        Operands::Any => Ok(()),
        Operands::AtMost(n) => match operands.get(n) {
            Some(extra) => Err(format!(
                "`{program}` reads at most {n} operand(s); '{extra}' would be written or changed"
            )),
            None => Ok(()),
        },
        Operands::Prefixed(prefix) => match operands.iter().find(|o| !o.starts_with(prefix)) {
            Some(operand) => Err(format!(
                "`{program} {operand}`: an operand not starting with '{prefix}' changes something"
            )),
            None => Ok(()),
        },
        Operands::OnlyWith(listing) => {
            let lists = seen.iter().any(|f| listing.contains(&f.as_str()));
            match operands.first() {
                Some(operand) if !lists => Err(format!(
                    "`{program} {operand}` creates or changes '{operand}' unless a listing \
                     flag ({}) is given",
                    listing.join(", ")
                )),
                _ => Ok(()),
            }
        }
    }
}
