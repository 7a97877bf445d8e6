//! `git`: its global options, then a read-only subcommand with options
//! from its allow-list.
//!
//! Refused on every route: `-c` and `--config-env` (configuration can name
//! a program: `core.pager`, `core.fsmonitor`, `diff.external`, aliases),
//! `-C`, `--git-dir`, `--work-tree` and `--bare` (another repository's
//! configuration: a committed embedded git dir can name `core.fsmonitor`),
//! `--exec-path`, `-p`/`--paginate`, `--help` (opens a browser per
//! `help.format`), `--output`, `--ext-diff`, `--textconv`, `--filters`,
//! `--open-files-in-pager`, `--show-signature` and format placeholders that
//! verify signatures (they run gpg), every subcommand not listed (aliases
//! included), and `GIT_*` variables (assignments are refused before this).
//! The workspace's own repository's configuration is overridden where it
//! could run a program ([`forced_environment`], which the bash tool sets
//! for every read-only line), and a line that moves with `cd` before git
//! is refused by the classifier (git would discover whatever repository
//! holds the new directory). The subcommands with verbs of their own
//! (`stash`, `worktree`, `notes`, `config`) are read in `nested.rs`.
//!
//! git's own value parsing differs between options (`--stat=10` but not
//! `--stat 10`), so a value taken from the next word that starts with `-`
//! is also read as options, and options whose value git only takes after
//! `=` are listed as such.

mod nested;

use super::options::{Operands, Spec, check_operands};
use crate::permission::shell::Word;

/// Global options that take a value and change nothing git runs.
const GLOBAL_VALUE: &[&str] = &["--namespace"];

/// Global options that choose another repository: its configuration (a
/// committed embedded git dir's `core.fsmonitor`, say) is not the
/// workspace's.
const OTHER_REPOSITORY: &[&str] = &["-C", "--git-dir", "--work-tree", "--bare"];

/// Global options that change nothing.
const GLOBAL_FLAGS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--version",
];

/// Options of `diff` and of the diff output of `log` and `show`.
pub(super) const DIFF: &str = "patch no-patch unified[=] output-indicator-new= output-indicator-old= \
    output-indicator-context= raw patch-with-raw indent-heuristic no-indent-heuristic minimal \
    patience histogram anchored= diff-algorithm= stat[=] compact-summary numstat shortstat \
    dirstat[=] cumulative dirstat-by-file[=] summary patch-with-stat name-only name-status \
    submodule[=] color[=] no-color color-moved[=] no-color-moved word-diff[=] word-diff-regex= \
    color-words[=] no-renames check full-index binary abbrev[=] break-rewrites[=] find-renames[=] \
    find-copies[=] find-copies-harder irreversible-delete diff-filter= pickaxe-all pickaxe-regex \
    relative[=] no-relative text ignore-cr-at-eol ignore-space-at-eol ignore-space-change \
    ignore-all-space ignore-blank-lines ignore-matching-lines= inter-hunk-context= \
    function-context exit-code quiet no-ext-diff no-textconv ignore-submodules[=] src-prefix= \
    dst-prefix= no-prefix default-prefix stat-width= stat-name-width= stat-count=";

/// Revision walking and formatting options of `log`, `show`, `rev-list`
/// and `shortlog`.
const REVISIONS: &str = "max-count= skip= since= until= after= before= since-as-filter= author= committer= grep= \
    all-match invert-grep regexp-ignore-case extended-regexp fixed-strings perl-regexp \
    basic-regexp encoding= exclude= glob= decorate-refs= decorate-refs-exclude= date= all \
    branches[=] tags[=] remotes[=] min-parents== max-parents== merges no-merges first-parent \
    reverse topo-order date-order author-date-order oneline format== pretty[=] abbrev-commit \
    no-abbrev-commit graph decorate[=] no-decorate source children parents left-right boundary \
    cherry-pick cherry-mark cherry ancestry-path simplify-by-decoration full-history dense sparse \
    simplify-merges no-walk[=] do-walk follow walk-reflogs relative-date notes[=] no-notes \
    show-notes[=] expand-tabs[=] no-expand-tabs use-mailmap mailmap no-mailmap no-use-mailmap \
    ignore-missing count timestamp";

pub(super) const fn git(short: &'static str, long: &'static str) -> Spec {
    Spec {
        short,
        long,
        more_long: &[],
        numeric: false,
        operands: Operands::Any,
        permute: true,
        values_from_next_word: false,
        dash_values_are_options: true,
    }
}

/// `log`, `show`, `rev-list`: revisions, their format, their diffs. The
/// short options after `P` are the diff output's (`-U3`, `-M50%`, `-S'x'`).
pub(super) const LOG: Spec = Spec {
    more_long: &[DIFF],
    numeric: true,
    ..git("n:giEFPpusU::zRwbaWB::M::C::DO:S:G:I:", REVISIONS)
};

