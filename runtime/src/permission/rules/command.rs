//! `bash` command patterns: `git push:*` (a prefix) and `npm run test`
//! (exact), and how they meet a command line.
//!
//! A deny or ask rule *catches* a call; it errs towards matching:
//! - any simple command matches, including those inside `$(…)`, backticks
//!   and `<(…)`;
//! - leading assignments are not words, and after a wrapper (`sudo`, `env`,
//!   `nohup`, `command`, `exec`, `time`, `nice`, and the like) every later
//!   word is tried as the wrapped program, so a wrapper's options never hide
//!   it; `sh -c '…'`, `bash -c '…'` and `eval …` are parsed and searched;
//! - the program is also compared by its last path component
//!   (`/usr/bin/git push` is `git push`);
//! - a word whose value is unknown until run time (`$X`, `$(…)`, or one
//!   the reader does not evaluate, like `$'…'`) matches any rule word, and
//!   a glob word (`pu*`, `{push,x}`) matches the rule words it would match
//!   as a glob;
//! - a command line that does not parse is caught when the rule's words
//!   occur consecutively anywhere in it, split at blanks and shell operators
//!   with quotes removed.
//!
//! An allow rule *covers* a simple command; every simple command of a call
//! must be covered by some allow rule for the call to be allowed, and a call
//! with a substitution, or that does not parse, is never covered. Covering
//! is literal: words must be equal as written; leading assignments are looked
//! through unless they change what runs (`PATH`, `LD_PRELOAD`, `BASH_ENV`,
//! …); `nohup`, `time`, `command`, `exec`, `nice` and `env NAME=value` are
//! looked through only when no option follows them; `sudo` never is, since
//! it changes who runs the command (allow `bash(sudo apt update)` to mean
//! it); and a redirection that writes (other than to `/dev/null`) is never
//! covered.

use globset::Glob;
use serde_json::Value;

use crate::permission::classify;
use crate::permission::shell::{self, Script, SimpleCommand, Word};

/// Programs that run the command in their arguments.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nohup", "command", "exec", "time", "nice", "ionice", "timeout",
    "setsid", "stdbuf", "xargs",
];

/// Wrappers an allow rule looks through (when no option follows them).
const PLAIN_WRAPPERS: &[&str] = &["nohup", "time", "command", "exec", "nice"];

/// Shells whose `-c` argument is a command line.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh"];

/// How deep `sh -c` and `eval` are followed before failing closed.
const MAX_DEPTH: usize = 4;

/// A `bash` command pattern.
#[derive(Debug, Clone)]
pub(super) struct CommandPattern {
    /// The pattern's words, quotes removed.
    words: Vec<Word>,
    /// `:*`: the command's words need only start with these.
    prefix: bool,
}

/// A `bash` call's command line, parsed once per decision.
pub(super) enum BashCall {
    /// It parsed.
    Parsed(Script),
    /// It did not parse; the raw text is scanned instead.
    Unparsed(String),
    /// No string `command` argument.
    Unreadable,
}

impl BashCall {
    pub(super) fn new(args: &Value) -> Self {
        match args.get("command").and_then(Value::as_str) {
            Some(line) => match shell::parse(line) {
                Ok(script) => BashCall::Parsed(script),
                Err(_) => BashCall::Unparsed(line.to_string()),
            },
            None => BashCall::Unreadable,
        }
    }
}

/// How strictly a pattern's words are compared with a command's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Deny and ask: anything that could be the rule's words is.
    Catch,
    /// Allow: only what is written the same.
    Cover,
}

impl CommandPattern {
    /// Parses the inside of `bash(…)`, `*` excepted.
    pub(super) fn parse(arg: &str) -> Result<Self, String> {
        let (body, prefix) = match arg.strip_suffix(":*") {
            Some(body) => (body.trim_end(), true),
            None => (arg, false),
        };
        let script = shell::parse(body).map_err(|e| format!("it does not parse ({e})"))?;
        let [command] = script.commands.as_slice() else {
            return Err(if script.commands.is_empty() {
                "it names no command".to_string()
            } else {
                "it is more than one command; write one rule per command".to_string()
            });
        };
        if !script.joins.is_empty() {
            return Err("it ends with an operator".into());
        }
        if !command.assignments.is_empty() {
            return Err("leading assignments are looked through; leave them out".into());
        }
        if !command.redirects.is_empty() {
            return Err("it has a redirection".into());
        }
        if script.has_substitution() {
            return Err("it has a substitution".into());
        }
        if command.words.iter().any(|w| w.globs) {
            return Err("only a trailing ':*' is a wildcard; quote glob characters".into());
        }
        Ok(Self {
            words: command.words.clone(),
            prefix,
        })
    }

