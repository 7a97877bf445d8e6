//! Lines for the programs read by their own grammars: `sed` scripts, `expr`,
//! `builtin`, and git's subcommands with verbs (`stash`, `worktree`,
//! `notes`, `config`), each with its writing forms as often as its reading
//! ones.

use super::{Rng, operands, shape, shaped};

/// Scripts that only print, and scripts that write, run or read a file.
const SED_SCRIPTS: &[&str] = &[
    "1,5p",
    "1p",
    "$p",
    "2,$p",
    "/a/p",
    "/a/,/b/p",
    "0,/a/p",
    "1~2p",
    "3,+2p",
    "/^[a-z]/p",
    "/x/Ip",
    "5q",
    "q1",
    "1!p",
    "p;p",
    "=",
    "1d",
    "w F",
    "1w F",
    "/a/w F",
    "s/a/b/w F",
    "s/a/b/e",
    "e touch F",
    "1e touch F",
    "r F",
    "R F",
    "W F",
    "1{w F\n}",
    "/[/]/w F",
    "/[[:alpha:]/]/w F",
    "p;w F",
    "y/a/b/",
    "s/a/b/",
];

const SED_OPTIONS: &[&str] = &[
    "-n",
    "-n",
    "--quiet",
    "-E",
    "-s",
    "-z",
    "-i",
    "--in-place",
    "-ni",
    "-f",
    "--debug",
];

pub(super) fn sed(rng: &mut Rng, words: &mut Vec<String>) {
    for _ in 0..rng.below(3) {
        words.push(shaped(rng, SED_OPTIONS));
    }
    if rng.chance(25) {
        words.push(shape(rng, "-e"));
    }
    words.push(shaped(rng, SED_SCRIPTS));
    operands(rng, words);
}

pub(super) fn expr(rng: &mut Rng, words: &mut Vec<String>) {
    for _ in 0..=rng.below(4) {
        words.push(shaped(
            rng,
            &["1", "+", "2", "\\*", "-", "x", ":", "a.*", "length", "3"],
        ));
    }
}

pub(super) fn builtin(rng: &mut Rng, words: &mut Vec<String>) {
    let (name, rest) = *rng.pick(&[
        ("echo", "x"),
        ("printf", "%s"),
        ("pwd", ""),
        ("true", ""),
        ("type", "ls"),
        ("cd", "sub"),
        ("eval", "touch F"),
        ("source", "/dev/null"),
        ("exec", "touch F"),
        (".", "/dev/null"),
        ("read", "x"),
    ]);
    words.push(shape(rng, name));
    words.extend(
        rest.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| shape(rng, w)),
    );
}

/// `git SUB VERB …` for the subcommands with verbs.
pub(super) fn git_verbs(rng: &mut Rng, words: &mut Vec<String>) {
    let verb = rng.one(&[
        "stash list",
        "stash list --oneline",
        "stash show",
        "stash show -p",
        "stash",
        "stash push",
        "stash pop",
        "stash apply",
        "stash drop",
        "stash clear",
        "worktree list",
        "worktree list --porcelain",
        "worktree add D",
        "worktree remove D",
        "worktree prune",
        "notes",
        "notes list",
        "notes show",
        "notes add -m x",
        "config --get user.name",
        "config --get-all user.name",
        "config --get-regexp user",
        "config --list",
        "config -l",
        "config --list --show-origin",
        "config list",
        "config get user.name",
        "config user.name",
        "config x.y z",
        "config --add x.y z",
        "config --unset x.y",
        "config --set x.y z",
        "config --global --get user.name",
        "config --edit",
        "config --get x.y --add",
        "config --list x.y",
    ]);
    words.extend(verb.split(' ').map(|w| shape(rng, w)));
}
