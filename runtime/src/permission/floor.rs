//! The deterministic floor (P4): what no posture, rule or reviewer can
//! change.
//!
//! [`assess`] answers one of three things about a call:
//! - [`FloorVerdict::ProvenSafe`]: the call is classified read-only (T5);
//! - [`FloorVerdict::Blocked`]: it publishes (`git push`, `cargo publish`,
//!   `npm publish`, …), leaves work running after the call (`nohup`,
//!   `setsid`, `&`, `tmux new -d`, …), wrecks the machine (`rm -r` outside
//!   the workspace, `mkfs`, `dd of=/dev/…`, `shutdown`, …), or writes into a
//!   `.git` directory, whose hooks and config run code; blocked in every
//!   posture, never reviewed;
//! - [`FloorVerdict::Unproven`]: neither; the posture decides, and the
//!   factual observations go to whoever reviews it;
//! - [`FloorVerdict::Unplaced`]: unproven, and it writes a path the reader
//!   cannot place (`> ${d}t/hooks/pre-commit`, `tee "$(…)/x"`, a write
//!   through `/dev/fd/N` whose file is unknown: `writes.rs`), which could
//!   be in `.git` or `.cadre`: a person or the guardian must see it, so
//!   neither Full Access nor an allow rule lets it through unreviewed.
//!
//! Writes through descriptor aliases (`/dev/stdout`, `/dev/fd/N`,
//! `/proc/self/fd/N`) are writes to the file the descriptor holds, followed
//! through the command's redirections (and an `exec`'s, for the rest of the
//! line) by `shell::fd`.
//!
//! For `bash` every simple command is checked, including those inside
//! substitutions, behind wrappers (`sudo`, `env X=1`, `timeout 5`, `xargs`,
//! `find -exec`, …; every later word of a wrapper is tried as the wrapped
//! program, so its options cannot hide one) and inside strings another
//! shell runs (`bash -c '…'`, `eval '…'`, `ssh host '…'`), parsed in turn.
//! A command line that does not parse fails closed: it is blocked when it
//! mentions a detach or publish word (`nohup`, `push`, `publish`, …) or a
//! background `&`, and its loosely split words are checked as commands too.
//!
//! The floor is pure: paths are compared lexically with the workspace root
//! (`..` resolved, nothing read from disk). Which `bash` call is read-only
//! is decided by `classify`; the floor is told through `safety`.

mod command;
mod table;
#[cfg(test)]
mod tests;
mod writes;

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use command::{
    background_amp, basename, command_starts, detach, is_c_cluster, loose_segments, marker,
    publish, split_options,
};
use serde_json::Value;
use table::{
    DETACHERS, HARMLESS_DEVICES, MACHINE_WRECKERS, NETWORK, PUBLISH, RUNS_STRINGS, SHELLS,
    SYSTEMCTL_WRECKERS, Strings,
};

use super::classify::classify_command;
use super::shell::fd::{Alias, Descriptors, Held};
use super::shell::{self, Join, Redirect, Script, SimpleCommand, Word, command_words};
use crate::tool::{Safety, ToolDefinition};

/// What the floor concludes about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FloorVerdict {
    /// Proven safe: it may run in every posture without asking.
    ProvenSafe {
        /// What proved it.
        reason: String,
    },
    /// Hard-blocked in every posture; never reviewed.
    Blocked {
        /// What it would have done.
        reason: String,
    },
    /// Neither proven safe nor blocked: the posture decides.
    Unproven {
        /// Facts for a reviewer: programs run, files written, paths outside
        /// the workspace, network use.
        observations: Vec<String>,
    },
    /// Unproven, and it writes somewhere the reader cannot place, which
    /// could be a protected path: a person or the guardian decides; Full
    /// Access and allow rules do not let it through unreviewed.
    Unplaced {
        /// The first write the reader could not place, and why.
        reason: String,
        /// Facts for a reviewer, as for [`FloorVerdict::Unproven`].
        observations: Vec<String>,
    },
}

/// How many shells deep (`bash -c "sh -c '…'"`) strings are followed before
/// the floor falls back to scanning the text.
const MAX_DEPTH: usize = 4;

/// How many wrapped commands of one simple command (`env env … x`) are
/// examined one by one; past that the words are scanned for markers, so the
/// floor stays linear in the length of the line.
const MAX_STARTS: usize = 32;