    /// Whether a deny or ask rule with this pattern catches the call.
    pub(super) fn catches(&self, call: &BashCall) -> bool {
        match call {
            BashCall::Parsed(script) => self.catches_script(script, 0),
            BashCall::Unparsed(line) => self.occurs_in(line),
            BashCall::Unreadable => true,
        }
    }

    fn catches_script(&self, script: &Script, depth: usize) -> bool {
        script
            .all_commands()
            .iter()
            .any(|command| self.catches_words(&command.words, depth))
    }

    fn catches_words(&self, words: &[Word], depth: usize) -> bool {
        let Some(program) = words.first() else {
            return false;
        };
        if self.catches_view(words, depth) {
            return true;
        }
        // Options of a wrapper are not parsed: every later word that is not
        // an assignment is tried as the wrapped program. Each suffix is only
        // tried once, so nested wrappers cost no more than one.
        WRAPPERS.contains(&basename(&program.text))
            && (1..words.len()).any(|i| {
                shell_assignment(&words[i]).is_none() && self.catches_view(&words[i..], depth)
            })
    }

    /// `view` as the command, or the command line it hands to a shell.
    fn catches_view(&self, view: &[Word], depth: usize) -> bool {
        if self.fits(view, Reading::Catch) {
            return true;
        }
        let Some((program, rest)) = view.split_first() else {
            return false;
        };
        let name = basename(&program.text);
        if SHELLS.contains(&name) {
            let Some(flag) = rest.iter().position(|w| is_command_flag(&w.text)) else {
                return false;
            };
            return match rest.get(flag + 1) {
                Some(line) => self.catches_line(std::slice::from_ref(line), depth),
                None => false,
            };
        }
        name == "eval" && self.catches_line(rest, depth)
    }

    /// Words joined into a command line that a shell will run.
    fn catches_line(&self, words: &[Word], depth: usize) -> bool {
        if depth >= MAX_DEPTH || words.iter().any(unknown) {
            return true;
        }
        let line = words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        match shell::parse(&line) {
            Ok(script) => self.catches_script(&script, depth + 1),
            Err(_) => self.occurs_in(&line),
        }
    }

