//! The paths a shell command line names.
//!
//! Every simple command is read, those inside substitutions too, in the
//! order they occur. A relative word is taken relative to the directory the
//! command runs in: the workspace root, moved by `cd`/`pushd` with a plain
//! operand; after a `cd` whose operand is known only when it runs, words
//! are taken relative to the root (a guess, which errs towards catching).
//! Words whose value is computed when the line runs (`$X`, `$(…)`) are not
//! read, except `$HOME`/`${HOME}` and `~`, which name the user's home.
//!
//! Each word names the path it spells (an option, starting with `-`, does
//! not); a word with `=` also names what
//! follows the first `=` (`of=x`, `--file=x`), and a word with `:` what
//! follows the last `:` (`HEAD:.env`). A glob names its fixed leading
//! directory, with the pattern kept. Programs that walk whole trees name
//! their directories as [`Reach::Below`], with the current directory when
//! they default to it: recursive searches (`grep -r`, `rg`, `ag`, `ack`,
//! `find`, `git grep`, and `git diff|show|log -p|archive|stash` over the
//! whole repository unless paths follow `--`), recursive copies (`cp -r`,
//! `scp -r`, `rsync`: sources read, destination written), archivers
//! (`tar`, `zip -r`: read; unpacking with `tar x`, `unzip`, `cpio -i`,
//! `7z x`: the destination written).
//!
//! Behind a wrapper (`sudo`, `env`, `timeout`, `xargs`, …) every later word
//! is tried as the program. The command lines other shells run (`bash -c
//! '…'`, `sh -lc "…"`, `eval …`) are read the same way, four shells deep; deeper, and a line
//! that does not parse, is split loosely at blanks and operators, quotes
//! dropped, and every piece read as a word.

use std::path::{Path, PathBuf};

use super::{Access, Named, Reach, normalize};
use crate::permission::shell::{self, SimpleCommand, Word};

/// The paths `line` names, run in `root`.
pub(super) fn named(line: &str, root: &Path, home: Option<&Path>) -> Vec<Named> {
    let mut reader = Reader {
        root,
        home,
        cwd: Some(root.to_path_buf()),
        depth: 0,
        out: Vec::new(),
    };
    reader.line(line);
    reader.out
}

/// Programs that run the command in their arguments.
pub(crate) const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nohup", "command", "exec", "time", "nice", "ionice", "timeout",
    "setsid", "stdbuf", "xargs", "npx", "pnpx", "bunx",
];

/// Where a simple command's program may be: its first word, and after a
/// wrapper every later word, so a wrapper's options (`sudo -u x`, `env
/// X=1`, `timeout 5`) cannot hide what it runs.
pub(crate) fn program_starts(words: &[Word]) -> std::ops::Range<usize> {
    let wrapped = words
        .first()
        .is_some_and(|w| WRAPPERS.contains(&basename(&w.text)));
    0..if wrapped {
        words.len()
    } else {
        words.len().min(1)
    }
}

/// Shells whose `-c` argument is a command line.
pub(crate) const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh"];

/// How many shells deep (`bash -c "sh -c '…'"`) lines are read.
const MAX_DEPTH: usize = 4;

struct Reader<'a> {
    root: &'a Path,
    home: Option<&'a Path>,
    /// Where relative words lead; `None` once a `cd` went somewhere unknown.
    cwd: Option<PathBuf>,
    /// How many shells in the line being read runs.
    depth: usize,
    out: Vec<Named>,
}