/// Assesses one call. `safety` is the tool's classification of this call
/// (T5); `workspace_root` is compared lexically. A shell tool is
/// assessed by its `command`; a path writer (`writes_path_only`) by its
/// `path`; any other tool by its safety alone.
pub fn assess(
    def: &ToolDefinition,
    safety: Safety,
    args: &Value,
    workspace_root: &Path,
) -> FloorVerdict {
    if def.shell {
        // A shell tool's call with no command line at all, where its schema
        // allows one without (`process list`, `process stop`), runs nothing
        // new: it reads or ends what an allowed call started.
        let optional = !def.input_schema["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|name| name == "command"));
        if optional && args.get("command").is_none() {
            return FloorVerdict::ProvenSafe {
                reason: format!("'{}' runs no command line", def.name),
            };
        }
        return assess_bash(safety, args, workspace_root);
    }
    if safety == Safety::ReadOnly {
        return FloorVerdict::ProvenSafe {
            reason: format!("'{}' is read-only", def.name),
        };
    }
    // A host tool with a path argument may write it: `.git` is blocked
    // for it as for the built-in writers.
    if def.writes_path_only || def.path_arg.as_deref() == Some("path") {
        return assess_write(def, args, workspace_root);
    }
    FloorVerdict::Unproven {
        observations: vec![format!("side-effect tool '{}'", def.name)],
    }
}

fn assess_bash(safety: Safety, args: &Value, root: &Path) -> FloorVerdict {
    let Some(command) = args.get("command").and_then(Value::as_str) else {
        return FloorVerdict::Unproven {
            observations: vec!["'bash' call without a string 'command'".into()],
        };
    };
    let mut scan = Scan::new(root);
    scan.source(command, 0);
    if scan.stdin_shell
        && let Some(marker) = marker(command)
    {
        scan.block(format!(
            "a shell reads commands from its input, and the command line mentions '{marker}'"
        ));
    }
    if let Some(reason) = scan.blocked {
        return FloorVerdict::Blocked { reason };
    }
    let classified = classify_command(command);
    if safety == Safety::ReadOnly {
        let reason = match classified.safety {
            Safety::ReadOnly => format!("classified read-only: {}", classified.reason),
            Safety::SideEffect => "classified read-only by the tool".to_string(),
        };
        return FloorVerdict::ProvenSafe { reason };
    }
    let mut observations = Vec::new();
    if scan.unparsed.is_none() {
        observations.push(format!("not proven read-only: {}", classified.reason));
    }
    let unplaced = scan.unplaced.items.first().cloned();
    observations.extend(scan.observations());
    match unplaced {
        Some(what) => FloorVerdict::Unplaced {
            reason: format!(
                "it writes {what}: known only when it runs, it could be in .git or .cadre, so \
                 it is never run unreviewed; name the path literally"
            ),
            observations,
        },
        None => FloorVerdict::Unproven { observations },
    }
}

/// A path writer's observations. Writes to protected paths (`.git`,
/// `.cadre`, cadre's configuration and data) are blocked before the floor
/// is asked, by `permission::protected`, which also reads where symlinks
/// lead and the allow rules that name a path literally.
fn assess_write(def: &ToolDefinition, args: &Value, root: &Path) -> FloorVerdict {
    let Some(path) = def.path_in(args) else {
        return FloorVerdict::Unproven {
            observations: vec![format!(
                "'{}' call without a string '{}'",
                def.name,
                def.path_arg.as_deref().unwrap_or("path")
            )],
        };
    };
    let root = normalize(root);
    let resolved = normalize(&root.join(path));
    let side = if resolved.starts_with(&root) {
        "inside"
    } else {
        "outside"
    };
    FloorVerdict::Unproven {
        observations: vec![format!("writes {path} {side} the workspace")],
    }
}

/// Where a path word lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Strictly inside the workspace.
    Inside,
    /// The workspace root itself.
    Root,
    /// Outside it (including `~`, `$HOME`, `/`).
    Outside,
    /// Known only when the command runs (a variable, or after `cd $X`).
    Unknown,
}

/// Items in the order first seen, each once.
#[derive(Default)]
struct Listed {
    items: Vec<String>,
    seen: HashSet<String>,
}

impl Listed {
    fn add(&mut self, item: &str) {
        if self.seen.insert(item.to_string()) {
            self.items.push(item.to_string());
        }
    }
}