/// Options refused in every subcommand, named in the reason.
const REFUSED: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--filters",
    "--open-files-in-pager",
    "--show-signature",
    "--help",
];

/// The listing options of `branch` and `tag`: with one, operands are
/// patterns; without, they are names to create.
const LISTING: &[&str] = &["-l", "--list"];

/// A read-only subcommand and the options it accepts.
struct Subcommand {
    name: &'static str,
    spec: Spec,
}

const fn sub(name: &'static str, spec: Spec) -> Subcommand {
    Subcommand { name, spec }
}

static SUBCOMMANDS: &[Subcommand] = &[
    sub(
        "status",
        git(
            "sbu::zv",
            "short branch porcelain[=] long verbose untracked-files[=] ignored[=] \
                ignore-submodules[=] column[=] no-column ahead-behind no-ahead-behind renames \
                no-renames find-renames[=] show-stash null",
        ),
    ),
    sub(
        "diff",
        Spec {
            more_long: &[DIFF],
            ..git(
                "pusU::zRwbaWB::M::C::DO:S:G:I:",
                "cached staged merge-base no-index",
            )
        },
    ),
    sub("log", LOG),
    sub("show", LOG),
    sub("rev-list", LOG),
    sub(
        "shortlog",
        Spec {
            more_long: &[REVISIONS],
            numeric: true,
            ..git("nsecw::giEFP", "numbered summary email committer group=")
        },
    ),
    sub(
        "blame",
        git(
            "L:ewM::C::psltbcfnS:",
            "porcelain line-porcelain incremental root show-stats show-name show-number \
                show-email reverse first-parent date= abbrev[=] ignore-rev= ignore-revs-file= \
                contents= color-lines color-by-age minimal encoding= no-textconv",
        ),
    ),
    sub(
        "cat-file",
        git(
            "ptse",
            "batch[=] batch-check[=] batch-all-objects buffer unordered allow-unknown-type \
                follow-symlinks path= use-mailmap mailmap no-use-mailmap",
        ),
    ),
    sub(
        "describe",
        git(
            "",
            "tags all long abbrev[=] always dirty[=] broken[=] exact-match candidates= match= \
                exclude= first-parent contains",
        ),
    ),
    sub(
        "for-each-ref",
        git(
            "",
            "count= sort= format= points-at= merged= no-merged= contains= no-contains= shell \
                perl python tcl ignore-case omit-empty exclude=",
        ),
    ),
    sub(
        "ls-files",
        git(
            "cdmoisukztvfx:X:",
            "cached deleted modified others ignored stage unmerged killed directory \
                no-empty-directory eol exclude-standard exclude= exclude-from= \
                exclude-per-directory= full-name error-unmatch with-tree= abbrev[=] deduplicate \
                format=",
        ),
    ),
    sub(
        "ls-tree",
        git(
            "drtlz",
            "long name-only name-status object-only full-name full-tree abbrev[=] format=",
        ),
    ),
    sub(
        "merge-base",
        git("a", "all octopus independent is-ancestor fork-point"),
    ),
    sub(
        "rev-parse",
        git(
            "q",
            "show-toplevel show-prefix show-cdup git-dir absolute-git-dir git-common-dir \
                is-inside-work-tree is-inside-git-dir is-bare-repository is-shallow-repository \
                show-superproject-working-tree show-object-format[=] abbrev-ref[=] short[=] verify \
                quiet symbolic symbolic-full-name all branches[=] tags[=] remotes[=] git-path= \
                default= revs-only no-revs flags no-flags",
        ),
    ),
    // `-O` / `--open-files-in-pager` runs a program on the matches.
    sub(
        "grep",
        Spec {
            numeric: true,
            ..git(
                "nilLcwve:EFGPhHoqzf:A:B:C:m:rIWpa",
                "line-number ignore-case files-with-matches name-only files-without-match count \
                    word-regexp invert-match and or not extended-regexp fixed-strings basic-regexp \
                    perl-regexp no-filename only-matching quiet null after-context= \
                    before-context= context= max-count= max-depth= threads= cached untracked \
                    no-index full-name break heading show-function function-context column \
                    color[=] no-color text recursive no-recursive exclude-standard \
                    no-exclude-standard all-match",
            )
        },
    ),
    // Listing only: `-v` alone still creates (`git branch -v NAME`).
    sub(
        "branch",
        Spec {
            operands: Operands::OnlyWith(LISTING),
            ..git(
                "larvqi",
                "list all remotes verbose quiet show-current contains= no-contains= merged= \
                    no-merged= points-at= sort= format= color[=] no-color column[=] no-column \
                    ignore-case abbrev[=] no-abbrev omit-empty",
            )
        },
    ),
    sub(
        "tag",
        Spec {
            operands: Operands::OnlyWith(LISTING),
            ..git(
                "ln::i",
                "list contains= no-contains= merged= no-merged= points-at= sort= format= \
                    column[=] no-column ignore-case color[=] omit-empty",
            )
        },
    ),
    // Without operands `git remote` only lists (`-v` adds URLs); every
    // operand is a subcommand, and most of those change or fetch.
    sub(
        "remote",
        Spec {
            operands: Operands::AtMost(0),
            ..git("v", "verbose")
        },
    ),
];

