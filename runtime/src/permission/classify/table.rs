//! The programs `bash` may run read-only, and how each may be called.
//!
//! A program absent from [`PROGRAMS`] is not read-only. Each entry says
//! which flags or operands would make a call write, delete or run another
//! program; everything it does not name only reads. `sed`, `awk`, `xargs`,
//! `tee`, shells, interpreters, build tools and package managers are absent
//! on purpose: each can write or run anything.

/// How a known read-only program may be called.
pub(super) enum Rule {
    /// Every flag and operand only reads, so globs are fine too: whatever
    /// file names they expand to, no flag they could become writes.
    AnyArgs,
    /// Only with no arguments at all (`env` prints; `env X cmd` runs `cmd`).
    Bare,
    /// Some flags write or run programs, or some operands are outputs.
    Limited(Limits),
    /// `git`: read-only global options ([`GIT_GLOBAL_VALUE`],
    /// [`GIT_GLOBAL_FLAGS`]), then a subcommand from [`GIT_SUBCOMMANDS`].
    Git,
}

/// What a [`Rule::Limited`] program (or a git subcommand) refuses.
pub(super) struct Limits {
    /// How the program reads its flags.
    pub style: Style,
    /// Flags that write, delete or run another program. With
    /// [`Style::Getopt`] a long flag is also refused when abbreviated
    /// (`--out=x` for `--output`), since getopt_long and git accept any
    /// unambiguous prefix, and a short flag anywhere in a cluster (`-nofile`
    /// is `-n -o file`).
    pub forbidden: &'static [&'static str],
    /// Flags whose value follows as the next word, or attached (`-k2`,
    /// `--key=2`): the value is not read as a flag or operand. A next word
    /// starting with `-` is still read as a flag, so an entry can only make
    /// a check stricter or spare a false alarm, never hide a flag. List only
    /// flags that surely take a value: an operand taken for a value escapes
    /// [`Limits::operands`].
    pub takes_value: &'static [&'static str],
    /// Short flags with an optional value that can only be attached
    /// (`date -Iseconds`): the rest of their cluster is the value.
    pub attached_value: &'static [&'static str],
    /// Which operands (non-flag words) are read-only.
    pub operands: Operands,
}

/// How a program reads its flags.
pub(super) enum Style {
    /// getopt: `-abc` clusters of short flags, `--long[=value]`, `--` ends
    /// the flags.
    Getopt,
    /// Every word is compared whole (`find`'s `-delete`, `-exec`).
    Words,
}

/// Which operands a program reads rather than writes.
pub(super) enum Operands {
    /// Any number.
    Any,
    /// At most this many: the next one is an output file (`uniq in out`).
    AtMost(usize),
    /// Only operands starting with this (`date +%s`; `date 0101…` sets the
    /// clock).
    Prefixed(&'static str),
    /// Only when one of these flags makes the command list instead of
    /// create (`git branch --list 'feat*'` versus `git branch feat`).
    OnlyWith(&'static [&'static str]),
}

/// Nothing refused, any operands: the base the entries below build on.
const ANY: Limits = Limits {
    style: Style::Getopt,
    forbidden: &[],
    takes_value: &[],
    attached_value: &[],
    operands: Operands::Any,
};