/// What one pass over a command line found.
struct Scan {
    root: PathBuf,
    /// Where relative paths resolve: the workspace until a `cd` moves it,
    /// `None` once a `cd` leads somewhere unknown.
    cwd: Option<PathBuf>,
    /// The first hard block found.
    blocked: Option<String>,
    /// Why the top-level command line did not parse, when it did not.
    unparsed: Option<String>,
    /// A shell reads commands from its input (`… | sh`, `bash <<< …`).
    stdin_shell: bool,
    // The rest is what a reviewer is told, in the order it is told.
    /// Some command runs inside `$(…)`, backticks or `<(…)`.
    substitution: bool,
    /// The programs the simple commands start, as written (last path
    /// component), in order.
    programs: Listed,
    /// Targets of redirections that write.
    writes: Listed,
    /// Path arguments and targets that lie outside the workspace.
    outside: Listed,
    /// Network programs and `/dev/tcp` targets.
    network: Listed,
    /// Words whose value is a variable's.
    variables: Listed,
    /// Command lines handed to another shell.
    nested: Listed,
    /// Words the reader does not evaluate, with why.
    opaque: Listed,
    /// Write targets the reader cannot place, with why.
    unplaced: Listed,
    /// What the descriptors hold as the current simple command starts: as
    /// given, or as an `exec` earlier on the line left them.
    start_descriptors: Descriptors,
    /// What they hold once the current command's redirections are applied,
    /// which is what its program's arguments open.
    descriptors: Descriptors,
    /// Anything else worth knowing (a nested line that did not parse).
    notes: Vec<String>,
}

impl Scan {
    fn new(root: &Path) -> Self {
        let root = normalize(root);
        Self {
            cwd: Some(root.clone()),
            root,
            blocked: None,
            unparsed: None,
            stdin_shell: false,
            substitution: false,
            programs: Listed::default(),
            writes: Listed::default(),
            outside: Listed::default(),
            network: Listed::default(),
            variables: Listed::default(),
            nested: Listed::default(),
            opaque: Listed::default(),
            unplaced: Listed::default(),
            start_descriptors: Descriptors::given(),
            descriptors: Descriptors::given(),
            notes: Vec::new(),
        }
    }

    fn block(&mut self, reason: String) {
        self.blocked.get_or_insert(reason);
    }

    fn observations(self) -> Vec<String> {
        let mut out: Vec<String> = self.unparsed.into_iter().collect();
        let mut list = |label: &str, listed: Listed| {
            if !listed.items.is_empty() {
                out.push(format!("{label}: {}", listed.items.join(", ")));
            }
        };
        list("runs", self.programs);
        list("redirects output to", self.writes);
        list("names paths outside the workspace", self.outside);
        list("uses the network", self.network);
        list("expands variables known only when it runs", self.variables);
        list("has words the reader does not evaluate", self.opaque);
        list("writes where the reader cannot place", self.unplaced);
        list("hands command lines to another shell", self.nested);
        if self.substitution {
            out.push("runs commands inside substitutions".into());
        }
        if self.stdin_shell {
            out.push("a shell reads commands from its input, which the floor cannot see".into());
        }
        out.extend(self.notes);
        out
    }