/// Configuration set at git's command scope, which overrides every file a
/// repository can bring (its `.git/config`, what that includes): nothing
/// it names runs. `safe.bareRepository=explicit` keeps git from taking a
/// committed bare repository (`vendor/lib/{HEAD,config,objects,refs}`) for
/// the one it runs in. Not here: `diff.external`, textconv and filter
/// drivers, which no value at command scope turns off (an empty
/// `diff.external` breaks every `git diff`); a repository's own drivers
/// are the user's, and another repository's are refused with it.
const FORCED_CONFIG: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("safe.bareRepository", "explicit"),
    ("credential.helper", ""),
    ("gpg.program", "false"),
    ("protocol.allow", "never"),
];

/// The environment every read-only command line runs git with (the bash
/// tool adds it when `classify_command` proves the line read-only): the
/// [`FORCED_CONFIG`] at command scope (`GIT_CONFIG_COUNT`), no system
/// configuration, no pager, no replace objects, no
/// optional index writes (which would run `post-index-change`), no
/// prompts.
pub fn forced_environment() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_PAGER", "cat"),
        ("PAGER", "cat"),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_TERMINAL_PROMPT", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.push(("GIT_CONFIG_COUNT".into(), FORCED_CONFIG.len().to_string()));
    for (i, (key, value)) in FORCED_CONFIG.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), key.to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), value.to_string()));
    }
    env
}

/// Checks `git`'s arguments.
pub(super) fn check(args: &[Word]) -> Result<(), String> {
    let mut rest = args;
    while let Some((word, after)) = rest.split_first() {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            break;
        }
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        rest = after;
        if OTHER_REPOSITORY.contains(&name) {
            return Err(format!(
                "`git {name}` runs git on a repository other than the workspace's own, whose \
                 configuration can run programs"
            ));
        }
        if GLOBAL_VALUE.contains(&name) {
            if !text.contains('=') {
                rest = rest.get(1..).unwrap_or_default();
            }
        } else if name == "-c" || name == "--config-env" {
            return Err(format!(
                "`git {name}` can set configuration that runs a program (core.pager, \
                 core.fsmonitor, diff.external)"
            ));
        } else if !GLOBAL_FLAGS.contains(&text) {
            return Err(format!(
                "the git option '{text}' is not known to be read-only"
            ));
        }
    }
    let Some((sub, rest)) = rest.split_first() else {
        // Bare `git` prints its usage.
        return Ok(());
    };
    if let Some(checked) = nested::check(&sub.text, rest) {
        return checked;
    }
    let Some(subcommand) = SUBCOMMANDS.iter().find(|s| s.name == sub.text) else {
        return Err(format!(
            "`git {}` is not a known read-only git command",
            sub.text
        ));
    };
    let label = format!("git {}", sub.text);
    if let Some(word) = rest.iter().find(|w| refused(&subcommand.spec, &w.text)) {
        return Err(format!(
            "`{label} {}` writes, deletes or runs a program, or opens a pager or browser",
            word.text
        ));
    }
    let read = subcommand.spec.read(&label, rest)?;
    for (option, value) in &read.values {
        if matches!(option.as_str(), "--format" | "--pretty")
            && (value.contains("%G") || value.contains("%(signature"))
        {
            return Err(format!(
                "`{label} {option}={value}` verifies signatures, which runs gpg"
            ));
        }
    }
    check_operands(&label, &subcommand.spec.operands, &read)
}

/// Whether `word` names one of the [`REFUSED`] options, in any spelling git
/// accepts (`--output=x`, an abbreviation `--outp`), and is not itself a
/// listed option (`--text` is one, not `--textconv`): only to say why; an
/// unlisted option is refused anyway.
fn refused(spec: &Spec, word: &str) -> bool {
    let Some(long) = word.strip_prefix("--") else {
        return false;
    };
    let name = long.split_once('=').map_or(long, |(name, _)| name);
    name.len() >= 3
        && !spec.lists_long(name)
        && REFUSED
            .iter()
            .any(|r| r.strip_prefix("--").is_some_and(|r| r.starts_with(name)))
}