/// The known read-only programs. A program name is looked up as written;
/// paths (`./ls`, `/bin/ls`) never match, since a path could name any file.
pub(super) static PROGRAMS: &[(&str, Rule)] = &[
    // Print, count, compare or describe what they are given. `cd` only
    // moves the rest of this one command line, which is read-only too.
    ("basename", Rule::AnyArgs),
    ("cat", Rule::AnyArgs),
    ("cd", Rule::AnyArgs),
    ("cksum", Rule::AnyArgs),
    ("cmp", Rule::AnyArgs),
    ("column", Rule::AnyArgs),
    ("comm", Rule::AnyArgs),
    ("cut", Rule::AnyArgs),
    ("df", Rule::AnyArgs),
    ("diff", Rule::AnyArgs),
    ("dirname", Rule::AnyArgs),
    ("du", Rule::AnyArgs),
    ("echo", Rule::AnyArgs),
    ("egrep", Rule::AnyArgs),
    ("false", Rule::AnyArgs),
    ("fgrep", Rule::AnyArgs),
    ("fold", Rule::AnyArgs),
    ("grep", Rule::AnyArgs),
    ("head", Rule::AnyArgs),
    ("id", Rule::AnyArgs),
    ("jq", Rule::AnyArgs),
    ("ls", Rule::AnyArgs),
    ("md5sum", Rule::AnyArgs),
    ("nl", Rule::AnyArgs),
    ("nproc", Rule::AnyArgs),
    ("od", Rule::AnyArgs),
    ("paste", Rule::AnyArgs),
    ("printenv", Rule::AnyArgs),
    ("printf", Rule::AnyArgs),
    ("pwd", Rule::AnyArgs),
    ("readlink", Rule::AnyArgs),
    ("realpath", Rule::AnyArgs),
    ("rev", Rule::AnyArgs),
    ("seq", Rule::AnyArgs),
    ("sha1sum", Rule::AnyArgs),
    ("sha256sum", Rule::AnyArgs),
    ("sha512sum", Rule::AnyArgs),
    ("sleep", Rule::AnyArgs),
    ("stat", Rule::AnyArgs),
    ("tac", Rule::AnyArgs),
    // `tail -f` never ends by itself, but it only reads; the call's timeout
    // ends it.
    ("tail", Rule::AnyArgs),
    ("tr", Rule::AnyArgs),
    ("true", Rule::AnyArgs),
    ("type", Rule::AnyArgs),
    ("uname", Rule::AnyArgs),
    ("wc", Rule::AnyArgs),
    ("which", Rule::AnyArgs),
    ("whoami", Rule::AnyArgs),
    ("env", Rule::Bare),
    (
        "date",
        Rule::Limited(Limits {
            forbidden: &["-s", "--set"],
            takes_value: &[
                "-d",
                "--date",
                "-f",
                "--file",
                "-r",
                "--reference",
                "--rfc-3339",
            ],
            attached_value: &["-I"],
            operands: Operands::Prefixed("+"),
            ..ANY
        }),
    ),
    (
        // `-C` compiles a magic file into `magic.mgc`.
        "file",
        Rule::Limited(Limits {
            forbidden: &["-C", "--compile"],
            takes_value: &[
                "-m",
                "--magic-file",
                "-e",
                "--exclude",
                "-F",
                "--separator",
                "-f",
                "--files-from",
                "-P",
                "--parameter",
            ],
            ..ANY
        }),
    ),
    (
        "find",
        Rule::Limited(Limits {
            style: Style::Words,
            forbidden: &[
                "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ],
            ..ANY
        }),
    ),
    (
        // `--pre` and `--hostname-bin` run a program; `--pre-glob` only
        // narrows `--pre`, refused with it. `-z` runs fixed decompressors
        // (gzip, xz, …) found on PATH, which a command line cannot change.
        "rg",
        Rule::Limited(Limits {
            forbidden: &["--pre", "--pre-glob", "--hostname-bin"],
            ..ANY
        }),
    ),
    (
        // `--compress-program` runs a program. `-T` only moves the temporary
        // files sort always may write.
        "sort",
        Rule::Limited(Limits {
            forbidden: &["-o", "--output", "--compress-program"],
            takes_value: &[
                "-k",
                "--key",
                "-t",
                "--field-separator",
                "-S",
                "--buffer-size",
                "-T",
                "--temporary-directory",
                "--batch-size",
                "--parallel",
                "--random-source",
                "--files0-from",
                "--sort",
            ],
            ..ANY
        }),
    ),
    (
        // `-o` writes the listing to a file; `-R` reruns tree with `-o
        // 00Tree.html` in every directory. tree reads flag values from the
        // next word even inside a cluster (`-Lo 2 x`), unlike getopt, so no
        // value flags are listed: every word is read as flags.
        "tree",
        Rule::Limited(Limits {
            forbidden: &["-o", "-R"],
            ..ANY
        }),
    ),
    (
        // A second operand is the output file.
        "uniq",
        Rule::Limited(Limits {
            takes_value: &[
                "-f",
                "-s",
                "-w",
                "--skip-fields",
                "--skip-chars",
                "--check-chars",
            ],
            operands: Operands::AtMost(1),
            ..ANY
        }),
    ),
    ("git", Rule::Git),
];

/// git's global options that take a value (`-C dir`, `--git-dir=x`). They
/// only choose the repository or directory. Like every git command, the
/// subcommands below trust the configuration of the repository they find
/// (`core.fsmonitor`, diff drivers), as does a person typing them.
pub(super) const GIT_GLOBAL_VALUE: &[&str] = &["-C", "--git-dir", "--work-tree", "--namespace"];

/// git's global flags that change nothing. Absent on purpose: `-c` and
/// `--config-env` (configuration can name a program to run: `core.pager`,
/// `core.fsmonitor`, `diff.external`), `--exec-path` (where git finds its
/// subcommands), `-p`/`--paginate` (runs the pager), `--help` (may open a
/// browser, per `help.format`).
pub(super) const GIT_GLOBAL_FLAGS: &[&str] = &[
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

/// Refused after every git subcommand: `--output` writes a file;
/// `--ext-diff` and `--textconv` exist to run the external programs the
/// configuration names. `diff`, `log` and `show` already apply textconv
/// drivers by default (the repository's own configuration, trusted as
/// above), so refusing the flags costs nothing there, and elsewhere
/// (`cat-file`, `blame`) they are the only way to run one. `--help` opens
/// the manual or a browser.
pub(super) const GIT_FORBIDDEN: Limits = Limits {
    forbidden: &["--output", "--ext-diff", "--textconv", "--help"],
    ..ANY
};

/// Flags that make `git branch` list, so its operands are patterns.
const BRANCH_LISTING: &[&str] = &[
    "-l",
    "--list",
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-v",
    "--verbose",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
];

/// Flags of `branch` and `tag` that take a commit or a format. `--contains`
/// and friends take the next word when it does not start with `-`.
const REF_FILTER_VALUES: &[&str] = &[
    "--sort",
    "--format",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
];

/// The read-only git subcommands. git's own bookkeeping (`status`
/// refreshing the index) is not counted as a change.
pub(super) static GIT_SUBCOMMANDS: &[(&str, Limits)] = &[
    ("blame", ANY),
    (
        "cat-file",
        Limits {
            // Runs the configured clean/smudge filters.
            forbidden: &["--filters"],
            ..ANY
        },
    ),
    ("describe", ANY),
    ("diff", ANY),
    ("for-each-ref", ANY),
    ("log", ANY),
    ("ls-files", ANY),
    ("ls-tree", ANY),
    ("merge-base", ANY),
    ("rev-list", ANY),
    ("rev-parse", ANY),
    ("shortlog", ANY),
    ("show", ANY),
    ("status", ANY),
    (
        "branch",
        Limits {
            forbidden: &[
                "-d",
                "-D",
                "-m",
                "-M",
                "-c",
                "-C",
                "-f",
                "-u",
                "-t",
                "--delete",
                "--move",
                "--copy",
                "--force",
                "--set-upstream-to",
                "--set-upstream",
                "--unset-upstream",
                "--edit-description",
                "--track",
                "--no-track",
                "--create-reflog",
                "--recurse-submodules",
            ],
            takes_value: REF_FILTER_VALUES,
            operands: Operands::OnlyWith(BRANCH_LISTING),
            ..ANY
        },
    ),
    (
        // `-O` / `--open-files-in-pager` runs a program on the matches.
        "grep",
        Limits {
            forbidden: &["-O", "--open-files-in-pager"],
            takes_value: &[
                "-e",
                "-f",
                "-A",
                "-B",
                "-C",
                "-m",
                "--max-count",
                "--max-depth",
                "--threads",
                "--context",
                "--after-context",
                "--before-context",
            ],
            ..ANY
        },
    ),
    (
        // Without operands `git remote` only lists (`-v` adds URLs); every
        // operand is a subcommand, and most of those change or fetch.
        "remote",
        Limits {
            operands: Operands::AtMost(0),
            ..ANY
        },
    ),
    (
        // `-v` runs gpg; the rest create, sign or delete.
        "tag",
        Limits {
            forbidden: &[
                "-a",
                "-s",
                "-u",
                "-f",
                "-d",
                "-v",
                "-m",
                "-F",
                "-e",
                "--annotate",
                "--sign",
                "--local-user",
                "--force",
                "--delete",
                "--verify",
                "--message",
                "--file",
                "--edit",
                "--cleanup",
                "--create-reflog",
            ],
            takes_value: REF_FILTER_VALUES,
            attached_value: &["-n"],
            operands: Operands::OnlyWith(&["-l", "--list"]),
            ..ANY
        },
    ),
];