impl Reader<'_> {
    fn line(&mut self, line: &str) {
        match shell::parse(line) {
            Ok(script) => {
                for command in script.all_commands() {
                    self.command(command);
                }
            }
            Err(_) => {
                for piece in loose_pieces(line) {
                    self.text(&piece, Reach::Itself, Access::Any);
                }
            }
        }
    }

    /// A command line another shell runs (`bash -c '…'`, `eval …`), read
    /// in the directory it starts in.
    fn nested(&mut self, line: &str) {
        if self.depth >= MAX_DEPTH {
            for piece in loose_pieces(line) {
                self.text(&piece, Reach::Itself, Access::Any);
            }
            return;
        }
        let cwd = self.cwd.clone();
        self.depth += 1;
        self.line(line);
        self.depth -= 1;
        self.cwd = cwd;
    }

    fn command(&mut self, command: &SimpleCommand) {
        let plain = command
            .words
            .iter()
            .chain(command.redirects.iter().map(|r| &r.target))
            .chain(command.assignments.iter().map(|(_, w)| w));
        for word in plain {
            self.word(word, Reach::Itself, Access::Any);
            // Each word brace expansion makes (`{.git,x}/hooks`), which a
            // glob of the raw text would not show.
            for field in word.fields.iter().flatten() {
                let field = Word {
                    text: field.clone(),
                    fields: None,
                    ..word.clone()
                };
                self.word(&field, Reach::Itself, Access::Any);
            }
        }
        for start in program_starts(&command.words) {
            let (program, args) = (&command.words[start], &command.words[start + 1..]);
            let name = basename(&program.text);
            for (operand, access) in trees(name, args) {
                match operand {
                    Operand::Word(word) => self.word(word, Reach::Below, access),
                    Operand::Text(text) => self.text(&text, Reach::Below, access),
                    Operand::Here => self.here(access),
                }
            }
            if SHELLS.contains(&name)
                && let Some(at) = args.iter().position(|w| is_command_flag(&w.text))
                && let Some(line) = args.get(at + 1)
            {
                self.nested(&line.text);
            }
            if name == "eval" {
                let line: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
                self.nested(&line.join(" "));
            }
        }
        if let Some((program, args)) = command.words.split_first() {
            let name = basename(&program.text);
            if matches!(name, "cd" | "pushd" | "popd") {
                self.cwd = self.cd(name, args);
            }
        }
    }

    /// Where `cd` leads: `None` when that is known only when it runs.
    fn cd(&self, name: &str, args: &[Word]) -> Option<PathBuf> {
        if name == "popd" {
            return None;
        }
        let target = args.iter().find(|w| !w.text.starts_with('-'))?;
        if target.expands || !target.substitutions.is_empty() || target.globs {
            return None;
        }
        self.absolute(&target.text).map(|raw| normalize(&raw))
    }

    /// A word, its value after `=` and after `:`; a glob word names what it
    /// may expand to.
    fn word(&mut self, word: &Word, reach: Reach, access: Access) {
        if !word.substitutions.is_empty() {
            return;
        }
        let reach = if word.globs {
            Reach::Glob(String::new())
        } else {
            reach
        };
        let text = match expand_home(word, self.home) {
            Some(text) => text,
            None if word.expands => return,
            None => word.text.clone(),
        };
        // An option is not a path, but its value may be (`--file=x`).
        if !text.starts_with('-') {
            self.text(&text, reach.clone(), access);
        }
        if let Some((_, value)) = text.split_once('=') {
            self.text(value, reach.clone(), access);
        }
        if let Some((_, value)) = text.rsplit_once(':') {
            self.text(value, reach, access);
        }
    }

    /// The current directory, as a tree.
    fn here(&mut self, access: Access) {
        let dir = self.cwd.clone().unwrap_or_else(|| self.root.to_path_buf());
        self.push(String::new(), dir, Reach::Below, access);
    }

    fn text(&mut self, text: &str, reach: Reach, access: Access) {
        if text.is_empty() {
            return;
        }
        let Some(raw) = self.absolute(text) else {
            return;
        };
        match reach {
            Reach::Glob(_) => {
                let pattern = normalize(&raw).to_string_lossy().into_owned();
                let fixed: PathBuf = raw
                    .components()
                    .take_while(|c| !c.as_os_str().to_string_lossy().contains(GLOB_CHARS))
                    .collect();
                self.push(text.into(), fixed, Reach::Glob(pattern), access);
            }
            Reach::Itself | Reach::Below => self.push(text.into(), raw, reach, access),
        }
    }

    fn push(&mut self, text: String, raw: PathBuf, reach: Reach, access: Access) {
        let named = Named {
            text,
            lexical: normalize(&raw),
            raw,
            reach,
            access,
        };
        if !self.out.contains(&named) {
            self.out.push(named);
        }
    }

    /// `text` made absolute: `~` is the home (skipped when unknown), and a
    /// relative word is relative to the current directory, or to the root
    /// when that is unknown.
    fn absolute(&self, text: &str) -> Option<PathBuf> {
        if text == "~" || text.starts_with("~/") {
            let home = self.home?;
            return Some(home.join(text.trim_start_matches('~').trim_start_matches('/')));
        }
        if let Some(rest) = text.strip_prefix("~+")
            && (rest.is_empty() || rest.starts_with('/'))
        {
            // `~+` is the directory the command runs in.
            let base = self.cwd.as_deref().unwrap_or(self.root);
            return Some(base.join(rest.trim_start_matches('/')));
        }
        if text.starts_with('~') {
            // Another user's home, or `~-`, the previous directory.
            return None;
        }
        let base = self.cwd.as_deref().unwrap_or(self.root);
        Some(base.join(text))
    }
}

