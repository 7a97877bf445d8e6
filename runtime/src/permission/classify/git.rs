//! `git`: its global options, then a read-only subcommand with options
//! from its allow-list.
//!
//! Refused on every route: `-c` and `--config-env` (configuration can name
//! a program: `core.pager`, `core.fsmonitor`, `diff.external`, aliases),
//! `--exec-path`, `-p`/`--paginate`, `--help` (opens a browser per
//! `help.format`), `--output`, `--ext-diff`, `--textconv`, `--filters`,
//! `--open-files-in-pager`, `--show-signature` and format placeholders that
//! verify signatures (they run gpg), every subcommand not listed (aliases
//! included), and `GIT_*` variables (assignments are refused before this).
//! Like every git command, these trust the configuration of the repository
//! they find, as a person typing them does.
//!
//! git's own value parsing differs between options (`--stat=10` but not
//! `--stat 10`), so a value taken from the next word that starts with `-`
//! is also read as options, and options whose value git only takes after
//! `=` are listed as such.

use super::options::{Operands, Spec, check_operands};
use crate::permission::shell::Word;

/// Global options that take a value: they only choose the repository or
/// directory.
const GLOBAL_VALUE: &[&str] = &["-C", "--git-dir", "--work-tree", "--namespace"];

/// Global options that change nothing.
const GLOBAL_FLAGS: &[&str] = &[
    "--no-pager",
    "-P",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--version",
];

/// Options of `diff` and of the diff output of `log` and `show`.
const DIFF: &str = "patch no-patch unified[=] output-indicator-new= output-indicator-old= \
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

const fn git(short: &'static str, long: &'static str) -> Spec {
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
const LOG: Spec = Spec {
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
