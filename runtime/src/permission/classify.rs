//! Per-call safety of `bash` (T5): a command line is read-only only when it
//! is proven so.
//!
//! [`classify_command`] answers [`Safety::ReadOnly`] only when the reader
//! ([`shell::parse`]) knows every word exactly and
//! - every simple command runs a program from the table (`table.rs`) with
//!   options from its allow-list and operands its rule allows, named bare
//!   (`ls`, never `./ls` or `/bin/ls`: a path could be a workspace script
//!   called `ls`);
//! - commands are joined only by `|`, `|&`, `&&`, `||`, `;` and newlines
//!   (no `&`);
//! - no redirection writes (input, descriptor duplication and `/dev/null`
//!   are fine, and so are `/dev/stdout`, `/dev/fd/2`, `/proc/self/fd/1` and
//!   the other aliases of fds 1 and 2 while no earlier redirection of the
//!   command re-pointed them: `shell::fd`);
//! - `git` does not follow a `cd` (it would find whatever repository holds
//!   the new directory);
//! - there is no command or process substitution, no `sudo` or `doas`;
//! - no word is one the reader does not evaluate (`${x:-…}`, arithmetic,
//!   `$'…'`, `$"…"`, braces with quotes: the reason says which), and no
//!   word expands a variable: its value is unknown and could be `-delete`;
//! - no variable is assigned but the locale and display ones (`LC_*`,
//!   `LANG`, `LANGUAGE`, `TZ`, `NO_COLOR`, `COLUMNS`), each to a plain
//!   value of its kind;
//! - unquoted globs and brace expansions only reach programs none of whose
//!   options can write or run anything (a file named `-delete` or
//!   `--pre=sh` would become one).
//!
//! Anything else, including anything unknown, is [`Safety::SideEffect`], and
//! the [`Classification`] says why.

#[cfg(test)]
mod differential;
mod find;
mod git;
mod options;

pub use git::forced_environment;
mod sed;
mod table;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(super) use tests::regressions::huge_lines;

use options::{check_operands, unknown_option};
use table::{BUILTINS, Program, Syntax, lookup};

use super::shell::fd::{Descriptors, Held};
use super::shell::{self, Join, Redirect, SimpleCommand, Word, command_words};
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
    let mut moved = false;
    for command in &script.commands {
        check_command(command)?;
        let words: Vec<&str> = command.words.iter().map(|w| w.text.as_str()).collect();
        let program = match words.as_slice() {
            ["builtin", name, ..] => Some(*name),
            [name, ..] => Some(*name),
            [] => None,
        };
        match program {
            Some("cd") => moved = true,
            // git discovers the repository from where it runs: after a
            // `cd`, that may be one the repository committed (an embedded
            // git dir), whose configuration runs programs.
            Some("git") if moved => {
                return Err(
                    "`git` after `cd` may run on a repository other than the workspace's own"
                        .into(),
                );
            }
            _ => {}
        }
        if let Some(program) = command.program()
            && !programs.iter().any(|p| p == program)
        {
            programs.push(program.to_string());
        }
    }
    Ok(programs)
}

/// Whether one simple command of a line is proven read-only on its own,
/// or why not (an allow rule covering the rest of a pipeline leans on
/// this for the segments it does not name). A `git` after a `cd` elsewhere
/// in the line is the caller's to refuse (see [`read_only_programs`]).
pub(crate) fn simple_read_only(command: &SimpleCommand) -> Result<(), String> {
    check_command(command)
}

fn check_command(command: &SimpleCommand) -> Result<(), String> {
    if let Some(word) = command_words(command).find(|w| !w.substitutions.is_empty()) {
        let kind = if word.text.contains("<(…)") || word.text.contains(">(…)") {
            "process substitution"
        } else {
            "command substitution"
        };
        return Err(format!("{kind} in '{}'", word.text));
    }
    for (name, value) in &command.assignments {
        check_assignment(name, value)?;
    }
    // Redirections apply left to right: an alias of a descriptor is only
    // the call's own output while no earlier one re-pointed it.
    let mut descriptors = Descriptors::given();
    for redirect in &command.redirects {
        check_redirect(redirect, &mut descriptors)?;
    }
    if let Some(word) = command.words.iter().find(|w| w.opaque.is_some()) {
        let why = word.opaque.as_deref().unwrap_or_default();
        return Err(format!("could not parse '{}': {why}", word.text));
    }
    if let Some(word) = command.words.iter().find(|w| w.expands) {
        return Err(format!(
            "'{}' expands a variable whose value is unknown",
            word.text
        ));
    }
    let Some((program, args)) = command.words.split_first() else {
        return Ok(());
    };
    let name = program.text.as_str();
    if program.globs {
        return Err(format!("the program name '{name}' is a glob"));
    }
    if name.contains('/') || program.tilde {
        return Err(format!(
            "'{name}' names a program by path, which could be any file"
        ));
    }
    if name == "sudo" || name == "doas" {
        return Err(format!("`{name}` runs a command as another user"));
    }
    let Some(entry) = lookup(name) else {
        return Err(format!("`{name}` is not a known read-only program"));
    };
    check_args(entry, args)
}

