//! Recognising commands by their words: publish-like and detaching
//! commands, the commands wrappers run, and the rough words of a line that
//! did not parse.

use super::table::{DETACHERS, PUBLISH, Shape, TMUX_DETACHED, UNPARSED_MARKERS, WRAPPERS, Wraps};
use crate::permission::shell::Word;

/// Flags before `--`, and operands (everything else, all words after `--`).
pub(super) fn split_options(args: &[Word]) -> (Vec<&Word>, Vec<&Word>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut done = false;
    for word in args {
        if done || word.text == "-" || !word.text.starts_with('-') {
            operands.push(word);
        } else if word.text == "--" {
            done = true;
        } else {
            flags.push(word);
        }
    }
    (flags, operands)
}

/// A publish-like command, by the shapes in [`PUBLISH`].
pub(super) fn publish(name: &str, args: &[&str]) -> Option<String> {
    // `git -c alias.p=push p` pushes through an alias defined on the spot.
    if name == "git"
        && let Some(alias) = args
            .iter()
            .find(|a| a.contains("alias.") && marker(a).is_some())
    {
        return Some(format!("`git -c {alias}` defines an alias that publishes"));
    }
    PUBLISH
        .iter()
        .filter(|(program, _)| *program == name)
        .find_map(|(_, shape)| match shape {
            Shape::Leading(path) => leads_with(args, path).then(|| {
                format!(
                    "`{name} {}` publishes outside the workspace",
                    path.join(" ")
                )
            }),
            Shape::AnyOperand(prefixes) => args
                .iter()
                .find(|a| !a.starts_with('-') && prefixes.iter().any(|p| a.starts_with(p)))
                .map(|goal| format!("`{name} {goal}` publishes outside the workspace")),
        })
}

/// Whether `path` leads `args`' operands, options allowed before and
/// between them. An option's value is not parsed: each option is tried both
/// with and without taking the next word, so `git -C dir push` and `git
/// --no-pager push` both match, while `git commit -m push` does not.
fn leads_with(args: &[&str], path: &[&str]) -> bool {
    let mut starts = vec![0];
    for want in path {
        let mut next = Vec::new();
        let mut seen = vec![false; args.len() + 2];
        while let Some(i) = starts.pop() {
            let Some(arg) = args.get(i) else { continue };
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            if arg.starts_with('-') && *arg != "-" {
                starts.push(i + 1);
                if !arg.contains('=') {
                    starts.push(i + 2);
                }
            } else if arg == want {
                next.push(i + 1);
            }
        }
        if next.is_empty() {
            return false;
        }
        starts = next;
    }
    true
}

/// Programs and commands that keep work running after the call.
pub(super) fn detach(name: &str, args: &[&str]) -> Option<String> {
    if DETACHERS.contains(&name) {
        return Some(format!("`{name}` keeps work running after the call ends"));
    }
    let short_with = |arg: &&str, c: char| {
        arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(c)
    };
    match name {
        "crontab" if args != ["-l"] => {
            Some("`crontab` schedules work that runs after the call ends".into())
        }
        "screen"
            if args
                .iter()
                .any(|a| short_with(a, 'd') || short_with(a, 'D')) =>
        {
            Some("`screen -d` starts a detached session that outlives the call".into())
        }
        "tmux" => {
            // Only the first `new` needs looking after: a `-d` after a later
            // one is after the first too.
            let new = args
                .iter()
                .position(|a| matches!(*a, "new" | "new-session"));
            args.iter().enumerate().find_map(|(i, a)| {
                if TMUX_DETACHED.contains(a) {
                    Some(format!(
                        "`tmux {a}` runs work in a tmux server that outlives the call"
                    ))
                } else if Some(i) == new && args[i + 1..].iter().any(|b| short_with(b, 'd')) {
                    Some(format!(
                        "`tmux {a} -d` starts a detached session that outlives the call"
                    ))
                } else {
                    None
                }
            })
        }
        _ => None,
    }
}

/// The indices where a command starts in `words`: the program, and the
/// commands its wrappers run. One pass: once a start is a wrapper of
/// [`Wraps::AnyLaterWord`], every later word that is not an option starts
/// one too.
pub(super) fn command_starts(words: &[Word]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut any_later = false;
    let mut after: Vec<&'static [&'static str]> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let text = word.text.as_str();
        let start = i == 0
            || (any_later && !text.starts_with('-'))
            || after
                .iter()
                .any(|flags| flags.contains(&words[i - 1].text.as_str()));
        if !start {
            continue;
        }
        starts.push(i);
        match WRAPPERS.iter().find(|(w, _)| *w == basename(text)) {
            Some((_, Wraps::AnyLaterWord)) => any_later = true,
            Some((_, Wraps::After(flags))) if !after.iter().any(|f| std::ptr::eq(*f, *flags)) => {
                after.push(flags);
            }
            Some((_, Wraps::After(_))) | None => {}
        }
    }
    starts
}

/// `-c`, or a cluster of short options holding `c` (`-lc`, `-ec`).
pub(super) fn is_c_cluster(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|flags| {
        !flags.starts_with('-')
            && flags.contains('c')
            && flags.chars().all(|c| c.is_ascii_alphabetic())
    })
}

/// The first [`UNPARSED_MARKERS`] word in `text`, compared as whole words.
pub(super) fn marker(text: &str) -> Option<&'static str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|token| token.trim_start_matches('-'))
        .find_map(|token| UNPARSED_MARKERS.iter().find(|m| **m == token).copied())
}

/// Whether `text` has an `&` that is not part of `&&`, `>&`, `<&`, `&>` or `|&`.
pub(super) fn background_amp(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len()).any(|i| {
        chars[i] == '&'
            && !(i > 0 && matches!(chars[i - 1], '&' | '>' | '<' | '|'))
            && !matches!(chars.get(i + 1), Some('&' | '>'))
    })
}

/// The words of a line that did not parse, split into rough simple
/// commands at operators and grouping, quotes dropped, leading keywords
/// skipped.
pub(super) fn loose_segments(text: &str) -> Vec<Vec<Word>> {
    const KEYWORDS: &[&str] = &[
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
        "in", "function", "select", "!", "time", "coproc",
    ];
    text.split(|c: char| ";&|(){}`\n".contains(c))
        .map(|segment| {
            segment
                .replace(['\'', '"', '\\'], "")
                .split_whitespace()
                .skip_while(|w| KEYWORDS.contains(w))
                .map(|w| Word {
                    text: w.to_string(),
                    expands: w.contains('$'),
                    globs: w.contains(['*', '?', '[']),
                    ..Word::default()
                })
                .collect::<Vec<_>>()
        })
        .filter(|words| !words.is_empty())
        .collect()
}

/// The last path component of a program (`/usr/bin/git` is `git`).
pub(super) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}