/// The characters that make a path component a glob.
const GLOB_CHARS: &[char] = &['*', '?', '[', '{'];

/// `$HOME/…` and `${HOME}/…` with the home put in, when it is known and
/// nothing else in the word expands.
fn expand_home(word: &Word, home: Option<&Path>) -> Option<String> {
    if !word.expands {
        return None;
    }
    let rest = ["$HOME", "${HOME}"]
        .iter()
        .find_map(|v| word.text.strip_prefix(v))?;
    if !(rest.is_empty() || rest.starts_with('/')) || rest.contains('$') {
        return None;
    }
    Some(format!("{}{rest}", home?.display()))
}

/// An operand of a tree-walking program.
enum Operand<'w> {
    Word(&'w Word),
    /// An option's value (`-C dir`, `--target-directory=dir`).
    Text(String),
    /// The directory it runs in, which it walks when given no operand.
    Here,
}

type Trees<'w> = Vec<(Operand<'w>, Access)>;

/// The directories a program walks, and how it uses them.
fn trees<'w>(name: &str, args: &'w [Word]) -> Trees<'w> {
    let operands = operands(args);
    let walked = |access: Access| move |w: &&'w Word| (Operand::Word(w), access);
    let mut out: Trees<'w> = Vec::new();
    match name {
        "rg" | "ag" | "ack" | "ack-grep" => searches(&operands, &mut out),
        "grep" | "egrep" | "fgrep"
            if flag(args, "rR", &["--recursive", "--dereference-recursive"])
                || option_value(args, "-d", "--directories").as_deref() == Some("recurse") =>
        {
            searches(&operands, &mut out)
        }
        "find" => {
            let writes = args.iter().any(|w| FIND_ACTIONS.contains(&w.text.as_str()));
            let access = if writes { Access::Any } else { Access::Read };
            let starts: Vec<&Word> = args
                .iter()
                .skip_while(|w| matches!(w.text.as_str(), "-H" | "-L" | "-P"))
                .take_while(|w| !w.text.starts_with(['-', '(', '!']))
                .collect();
            if starts.is_empty() {
                out.push((Operand::Here, access));
            }
            out.extend(starts.iter().map(walked(access)));
        }
        "cp" | "scp" if flag(args, "rRa", &["--recursive", "--archive"]) => {
            copies(args, &operands, &mut out)
        }
        "rsync" => copies(args, &operands, &mut out),
        "zip" if flag(args, "r", &["--recurse-paths"]) => {
            out.extend(operands.iter().map(walked(Access::Read)))
        }
        "tar" | "bsdtar" | "gtar" => {
            let first = args.first().map(|w| w.text.as_str()).unwrap_or_default();
            let bundled = !first.starts_with('-') && first.contains('x');
            if bundled || flag(args, "x", &["--extract", "--get"]) {
                unpacks(option_value(args, "-C", "--directory"), &mut out);
            } else {
                out.extend(operands.iter().map(walked(Access::Read)));
            }
        }
        "unzip" => unpacks(option_value(args, "-d", "-d"), &mut out),
        "cpio" if flag(args, "i", &["--extract"]) => unpacks(None, &mut out),
        "7z" | "7za" | "7zr"
            if operands
                .first()
                .is_some_and(|w| matches!(w.text.as_str(), "x" | "e")) =>
        {
            let dir = args.iter().find_map(|w| w.text.strip_prefix("-o"));
            unpacks(dir.map(str::to_string), &mut out);
        }
        "git" => git(args, &mut out),
        _ => {}
    }
    out
}

/// `find` actions that change files or run commands on what it finds.
const FIND_ACTIONS: &[&str] = &[
    "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// A search's operands: the pattern (or the value of `-e`, `-f`, which
/// comes first too), then the trees; the current directory when no tree
/// is given.
fn searches<'w>(operands: &[&'w Word], out: &mut Trees<'w>) {
    match operands.split_first() {
        Some((_, trees)) if !trees.is_empty() => {
            out.extend(trees.iter().map(|w| (Operand::Word(w), Access::Read)))
        }
        _ => out.push((Operand::Here, Access::Read)),
    }
}

