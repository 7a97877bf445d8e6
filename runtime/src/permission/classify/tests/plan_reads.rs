//! What Plan mode reads with (`sed -n 1,5p`, `base64`, `git stash list`,
//! `git config --get`, …) is read-only; each write form next to it is not.
//! The sed scripts are generated: every address form with every printing
//! command, and every writing command after every address.

use super::{RO, check};

const ADDRESSES: &[&str] = &[
    "", "1", "12", "$", "1,5", "1,$", "0,/re/", "/re/", "/re/,/x/", "/re/I", "1~2", "3,+2", "3,~4",
    "/^[a-z]/", "/[^0-9]/", "/a\\/b/",
];

#[test]
fn sed_that_only_prints_is_read_only_in_every_spelling() {
    let mut cases: Vec<String> = Vec::new();
    for address in ADDRESSES {
        for command in ["p", "!p", "=", "d", "q", "Q3"] {
            let script = format!("{address}{command}");
            cases.push(format!("sed -n '{script}' f"));
            cases.push(format!("sed -n -e '{script}' f g"));
            cases.push(format!("sed --quiet --expression='{script}' f"));
        }
    }
    cases.extend(
        [
            "sed -n 1,5p file",
            "sed -n '1,5p' file",
            "sed -n \"1,5p\" file",
            "sed -n '$p'",
            "sed -n '/re/p' f",
            "sed -n '1p;5p' f",
            "sed -n '1p\n5p' f",
            "sed 5q f",
            "sed -nE '/a|b/p' f",
            "sed -n -s -z 1p a b",
            "cat f | sed -n 2p",
        ]
        .map(String::from),
    );
    let cases: Vec<(&str, &str)> = cases.iter().map(|c| (c.as_str(), RO)).collect();
    check(&cases);
}

const SED_REFUSED: &str = "is not known to only print";

#[test]
fn sed_that_writes_runs_or_reads_a_file_is_not() {
    let mut cases: Vec<(String, &str)> = Vec::new();
    for address in ADDRESSES {
        for command in [
            "w f",
            "W f",
            "r f",
            "R f",
            "e touch f",
            "e",
            "s/a/b/w f",
            "s/a/b/e",
            "s/a/b/",
            "y/a/b/",
            "{p}",
            "a x",
            "i x",
            "c x",
            "z",
            "F",
            "v",
            "#n",
        ] {
            let script = format!("{address}{command}");
            cases.push((format!("sed -n '{script}' f"), SED_REFUSED));
            cases.push((format!("sed -n -e 1p -e '{script}' f"), SED_REFUSED));
            cases.push((format!("sed -n '1p;{script}' f"), SED_REFUSED));
        }
    }
    for (line, why) in [
        ("sed -i 1p f", "`sed -i`"),
        ("sed -ni 1p f", "`sed -ni`"),
        ("sed --in-place 1p f", "`sed --in-place`"),
        ("sed -n -f script f", "`sed -f`"),
        ("sed -n 1p -i f", "`sed -i`"),
        ("sed -e -i f", "`sed -i`"),
        ("sed -n '/[/]/w f' f", SED_REFUSED),
        ("sed -n '/[[:alpha:]/]/w f' f", SED_REFUSED),
        ("sed -n '/[]/]/w f' f", SED_REFUSED),
        ("sed -n '/\\c/w f/p' f", SED_REFUSED),
        ("sed -n '1p' *", "unquoted glob"),
        ("sed -n '1,' f", SED_REFUSED),
        ("sed -n", RO),
    ] {
        cases.push((line.to_string(), why));
    }
    let cases: Vec<(&str, &str)> = cases.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    check(&cases);
}