    /// A command line, at `depth` shells in.
    fn source(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return self.fallback(text, "shells nested too deeply to follow", depth);
        }
        match shell::parse(text) {
            Ok(script) => self.script(&script, depth),
            Err(why) => self.fallback(text, &why.0, depth),
        }
    }

    fn script(&mut self, script: &Script, depth: usize) {
        for (i, join) in script.joins.iter().enumerate() {
            if *join == Join::Background {
                let what = script.commands.get(i).map(shown).unwrap_or_default();
                self.block(format!(
                    "`&` runs '{what}' in the background, where it outlives the call"
                ));
            }
        }
        for command in &script.commands {
            self.command(command, depth);
        }
    }

    fn command(&mut self, command: &SimpleCommand, depth: usize) {
        for word in command_words(command) {
            for inner in &word.substitutions {
                self.substitution = true;
                self.script(inner, depth);
            }
            if let Some(why) = &word.opaque {
                self.opaque.add(&format!("'{}' ({why})", word.text));
            }
        }
        let mut descriptors = self.start_descriptors.clone();
        for redirect in &command.redirects {
            let through = descriptors.apply(redirect);
            self.redirect(redirect, through);
        }
        if command.program() == Some("exec") {
            // Its redirections hold for the rest of the line.
            self.start_descriptors = descriptors.clone();
        }
        self.descriptors = descriptors;
        // After brace expansion, as bash hands the words on.
        let words = command.expanded_words();
        for word in &words {
            self.note_word(word);
        }
        if let Some(program) = words.first().filter(|w| !w.expands) {
            self.programs.add(basename(&program.text));
        }
        let starts = command_starts(&words);
        if starts.len() > MAX_STARTS {
            let text: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
            if let Some(marker) = marker(&text.join(" ")) {
                self.block(format!(
                    "a command wraps more than {MAX_STARTS} others, too many to follow, and \
                     mentions '{marker}'"
                ));
            }
        }
        for start in starts.into_iter().take(MAX_STARTS) {
            self.examine(&words[start..], depth);
        }
        if let Some((program, args)) = words.split_first()
            && matches!(program.text.as_str(), "cd" | "pushd")
        {
            self.cwd = self.cd(args);
        }
    }

    /// Blocks and notes for one command as it would run: `words[0]` is the
    /// program.
    fn examine(&mut self, words: &[Word], depth: usize) {
        let Some((program, args)) = words.split_first() else {
            return;
        };
        if program.expands || !program.substitutions.is_empty() {
            return self.hidden_markers(words);
        }
        let name = basename(&program.text);
        if NETWORK.contains(&name) {
            self.network.add(name);
        }
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if let Some(reason) = publish(name, &texts)
            .or_else(|| detach(name, &texts))
            .or_else(|| self.destructive(name, args))
        {
            self.block(reason);
        }
        self.hidden_markers(words);
        self.writer_arguments(name, args);
        self.strings(name, args, depth);
    }

    /// An opaque word (`$'…'`, `${x:-…}`) is read by its best reading
    /// above; a marker in it blocks when it could be the program, or what a
    /// publishing or detaching program is told to do.
    fn hidden_markers(&mut self, words: &[Word]) {
        let Some(program) = words.first() else {
            return;
        };
        let hiding = words
            .iter()
            .enumerate()
            .filter(|(i, w)| w.opaque.is_some() && (*i == 0 || could_publish(&program.text)))
            .find_map(|(_, w)| marker(&w.text).map(|m| (w, m)));
        if let Some((word, marker)) = hiding {
            self.block(format!(
                "'{}' is read only when it runs and mentions '{marker}'",
                word.text
            ));
        }
    }

    /// Parses the command lines `name` hands to a shell.
    fn strings(&mut self, name: &str, args: &[Word], depth: usize) {
        let Some((_, kind)) = RUNS_STRINGS.iter().find(|(p, _)| *p == name) else {
            return;
        };
        let mut lines: Vec<&str> = Vec::new();
        match kind {
            Strings::AfterC => {
                if let Some(at) = args.iter().position(|w| is_c_cluster(&w.text)) {
                    lines.extend(args.get(at + 1).map(|w| w.text.as_str()));
                } else if SHELLS.contains(&name) && args.iter().all(|w| w.text.starts_with('-')) {
                    self.stdin_shell = true;
                }
            }
            Strings::OptionValue(options) => {
                for (i, word) in args.iter().enumerate() {
                    let text = word.text.as_str();
                    if options.contains(&text) {
                        lines.extend(args.get(i + 1).map(|w| w.text.as_str()));
                    } else if let Some((option, value)) = text.split_once('=')
                        && options.contains(&option)
                    {
                        lines.push(value);
                    }
                }
            }
            Strings::EveryWord => lines.extend(
                args.iter()
                    .map(|w| w.text.as_str())
                    .filter(|t| t.contains(|c: char| c.is_whitespace() || ";&|<>()$`".contains(c))),
            ),
        }
        for line in lines {
            let line = line.to_string();
            self.nested.add(&line);
            self.source(&line, depth + 1);
        }
    }

    /// A command line that did not parse: fail closed on markers and a
    /// background `&`, and check its loosely split words as commands.
    fn fallback(&mut self, text: &str, why: &str, depth: usize) {
        if depth == 0 {
            self.unparsed = Some(format!("could not parse: {why}"));
        } else {
            self.notes.push(format!(
                "could not parse the nested command '{text}': {why}"
            ));
        }
        for segment in loose_segments(text) {
            for start in command_starts(&segment) {
                self.examine(&segment[start..], depth + 1);
            }
        }
        if let Some(marker) = marker(text) {
            self.block(format!(
                "the command line does not parse ({why}) and mentions '{marker}'"
            ));
        }
        if background_amp(text) {
            self.block(format!(
                "the command line does not parse ({why}) and has a `&` that may run work in \
                 the background"
            ));
        }
    }

    fn redirect(&mut self, redirect: &Redirect, through: Option<Held>) {
        let target = &redirect.target;
        let text = target.text.as_str();
        if text.starts_with("/dev/tcp/") || text.starts_with("/dev/udp/") {
            self.network.add(text);
            return;
        }
        let writes = match redirect.op.as_str() {
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => true,
            ">&" => !text.chars().all(|c| c.is_ascii_digit() || c == '-'),
            _ => false,
        };
        if !writes {
            return;
        }
        match through {
            Some(held) => self.through_alias(text, &held),
            None => self.write_target(target, text),
        }
    }

    /// A write through the descriptor alias `alias`, which holds `held`.
    fn through_alias(&mut self, alias: &str, held: &Held) {
        match held {
            // cadre's `/dev/null` and pipes, or the pipeline's.
            Held::Given(_) | Held::Closed => {}
            Held::File(word) => {
                let via = format!("{} (through '{alias}')", word.text);
                self.write_target(word, &via);
            }
            Held::Unknown => self.unplaced.add(&format!(
                "'{alias}' (a descriptor whose file the reader does not know)"
            )),
        }
    }

    /// A path a redirection writes, named `shown` in messages.
    fn write_target(&mut self, target: &Word, shown: &str) {
        let text = target.text.as_str();
        // An opaque word is judged by its best reading too (`$'.git/x'`).
        if !target.expands
            && let Some(path) = self.resolve(text)
            && in_git_dir(&path, &self.root)
        {
            return self.block(format!(
                "output redirection writes '{shown}' inside a .git directory, where hooks and \
                 config run code"
            ));
        }
        if let Some(why) = writes::unplaced(target) {
            self.unplaced.add(&format!("'{shown}' ({why})"));
            self.writes.add(shown);
            return;
        }
        if HARMLESS_DEVICES.contains(&text) {
            return;
        }
        if text.starts_with("/dev/") {
            return self.block(format!("output redirection writes to the device '{text}'"));
        }
        self.writes.add(shown);
        if self.place(target) == Place::Outside {
            self.outside.add(text);
        }
    }

    /// The arguments of a program that writes its operands: descriptor
    /// aliases among them write what the descriptor holds, and one the
    /// reader cannot place is a write it cannot place.
    fn writer_arguments(&mut self, name: &str, args: &[Word]) {
        if !writes::WRITERS.contains(&name) {
            return;
        }
        for word in args {
            if let Some(why) = writes::unplaced(word) {
                self.unplaced.add(&format!(
                    "'{}' as an operand of `{name}` ({why})",
                    word.text
                ));
                continue;
            }
            for (path, alias) in writes::alias_mentions(&word.text) {
                let held = match alias {
                    Alias::Fd(n) => self.descriptors.held(n),
                    Alias::Foreign => Held::Unknown,
                };
                self.through_alias(&path, &held);
            }
        }
    }

    /// Records variables and paths outside the workspace an argument names.
    fn note_word(&mut self, word: &Word) {
        let text = word.text.as_str();
        if word.expands {
            self.variables.add(text);
            return;
        }
        // `of=/dev/x`, `--file=/etc/y`: the value is the path.
        let path = match text.split_once('=') {
            Some((_, value)) if value.starts_with(['/', '~']) => value,
            _ => text,
        };
        let looks_like_path = path.starts_with(['/', '~']) || path.split('/').any(|c| c == "..");
        if !looks_like_path || HARMLESS_DEVICES.contains(&path) {
            return;
        }
        let as_word = Word {
            text: path.to_string(),
            ..Word::default()
        };
        if self.place(&as_word) == Place::Outside {
            self.outside.add(path);
        }
    }

    /// Where `cd`'s operand leads: `None` when unknown (no operand or `~`
    /// is home; a variable is unknown; `-` is the previous directory).
    fn cd(&self, args: &[Word]) -> Option<PathBuf> {
        let target = args
            .iter()
            .find(|w| !w.text.starts_with('-') || w.text == "-")?;
        if target.expands || target.text == "-" || target.text.starts_with('~') {
            return None;
        }
        self.resolve(&target.text)
    }

    /// A path word made absolute, when the directory it is relative to is known.
    fn resolve(&self, text: &str) -> Option<PathBuf> {
        if text.starts_with('/') {
            return Some(normalize(Path::new(text)));
        }
        self.cwd.as_ref().map(|cwd| normalize(&cwd.join(text)))
    }

    fn place(&self, word: &Word) -> Place {
        let text = word.text.as_str();
        if text.starts_with('~') || text.starts_with("$HOME") || text.starts_with("${HOME}") {
            return Place::Outside;
        }
        if word.is_unknown() {
            return Place::Unknown;
        }
        match self.resolve(text) {
            None => Place::Unknown,
            Some(path) if path == self.root => Place::Root,
            Some(path) if path.starts_with(&self.root) => Place::Inside,
            Some(_) => Place::Outside,
        }
    }

    /// Commands that destroy what is outside the workspace, a filesystem or
    /// the running machine.
    fn destructive(&self, name: &str, args: &[Word]) -> Option<String> {
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if MACHINE_WRECKERS.contains(&name) || name.starts_with("mkfs.") {
            return Some(format!(
                "`{name}` destroys a filesystem or stops the machine"
            ));
        }
        let (flags, operands) = split_options(args);
        let has_short = |c: char| {
            flags
                .iter()
                .any(|f| !f.text.starts_with("--") && f.text.contains(c))
        };
        let has_long = |long: &str| flags.iter().any(|f| f.text == long);
        match name {
            "init" | "telinit" if texts.iter().any(|t| matches!(*t, "0" | "6")) => {
                Some(format!("`{name} {}` stops the machine", texts.join(" ")))
            }
            "systemctl" => texts
                .iter()
                .find(|t| SYSTEMCTL_WRECKERS.contains(t))
                .map(|verb| format!("`systemctl {verb}` stops or switches the machine")),
            "dd" => texts
                .iter()
                .filter_map(|t| t.strip_prefix("of="))
                .find(|t| {
                    t.starts_with("/dev/")
                        && !HARMLESS_DEVICES.contains(t)
                        && !t.starts_with("/dev/fd/")
                })
                .map(|t| format!("`dd` writes to the device '{t}'")),
            "rm" => {
                if has_long("--no-preserve-root") {
                    return Some("`rm --no-preserve-root` may delete '/'".into());
                }
                if !(has_short('r') || has_short('R') || has_long("--recursive")) {
                    return None;
                }
                operands.iter().find_map(|op| match self.place(op) {
                    Place::Inside => None,
                    Place::Root => Some(format!(
                        "`rm -r` of '{}' deletes the whole workspace",
                        op.text
                    )),
                    Place::Outside => Some(format!(
                        "`rm -r` of '{}' reaches outside the workspace",
                        op.text
                    )),
                    Place::Unknown => Some(format!(
                        "`rm -r` of '{}': where it leads is known only when it runs, and \
                         could be outside the workspace",
                        op.text
                    )),
                })
            }
            // The mode or owner operand is a relative word, which resolves
            // inside; a mode like `-w` is read as a flag.
            "chmod" | "chown" | "chgrp" if has_short('R') || has_long("--recursive") => operands
                .iter()
                .find(|op| matches!(self.place(op), Place::Outside | Place::Unknown))
                .map(|op| format!("`{name} -R` of '{}' reaches outside the workspace", op.text)),
            "find" if texts.contains(&"-delete") => {
                let here = Word {
                    text: ".".into(),
                    ..Word::default()
                };
                let mut starts: Vec<&Word> = args
                    .iter()
                    .skip_while(|w| matches!(w.text.as_str(), "-H" | "-L" | "-P"))
                    .take_while(|w| !w.text.starts_with(['-', '(', '!']))
                    .collect();
                if starts.is_empty() {
                    starts.push(&here);
                }
                starts
                    .into_iter()
                    .find(|op| matches!(self.place(op), Place::Outside | Place::Unknown))
                    .map(|op| format!("`find {} -delete` reaches outside the workspace", op.text))
            }
            _ => None,
        }
    }
}

/// Whether `program` publishes or detaches with some arguments, so an
/// argument the reader does not evaluate could make it do so.
fn could_publish(program: &str) -> bool {
    let name = basename(program);
    PUBLISH.iter().any(|(p, _)| *p == name)
        || DETACHERS.contains(&name)
        || matches!(name, "tmux" | "screen" | "crontab")
}

/// A simple command's words, for a message.
fn shown(command: &SimpleCommand) -> String {
    command
        .words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `path` with `.` dropped and `..` resolved, without touching the disk.
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

/// Whether `path` lies in a `.git` directory (or is one), at or below the
/// workspace root or anywhere outside it: git runs its hooks and reads its
/// config from there.
fn in_git_dir(path: &Path, root: &Path) -> bool {
    let below = path.strip_prefix(root).unwrap_or(path);
    below.components().any(|c| {
        c.as_os_str()
            .to_str()
            .is_some_and(|s| s.eq_ignore_ascii_case(".git"))
    })
}
