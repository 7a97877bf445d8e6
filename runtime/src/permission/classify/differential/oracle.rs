//! The argv oracle: for every line the reader reads, the argv of each
//! command it says runs is compared with the argv bash builds: whole where
//! the reader knows every word, by program where an argument is one it does
//! not evaluate (`${x:-…}`, `$'…'`, a glob), which still checks that the
//! reader ends that word, and so every later command, where bash does.
//!
//! bash runs the lines with `PATH=/nonexistent`, every builtin disabled
//! (those the driver needs are shadowed by functions) and a
//! `command_not_found_handle` that writes its argv to fd 9, so nothing runs
//! and every command, builtin or not, reports what it was given. Each
//! command succeeds, so a pipeline after `||` is skipped and everything
//! else runs. Records of one pipeline may arrive in any order, so each
//! line's records are compared sorted.

use std::fs;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::permission::shell::{Join, Script, SimpleCommand, Word};

/// What bash ran: one argv per command.
pub(super) type Argvs = Vec<Vec<String>>;

/// What the reader says one command runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Expected {
    /// Exactly this argv.
    Argv(Vec<String>),
    /// This program, with arguments the reader does not evaluate.
    Program(String),
}

/// Whether `observed` is what `expected` says, record for record.
pub(super) fn agrees(expected: &[Expected], observed: &Argvs) -> bool {
    if expected.len() != observed.len() {
        return false;
    }
    let mut left: Vec<&Vec<String>> = observed.iter().collect();
    let mut programs = Vec::new();
    for want in expected {
        match want {
            Expected::Argv(argv) => match left.iter().position(|got| *got == argv) {
                Some(at) => {
                    left.swap_remove(at);
                }
                None => return false,
            },
            Expected::Program(program) => programs.push(program),
        }
    }
    for program in programs {
        match left.iter().position(|got| got.first() == Some(program)) {
            Some(at) => {
                left.swap_remove(at);
            }
            None => return false,
        }
    }
    true
}

/// The only names a compared line may assign: others (`PATH`, readonly
/// ones like `UID`, `POSIXLY_CORRECT`) would change what the stand-ins see.
const ASSIGNABLE: &[&str] = &[
    "LANG",
    "LC_ALL",
    "LC_COLLATE",
    "TZ",
    "NO_COLOR",
    "COLUMNS",
    "FOO",
];

/// The commands bash will run for `script`, when the oracle can watch
/// them: `None` for a line with a substitution, a program, assignment or
/// redirection target the reader does not know exactly, an argument whose
/// expansion can fail, a redirection that could fail or touch the oracle's
/// descriptor, or an assignment that changes lookup.
pub(super) fn expected(script: &Script, scratch: &Path) -> Option<Vec<Expected>> {
    for command in &script.commands {
        comparable(command, scratch)?;
    }
    let mut out = Vec::new();
    let mut skipping = false;
    for (i, command) in script.commands.iter().enumerate() {
        let join_before = i.checked_sub(1).and_then(|j| script.joins.get(j)).copied();
        match join_before {
            // A pipeline runs or is skipped as a whole.
            Some(Join::Pipe) => {}
            Some(Join::Or) => skipping = true,
            _ => skipping = false,
        }
        if skipping {
            continue;
        }
        if let Some(argv) = command
            .words
            .iter()
            .map(|w| w.exact().map(str::to_string))
            .collect::<Option<Vec<String>>>()
        {
            if !argv.is_empty() {
                out.push(Expected::Argv(argv));
            }
        } else if let Some(program) = command.program() {
            out.push(Expected::Program(program.to_string()));
        }
    }
    Some(out)
}

/// An argument the reader does not evaluate whose expansion cannot fail:
/// a glob, tilde, brace, plain variable, `$'…'`, `$"…"`, or `${x:-…}`,
/// `${x-…}`, `${x:+…}`, `${x+…}` with nothing nested.
fn expands_safely(word: &Word) -> bool {
    if !word.substitutions.is_empty() || word.text.contains(['\u{1}', '\u{7f}']) {
        return false;
    }
    let Some(why) = &word.opaque else {
        return true;
    };
    if why.starts_with("ANSI-C") || why.starts_with("locale") || why.starts_with("brace") {
        return true;
    }
    // bash's expander reads quotes and braces inside `${…}` differently
    // from its parser ("bad substitution"): only one `${…}` with a plain
    // operand.
    let rest = word.text.replacen("${", "", 1);
    if !why.starts_with("a parameter expansion")
        || word.text.matches("${").count() != 1
        || rest.matches('}').count() != 1
        || rest.contains(['\'', '"', '\\', '{', '`', '$', '('])
    {
        return false;
    }
    let Some(at) = word.text.find("${") else {
        return false;
    };
    let rest = &word.text[at + 2..];
    let name = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .count();
    name > 0
        && ["-", ":-", "+", ":+"]
            .iter()
            .any(|op| rest[name..].starts_with(op))
}