#[test]
fn small_read_only_programs_and_builtin() {
    check(&[
        ("base64 FILE", RO),
        ("base64 -d FILE", RO),
        ("base64 --decode -i -w 0 FILE", RO),
        ("echo aGk= | base64 -d", RO),
        ("base64 a b", "reads at most 1 operand"),
        ("base64 -o out FILE", "`base64 -o`"),
        ("numfmt 1000", RO),
        ("numfmt --to=iec 1048576", RO),
        ("numfmt --from=si --padding=5 1K 2M", RO),
        ("numfmt --output=x 1", "`numfmt --output=x`"),
        ("expr 1 + 2", RO),
        ("expr length abc", RO),
        ("expr 2 '*' 3", RO),
        ("expr $x + 1", "expands a variable"),
        ("builtin echo hi", RO),
        ("builtin printf '%s\\n' x", RO),
        ("builtin pwd", RO),
        ("builtin cd src && ls", RO),
        ("builtin", RO),
        (
            "builtin eval 'touch x'",
            "`builtin eval` is not a read-only builtin",
        ),
        (
            "builtin source x",
            "`builtin source` is not a read-only builtin",
        ),
        (
            "builtin exec ls",
            "`builtin exec` is not a read-only builtin",
        ),
        ("builtin . x", "`builtin .` is not a read-only builtin"),
        (
            "builtin printf -v PATH x",
            "assigns its output to a shell variable",
        ),
        ("builtin ls", "`builtin ls` is not a read-only builtin"),
    ]);
}

#[test]
fn git_verbs_that_list_and_show_are_read_only_and_the_rest_are_not() {
    const VERB: &str = "is not a verb known to only read";
    check(&[
        ("git stash list", RO),
        ("git stash list --oneline -5", RO),
        ("git stash show", RO),
        ("git stash show -p stash@{0}", RO),
        ("git stash show --stat 'stash@{1}'", RO),
        ("git stash", "with no verb changes the repository"),
        ("git stash push", VERB),
        ("git stash pop", VERB),
        ("git stash apply", VERB),
        ("git stash drop", VERB),
        ("git stash clear", VERB),
        ("git stash -m x", VERB),
        ("git stash list --output=x", "--output=x"),
        ("git worktree list", RO),
        ("git worktree list --porcelain", RO),
        ("git worktree add ../x", VERB),
        ("git worktree remove x", VERB),
        ("git worktree prune", VERB),
        ("git worktree list x", "reads at most 0 operand"),
        ("git notes", RO),
        ("git notes list", RO),
        ("git notes list HEAD", RO),
        ("git notes show HEAD", RO),
        ("git notes add -m x", VERB),
        ("git notes remove HEAD", VERB),
        ("git config --get user.name", RO),
        ("git config --get-all remote.origin.fetch", RO),
        ("git config --get-regexp 'user\\..*'", RO),
        ("git config --list", RO),
        ("git config -l", RO),
        ("git config --list --show-origin --show-scope", RO),
        ("git config --local --get user.email", RO),
        ("git config --type=bool --get core.bare", RO),
        ("git config user.name", RO),
        ("git config list", RO),
        ("git config get user.name", RO),
        ("git config x.y z", "sets or changes configuration"),
        ("git config user.name x", "sets or changes configuration"),
        ("git config --list x", "sets or changes configuration"),
        ("git config --get", "sets or changes configuration"),
        ("git config --set x.y z", "`git config --set`"),
        ("git config --add x.y z", "`git config --add`"),
        ("git config --unset x.y", "`git config --unset`"),
        ("git config --unset-all x.y", "`git config --unset-all`"),
        (
            "git config --replace-all x.y z",
            "`git config --replace-all`",
        ),
        (
            "git config --global --get user.name",
            "`git config --global`",
        ),
        ("git config --system -l", "`git config --system`"),
        ("git config --file x -l", "`git config --file`"),
        ("git config --edit", "`git config --edit`"),
        ("git config -e", "`git config -e`"),
        (
            "git config --rename-section a b",
            "`git config --rename-section`",
        ),
        ("git config --get x --list", "more than one action"),
        ("git config set x y", "sets or changes configuration"),
    ]);
}

#[test]
fn git_on_another_repository_is_not_read_only() {
    const OTHER: &str = "a repository other than the workspace's own";
    check(&[
        ("git -C vendor/lib status", OTHER),
        ("git -C . log", OTHER),
        ("git -Cvendor/lib status", "the git option '-Cvendor/lib'"),
        ("git --git-dir=vendor/lib status", OTHER),
        ("git --git-dir vendor/lib log", OTHER),
        ("git --work-tree=. status", OTHER),
        ("git --bare log", OTHER),
        ("GIT_DIR=vendor/lib git status", "the assignment GIT_DIR"),
        ("cd vendor/lib && git status", "`git` after `cd`"),
        ("cd vendor/lib; git log", "`git` after `cd`"),
        ("builtin cd vendor/lib && git status", "`git` after `cd`"),
        ("cd src && ls", RO),
        ("git status && cd src && ls", RO),
        ("git status", RO),
    ]);
}
