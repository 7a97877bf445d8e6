//! Commands that write git's configuration or hooks without naming them.

use crate::permission::call::words::{
    SHELLS, basename, flag, git_subcommand, is_command_flag, loose_pieces, program_starts,
};
use crate::permission::shell::{self, Word};

/// `git config` options that change the configuration.
const CONFIG_WRITE_OPTIONS: &[&str] = &[
    "--unset",
    "--unset-all",
    "--add",
    "--replace-all",
    "--rename-section",
    "--remove-section",
    "-e",
    "--edit",
];

/// `git config` options that only read it.
const CONFIG_READ_OPTIONS: &[&str] = &[
    "--get",
    "--get-all",
    "--get-regexp",
    "--get-urlmatch",
    "--get-color",
    "--get-colorbool",
    "-l",
    "--list",
];

/// `git config` options whose value is the next word.
const CONFIG_VALUE_OPTIONS: &[&str] = &[
    "-f",
    "--file",
    "--blob",
    "-t",
    "--type",
    "--default",
    "--comment",
    "--value",
];

/// Subcommands (of `git remote`, `git submodule`, …) that write the config
/// or install hooks.
const WRITING_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "remote",
        &[
            "add",
            "rename",
            "rm",
            "remove",
            "set-head",
            "set-branches",
            "set-url",
        ],
    ),
    (
        "submodule",
        &[
            "add",
            "init",
            "deinit",
            "update",
            "sync",
            "set-branch",
            "set-url",
            "absorbgitdirs",
        ],
    ),
    ("lfs", &["install", "uninstall", "update"]),
];

/// What in `line` writes git's configuration or hooks, if anything,
/// looking into the lines other shells run (`bash -c '…'`, `eval …`).
pub(super) fn config_writer(line: &str) -> Option<String> {
    config_writer_at(line, 0)
}

fn config_writer_at(line: &str, depth: usize) -> Option<String> {
    match shell::parse(line) {
        Ok(script) => script.all_commands().iter().find_map(|command| {
            writer(&command.words, false).or_else(|| nested(&command.words, depth))
        }),
        Err(_) => {
            let words: Vec<Word> = loose_pieces(line)
                .into_iter()
                .map(|text| Word {
                    text,
                    ..Word::default()
                })
                .collect();
            writer(&words, true)
        }
    }
}

/// The line a shell (`sh -c '…'`) or `eval` runs, behind any wrapper,
/// searched in turn.
fn nested(words: &[Word], depth: usize) -> Option<String> {
    if depth >= 4 {
        return None;
    }
    program_starts(words).find_map(|at| {
        let (program, args) = words[at..].split_first()?;
        let name = basename(&program.text);
        let line = if SHELLS.contains(&name) {
            let flag = args.iter().position(|w| is_command_flag(&w.text))?;
            args.get(flag + 1)?.text.clone()
        } else if name == "eval" {
            args.iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            return None;
        };
        config_writer_at(&line, depth + 1)
    })
}

/// The command itself, behind any wrapper (see `program_starts`). With
/// `every` (the loose words of a line that did not parse), every word is
/// tried as the program.
fn writer(words: &[Word], every: bool) -> Option<String> {
    let starts = if every {
        0..words.len()
    } else {
        program_starts(words)
    };
    starts.into_iter().find_map(|at| {
        let (program, args) = words[at..].split_first()?;
        let name = basename(&program.text);
        let shown = || {
            words[at..]
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let writes = match name {
            "git" => git_writes(args),
            "git-lfs" => subcommand_writes("lfs", args),
            "pre-commit" => args.first().is_some_and(|w| {
                matches!(
                    w.text.as_str(),
                    "install" | "install-hooks" | "uninstall" | "init-templatedir"
                )
            }),
            "husky" => true,
            _ => false,
        };
        writes.then(|| format!("`{}` writes git's configuration or hooks", shown()))
    })
}

fn git_writes(args: &[Word]) -> bool {
    let Some(at) = git_subcommand(args) else {
        return false;
    };
    let rest = &args[at + 1..];
    match args[at].text.as_str() {
        "config" => config_writes(rest),
        "init" | "clone" => rest.iter().any(|w| {
            let text = w.text.as_str();
            text.starts_with("--template")
                || text.starts_with("--config")
                || text.starts_with("--separate-git-dir")
                || text == "-c"
        }),
        other => subcommand_writes(other, rest),
    }
}

fn subcommand_writes(subcommand: &str, rest: &[Word]) -> bool {
    let Some((_, writing)) = WRITING_SUBCOMMANDS.iter().find(|(s, _)| *s == subcommand) else {
        return false;
    };
    rest.iter()
        .find(|w| !w.text.starts_with('-'))
        .is_some_and(|w| writing.contains(&w.text.as_str()))
}

/// Whether a `git config` call writes: a writing option or subcommand, or
/// a key and a value; reads are `--get…`, `--list`, `get`, `list`, or a key
/// alone.
fn config_writes(rest: &[Word]) -> bool {
    if rest
        .iter()
        .any(|w| CONFIG_WRITE_OPTIONS.contains(&w.text.as_str()))
    {
        return true;
    }
    let mut operands = Vec::new();
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        let text = word.text.as_str();
        if CONFIG_VALUE_OPTIONS.contains(&text) {
            i += 2;
            continue;
        }
        if !text.starts_with('-') {
            operands.push(text);
        }
        i += 1;
    }
    match operands.first() {
        Some(&("set" | "unset" | "rename-section" | "remove-section" | "edit")) => true,
        Some(&("get" | "list")) => false,
        _ if flag(rest, "l", CONFIG_READ_OPTIONS) => false,
        _ => operands.len() >= 2,
    }
}