    /// Whether the pattern's words occur consecutively in an unparsed line.
    fn occurs_in(&self, line: &str) -> bool {
        let pattern = loose_tokens(
            &self
                .words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let Some((first, rest)) = pattern.split_first() else {
            return false;
        };
        let tokens = loose_tokens(line);
        (0..tokens.len()).any(|i| {
            let program = &tokens[i];
            (program == first || basename(program) == first)
                && tokens.len() - i > rest.len()
                && rest.iter().zip(&tokens[i + 1..]).all(|(p, t)| p == t)
        })
    }

    /// Whether `view`'s words match the pattern: equal in number, or at
    /// least as many for a prefix.
    fn fits(&self, view: &[Word], reading: Reading) -> bool {
        let long_enough = if self.prefix {
            view.len() >= self.words.len()
        } else {
            view.len() == self.words.len()
        };
        long_enough
            && self
                .words
                .iter()
                .zip(view)
                .enumerate()
                .all(|(i, (want, have))| word_fits(i == 0, want, have, reading))
    }
}

fn word_fits(program: bool, want: &Word, have: &Word, reading: Reading) -> bool {
    match reading {
        Reading::Cover => {
            have.text == want.text
                && have.expands == want.expands
                && have.tilde == want.tilde
                && !have.globs
                && have.opaque.is_none()
        }
        Reading::Catch => {
            have.text == want.text
                || (program && !want.text.contains('/') && basename(&have.text) == want.text)
                || unknown(have)
                || (have.globs && glob_could_be(&have.text, &want.text))
        }
    }
}

/// The indices of the patterns that together cover every simple command of
/// the call, or none when some command is left uncovered.
pub(super) fn covering(call: &BashCall, patterns: &[&CommandPattern]) -> Vec<usize> {
    coverage(call, patterns).unwrap_or_default()
}

/// The allow patterns that together cover a command line, or the first
/// simple command nothing covers. A command no pattern names is covered
/// when it is proven read-only on its own (`cargo test 2>&1 | tail -15`
/// under `bash(cargo test:*)`), but at least one command must be a
/// pattern's: read-only alone is the floor's to allow, not a rule's.
/// `Err(None)`: the line cannot be covered at all (unparsed, a
/// substitution, no pattern fits anything).
pub(super) fn coverage(
    call: &BashCall,
    patterns: &[&CommandPattern],
) -> Result<Vec<usize>, Option<String>> {
    let BashCall::Parsed(script) = call else {
        return Err(None);
    };
    if script.has_substitution() {
        return Err(None);
    }
    let commands = script.all_commands();
    // git discovers its repository from where it runs: after a `cd`, that
    // may be one the repository committed, whose configuration runs
    // programs. Such a `git` needs a pattern of its own.
    let moved = commands.iter().any(|c| c.program() == Some("cd"));
    let mut used = Vec::new();
    let mut uncovered = None;
    for command in &commands {
        let views = cover_views(command);
        let before = used.len();
        used.extend(
            (0..patterns.len())
                .filter(|&i| views.iter().any(|v| patterns[i].fits(v, Reading::Cover))),
        );
        let read_only = || {
            let git_elsewhere = moved && command.program() == Some("git");
            !git_elsewhere && classify::simple_read_only(command).is_ok()
        };
        if used.len() == before && !read_only() && uncovered.is_none() {
            uncovered = Some(shown(command));
        }
    }
    match (used.is_empty(), uncovered) {
        (true, _) => Err(None),
        (false, Some(segment)) => Err(Some(segment)),
        (false, None) => {
            used.sort_unstable();
            used.dedup();
            Ok(used)
        }
    }
}

/// A simple command as people read it: its words, space-separated.
fn shown(command: &SimpleCommand) -> String {
    command
        .words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The word lists an allow rule may match one simple command by: as written,
/// then through each plain wrapper. None when the command writes through a
/// redirection or assigns a variable that changes what runs.
fn cover_views(command: &SimpleCommand) -> Vec<&[Word]> {
    if command.redirects.iter().any(|r| !r.is_harmless())
        || command
            .assignments
            .iter()
            .any(|(name, _)| changes_what_runs(name))
    {
        return Vec::new();
    }
    let mut views = Vec::new();
    let mut view = command.words.as_slice();
    while let Some((program, rest)) = view.split_first() {
        views.push(view);
        let next = if PLAIN_WRAPPERS.contains(&program.text.as_str()) {
            rest
        } else if program.text == "env" {
            let assigned = rest.iter().map_while(shell_assignment).collect::<Vec<_>>();
            if assigned.iter().any(|name| changes_what_runs(name)) {
                break;
            }
            &rest[assigned.len()..]
        } else {
            break;
        };
        if next.first().is_none_or(|w| w.text.starts_with('-')) {
            break;
        }
        view = next;
    }
    views
}

/// Variables that change which program runs, or what every program or
/// shell loads. Variables one tool reads (`GIT_SSH_COMMAND`, `RUSTC_WRAPPER`)
/// are not listed: a prefix rule already trusts whatever arguments follow
/// it, and those are as strong as the tool's own variables.
fn changes_what_runs(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
    ];
    NAMES.contains(&name) || name.starts_with("LD_") || name.starts_with("DYLD_")
}

/// The name of an unquoted `NAME=value` word.
fn shell_assignment(word: &Word) -> Option<&str> {
    let (name, _) = word.text.split_once('=')?;
    let unquoted = word.quoted_from.is_none_or(|q| q > name.len());
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    (unquoted && valid).then_some(name)
}

/// `-c`, or a cluster of short options with `c` in it (`-lc`, `-ec`).
fn is_command_flag(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|flags| {
        !flags.starts_with('-')
            && flags.contains('c')
            && flags.chars().all(|c| c.is_ascii_alphabetic())
    })
}

/// A word whose value is known only when it runs, or that the reader does
/// not evaluate (`$'…'`, `${x:-…}`).
fn unknown(word: &Word) -> bool {
    word.is_unknown()
}

/// Whether the shell could expand the glob word `glob` to `text`.
fn glob_could_be(glob: &str, text: &str) -> bool {
    Glob::new(glob).map_or(true, |g| g.compile_matcher().is_match(text))
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Words of a line that did not parse: split at blanks and shell operators,
/// quotes and backslashes dropped.
fn loose_tokens(line: &str) -> Vec<String> {
    line.split(|c: char| c.is_whitespace() || ";|&()<>{}`".contains(c))
        .map(|t| t.replace(['\'', '"', '\\'], ""))
        .filter(|t| !t.is_empty())
        .collect()
}