/// A recursive copy: the sources are read, the destination (the last
/// operand, or `-t DIR`, `--target-directory=DIR`) written.
fn copies<'w>(args: &'w [Word], operands: &[&'w Word], out: &mut Trees<'w>) {
    let target = option_value(args, "-t", "--target-directory");
    let sources = match (&target, operands.split_last()) {
        (Some(_), _) | (None, None) => operands,
        (None, Some((last, rest))) => {
            out.push((Operand::Word(last), Access::Write));
            rest
        }
    };
    out.extend(sources.iter().map(|w| (Operand::Word(w), Access::Read)));
    if let Some(dir) = target {
        out.push((Operand::Text(dir), Access::Write));
    }
}

/// An unpacker writes into `dir`, or the directory it runs in.
fn unpacks(dir: Option<String>, out: &mut Trees<'_>) {
    out.push((dir.map_or(Operand::Here, Operand::Text), Access::Write));
}

/// `git` subcommands that show file contents from the whole repository
/// unless paths are named after `--`.
fn git<'w>(args: &'w [Word], out: &mut Trees<'w>) {
    let Some(at) = git_subcommand(args) else {
        return;
    };
    let rest = &args[at + 1..];
    let shows = match args[at].text.as_str() {
        "grep" | "diff" | "show" | "archive" | "stash" | "format-patch" | "whatchanged" => true,
        "log" => flag(rest, "pu", &["--patch", "--full-diff"]),
        _ => false,
    };
    if !shows {
        return;
    }
    match rest.iter().position(|w| w.text == "--") {
        Some(dash) if dash + 1 < rest.len() => out.extend(
            rest[dash + 1..]
                .iter()
                .map(|w| (Operand::Word(w), Access::Read)),
        ),
        _ => out.push((Operand::Here, Access::Read)),
    }
}

/// Where git's subcommand is, past its global options.
pub(crate) fn git_subcommand(args: &[Word]) -> Option<usize> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            return Some(i);
        }
        let takes_value = matches!(
            text,
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        );
        i += if takes_value { 2 } else { 1 };
    }
    None
}

/// Words that are not options; every word after `--`.
fn operands(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut done = false;
    for word in args {
        if done || word.text == "-" || !word.text.starts_with('-') {
            out.push(word);
        } else if word.text == "--" {
            done = true;
        }
    }
    out
}

/// Whether an option is given: a short one in a cluster (`-rn`), or a
/// long one, alone or with `=value`.
pub(crate) fn flag(args: &[Word], shorts: &str, longs: &[&str]) -> bool {
    args.iter().take_while(|w| w.text != "--").any(|w| {
        let text = w.text.as_str();
        match text.strip_prefix("--") {
            Some(_) => longs
                .iter()
                .any(|l| text == *l || text.strip_prefix(l).is_some_and(|r| r.starts_with('='))),
            None => text.strip_prefix('-').is_some_and(|cluster| {
                cluster.chars().all(|c| c.is_ascii_alphanumeric())
                    && cluster.chars().any(|c| shorts.contains(c))
            }),
        }
    })
}

/// The value of `-x VALUE`, `-xVALUE`, `--long VALUE` or `--long=VALUE`.
fn option_value(args: &[Word], short: &str, long: &str) -> Option<String> {
    args.iter().enumerate().find_map(|(i, w)| {
        let text = w.text.as_str();
        if text == short || text == long {
            return args.get(i + 1).map(|v| v.text.clone());
        }
        if let Some(value) = text.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(value.to_string());
        }
        text.strip_prefix(short)
            .filter(|v| !v.is_empty() && short.len() == 2)
            .map(str::to_string)
    })
}

/// `-c`, or a cluster of short options with `c` in it (`-lc`, `-ec`).
pub(crate) fn is_command_flag(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|flags| {
        !flags.starts_with('-')
            && flags.contains('c')
            && flags.chars().all(|c| c.is_ascii_alphabetic())
    })
}

pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The pieces of a line that did not parse: split at blanks and shell
/// operators, quotes and backslashes dropped.
pub(crate) fn loose_pieces(line: &str) -> Vec<String> {
    line.split(|c: char| c.is_whitespace() || ";|&()<>`".contains(c))
        .map(|t| t.replace(['\'', '"', '\\'], ""))
        .filter(|t| !t.is_empty())
        .collect()
}