fn comparable(command: &SimpleCommand, scratch: &Path) -> Option<()> {
    let targets = command
        .assignments
        .iter()
        .map(|(_, w)| w)
        .chain(command.redirects.iter().map(|r| &r.target));
    let (program, args) = command
        .words
        .split_first()
        .map_or((None, &[][..]), |(p, a)| (Some(p), a));
    if targets.chain(program).any(|w| w.exact().is_none()) || !args.iter().all(expands_safely) {
        return None;
    }
    // bash runs a name with a slash as a path, and one starting with `%`
    // resumes a job, both without the handler.
    if command
        .program()
        .is_some_and(|p| p == "builtin" || p.contains('/') || p.starts_with('%'))
    {
        return None;
    }
    if command
        .assignments
        .iter()
        .any(|(name, _)| !ASSIGNABLE.contains(&name.as_str()))
    {
        return None;
    }
    for redirect in &command.redirects {
        if redirect.fd.is_some_and(|fd| fd > 8) {
            return None;
        }
        let target = redirect.target.text.as_str();
        // A plain file name in the scratch directory: opening it cannot fail.
        let simple = !target.is_empty()
            && !target.contains('/')
            && !target.starts_with('-')
            && !scratch.join(target).is_dir();
        let ok = match redirect.op.as_str() {
            "<" => simple && scratch.join(target).is_file(),
            "<<<" => true,
            ">&" | "<&" => matches!(target, "0" | "1" | "2" | "-"),
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => target == "/dev/null" || simple,
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(())
}

/// The bash program that runs each line of the lines file (NUL-separated,
/// on fd 8) in a subshell and writes records to fd 9: per command its
/// argument count and arguments, NUL-terminated, then `\x1e` per line.
const DRIVER: &str = r#"
__rec() { builtin printf '%s\0' "$#" "$@" >&9; }
command_not_found_handle() { __rec "$@"; }
for __b in $(compgen -b); do
  case $__b in builtin|printf|read|eval|wait|enable) ;; *) enable -n "$__b" ;; esac
done
printf() { __rec printf "$@"; }
read() { __rec read "$@"; }
eval() { __rec eval "$@"; }
wait() { __rec wait "$@"; }
enable() { __rec enable "$@"; }
PATH=/nonexistent
while IFS= builtin read -r -d '' -u 8 __line; do
  ( builtin eval "$__line"; builtin wait ) </dev/null >/dev/null 2>&1
  builtin printf '\036\0' >&9
done
"#;

/// Runs `lines` through the driver in `scratch`; the records of each line,
/// sorted, in order.
pub(super) async fn observe(lines: &[String], scratch: &Path) -> io::Result<Vec<Argvs>> {
    let lines_file = scratch.join("..").join("oracle.lines");
    let records_file = scratch.join("..").join("oracle.records");
    let mut input = Vec::new();
    for line in lines {
        input.extend_from_slice(line.as_bytes());
        input.push(0);
    }
    fs::write(&lines_file, input)?;
    fs::write(&records_file, "")?;
    let script = format!(
        "exec 8<'{}' 9>>'{}'\n{DRIVER}",
        lines_file.display(),
        records_file.display()
    );
    let mut child = tokio::process::Command::new("bash")
        .arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(script)
        .current_dir(scratch)
        .env_clear()
        .env("HOME", scratch)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    tokio::time::timeout(Duration::from_secs(300), child.wait())
        .await
        .map_err(|_| io::Error::other("the oracle's bash did not finish in 300 s"))??;
    let records = fs::read(&records_file)?;
    fs::remove_file(&lines_file)?;
    fs::remove_file(&records_file)?;
    Ok(split(&records))
}

/// Splits the records file into lines of argvs.
fn split(records: &[u8]) -> Vec<Argvs> {
    let mut fields = records
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut out = Vec::new();
    let mut current = Argvs::new();
    while let Some(field) = fields.next() {
        if field == "\u{1e}" {
            current.sort();
            out.push(std::mem::take(&mut current));
            continue;
        }
        let Ok(count) = field.parse::<usize>() else {
            // A torn record: keep what is there so the line disagrees.
            current.push(vec![field]);
            continue;
        };
        current.push(fields.by_ref().take(count).collect());
    }
    out
}