fn check_args(program: &Program, args: &[Word]) -> Result<(), String> {
    let name = program.name;
    if let Syntax::Bare = program.syntax
        && !args.is_empty()
    {
        return Err(format!("`{name}` is read-only only without arguments"));
    }
    if !program.globs
        && let Some(word) = args.iter().find(|w| w.globs)
    {
        return Err(format!(
            "'{}' is an unquoted glob, and a file name it matches could become an option of \
             `{name}`",
            word.text
        ));
    }
    match &program.syntax {
        Syntax::Bare | Syntax::Ignored | Syntax::Echo | Syntax::Expression => Ok(()),
        Syntax::Printf => check_printf(args),
        Syntax::Find => find::check(args),
        Syntax::Git => git::check(args),
        Syntax::Sed => sed::check(args),
        Syntax::Builtin => check_builtin(args),
        Syntax::Options(spec) => {
            let read = spec.read(name, args)?;
            check_operands(name, &spec.operands, &read)
        }
    }
}

/// `builtin NAME [ARGUMENT]…`: NAME must be a read-only builtin of the
/// table, whose arguments are checked as its own.
fn check_builtin(args: &[Word]) -> Result<(), String> {
    let Some((name, rest)) = args.split_first() else {
        return Ok(());
    };
    match lookup(&name.text) {
        Some(entry) if BUILTINS.contains(&entry.name) => check_args(entry, rest),
        _ => Err(format!(
            "`builtin {}` is not a read-only builtin",
            name.text
        )),
    }
}

/// `printf FORMAT [ARGUMENT]…`: `-v NAME` would assign the output to any
/// variable (`PATH` included), and it takes no other option.
fn check_printf(args: &[Word]) -> Result<(), String> {
    match args.first().map(|w| w.text.as_str()) {
        Some(text) if text.starts_with("-v") => Err(format!(
            "`printf {text}` assigns its output to a shell variable"
        )),
        Some(text) if text.starts_with('-') && text != "--" && text != "-" => {
            Err(unknown_option("printf", text))
        }
        _ => Ok(()),
    }
}

/// Assignments that only change language, time zone or layout, each to a
/// plain value of its kind, which no program reads as an instruction to
/// write or run something. A locale is kept to C, POSIX or UTF-8: in
/// another multibyte encoding bash would read the rest of the line's bytes
/// differently from this reader.
fn check_assignment(name: &str, value: &Word) -> Result<(), String> {
    let value_ok = |text: &str| -> bool {
        let charset = |extra: &str| {
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.@-".contains(c) || extra.contains(c))
        };
        match name {
            "LANG" | "LANGUAGE" => {}
            "TZ" => return charset("+/:,") && !text.contains(".."),
            "NO_COLOR" => return charset(""),
            "COLUMNS" => return text.chars().all(|c| c.is_ascii_digit()),
            _ if name.starts_with("LC_") => {}
            _ => return false,
        }
        if name == "LANGUAGE" {
            return charset(":");
        }
        let lower = text.to_ascii_lowercase();
        charset("")
            && (matches!(lower.as_str(), "" | "c" | "posix")
                || lower.ends_with(".utf-8")
                || lower.ends_with(".utf8"))
    };
    let inert = matches!(name, "LANG" | "LANGUAGE" | "TZ" | "NO_COLOR" | "COLUMNS")
        || name.starts_with("LC_");
    if !inert {
        return Err(format!(
            "the assignment {name}=… can change what a program does"
        ));
    }
    if let Some(why) = &value.opaque {
        return Err(format!(
            "the assignment {name}=… does not assign a plain value: {why}"
        ));
    }
    match value.exact() {
        Some(text) if value.substitutions.is_empty() && !value.tilde && value_ok(text) => Ok(()),
        _ => Err(format!(
            "the assignment {name}={} is not a plain value of its kind",
            value.text
        )),
    }
}

fn check_redirect(redirect: &Redirect, descriptors: &mut Descriptors) -> Result<(), String> {
    let target = &redirect.target;
    let op = redirect.op.as_str();
    let exact = target.exact();
    if op == "<" && exact.is_some_and(|t| t.starts_with("/dev/tcp/") || t.starts_with("/dev/udp/"))
    {
        return Err(format!(
            "input redirection from '{}' opens a network connection",
            target.text
        ));
    }
    let through = descriptors.apply(redirect);
    let writes = matches!(op, ">" | ">>" | ">|" | "&>" | "&>>" | "<>")
        || (op == ">&" && !redirect.is_harmless());
    if writes && exact.is_some() {
        // `/dev/stdout`, `/dev/fd/2`, `/proc/self/fd/1`…: the call's own
        // output pipes only while nothing re-pointed them.
        match through {
            Some(Held::Given(1 | 2)) if op != "<>" => return Ok(()),
            Some(held) => return Err(alias_write(&target.text, &held)),
            None => {}
        }
    }
    if redirect.is_harmless() {
        return Ok(());
    }
    Err(if op == "<>" {
        format!("'<>' opens '{}' for writing", target.text)
    } else if writes {
        format!("output redirection to '{}'", target.text)
    } else {
        format!("the redirection '{op}' from '{}'", target.text)
    })
}

/// Why a write through a descriptor alias is not read-only.
fn alias_write(alias: &str, held: &Held) -> String {
    let what = match held {
        Held::Given(0) => "the command's input".to_string(),
        Held::Given(fd) => format!("descriptor {fd} as given, opened for reading and writing"),
        Held::File(word) => format!("'{}', which an earlier redirection opened", word.text),
        Held::Closed => "a closed descriptor".to_string(),
        Held::Unknown => "a descriptor whose file the reader does not know".to_string(),
    };
    format!("output redirection to '{alias}' writes to whatever it holds: {what}")
}
