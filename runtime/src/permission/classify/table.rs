//! The programs `bash` may run read-only, and the options each accepts.
//!
//! Every table is an allow-list: an option that is not listed, spelled
//! exactly, is refused, whatever it does. A program absent from
//! [`PROGRAMS`] is not read-only. `sed`, `awk`, `xargs`, `tee`, shells,
//! interpreters, build tools, package managers and the builtins that assign
//! or run (`eval`, `source`, `.`, `read`, `mapfile`, `declare`, `export`,
//! `set`, `trap`, `alias`, `let`, `printf -v`) are absent or refused on
//! purpose: each can write, assign or run anything (`sed` only with a script
//! that prints, `sed.rs`).
//!
//! `globs: true` marks the programs whose *every* option (listed or not,
//! as of GNU coreutils 9, grep 3, util-linux 2.38, jq 1.6, bash 5.2) only
//! reads and which have no output operand: only those may be given unquoted
//! globs or brace expansions, since a matched file name can become any
//! option. They are `base64 basename cat cd cksum cmp column comm cut df dirname du
//! echo egrep expr false fgrep fold grep head id jq ls md5sum nl nproc numfmt od paste
//! printenv pwd readlink realpath rev seq sha1sum sha256sum sha512sum sleep
//! stat tac tail tr true type uname wc which whoami`. Not `date` (`-s`),
//! `diff` (`--paginate` runs `pr`), `file` (`-C` writes), `find`, `git`,
//! `printf` (`-v`), `rg` (`--pre`), `sort` (`-o`), `tree` (`-o`) or `uniq`
//! (its second operand is written).

use super::options::{GNU, Operands, Spec};

/// A known read-only program.
pub(super) struct Program {
    pub name: &'static str,
    /// Unquoted globs and brace expansions may be its arguments: see the
    /// module documentation.
    pub globs: bool,
    pub syntax: Syntax,
}

/// How a program's arguments are read.
pub(super) enum Syntax {
    /// Options from an allow-list, then operands.
    Options(Spec),
    /// `echo`: leading `-n`, `-e`, `-E` clusters, then text; nothing else
    /// is an option.
    Echo,
    /// `printf`: a format and its arguments; any option (`-v` assigns a
    /// variable) is refused.
    Printf,
    /// `true`, `false`: arguments are ignored.
    Ignored,
    /// Only with no arguments at all (`env` prints; `env X cmd` runs `cmd`).
    Bare,
    /// `find`'s expression (`find.rs`).
    Find,
    /// `git`'s options and read-only subcommands (`git.rs`).
    Git,
    /// `sed` with a script that only prints (`sed.rs`).
    Sed,
    /// `expr`: any arguments; it only computes and prints.
    Expression,
    /// `builtin NAME …`: only the read-only builtins of this table, each
    /// checked as itself.
    Builtin,
}

const fn program(name: &'static str, spec: Spec) -> Program {
    Program {
        name,
        globs: true,
        syntax: Syntax::Options(spec),
    }
}

/// A program whose listed options only read, but some unlisted one writes
/// or runs something, or which has an output operand: no globs, and a
/// value taken from the next word that starts with `-` is also read as
/// options, so a value this table wrongly gives an option (`file -d` is
/// `--debug` and takes none) cannot hide one (`file -d --preserve-date`).
const fn guarded(name: &'static str, spec: Spec) -> Program {
    Program {
        name,
        globs: false,
        syntax: Syntax::Options(Spec {
            dash_values_are_options: true,
            ..spec
        }),
    }
}

const HELP: &str = "help version";

const CHECKSUM: Spec = Spec {
    short: "bctzw",
    long: "binary check tag text zero ignore-missing quiet status strict warn help version",
    ..GNU
};

const GREP: Spec = Spec {
    short: "EFGPe:f:iywxsvVm:bnHhoqaId:D:rRLlcTZzB:A:C:U",
    long: "extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case \
        no-ignore-case word-regexp line-regexp no-messages invert-match max-count= byte-offset \
        line-number no-line-number line-buffered with-filename no-filename label= only-matching \
        quiet silent binary-files= text directories= devices= recursive dereference-recursive \
        include= exclude= exclude-from= exclude-dir= files-without-match files-with-matches count \
        initial-tab null null-data before-context= after-context= context= color[=] colour[=] \
        binary help version",
    numeric: true,
    ..GNU
};

/// The known read-only programs. A program name is looked up as written;
/// paths (`./ls`, `/bin/ls`) never match, since a path could name any file.
pub(super) static PROGRAMS: &[Program] = &[
    program(
        "base64",
        Spec {
            short: "diw:",
            long: "decode ignore-garbage wrap= help version",
            operands: Operands::AtMost(1),
            ..GNU
        },
    ),
    program(
        "basename",
        Spec {
            short: "as:z",
            long: "multiple suffix= zero help version",
            ..GNU
        },
    ),
    program(
        "cat",
        Spec {
            short: "AbeEnstTuv",
            long: "show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting \
                help version",
            ..GNU
        },
    ),
    // A builtin: moves only the rest of this one command line, itself
    // read-only.
    program(
        "cd",
        Spec {
            short: "LPe@",
            permute: false,
            ..GNU
        },
    ),
    program(
        "cksum",
        Spec {
            short: "a:cl:zw",
            long: "algorithm= base64 check length= raw tag untagged zero ignore-missing quiet status \
                strict warn debug help version",
            ..GNU
        },
    ),
    program(
        "cmp",
        Spec {
            short: "bi:ln:sv",
            long: "print-bytes ignore-initial= verbose bytes= quiet silent help version",
            ..GNU
        },
    ),
    program(
        "column",
        Spec {
            short: "ts:o:c:xn:N:l:R:T:E:eH:O:W:r:i:p:JLdhV",
            long: "table separator= output-separator= output-width= fillrows table-name= \
                table-columns= table-columns-limit= table-right= table-truncate= table-noextreme= \
                table-noheadings table-hide= table-order= table-wrap= tree= tree-id= tree-parent= \
                json keep-empty-lines table-header-repeat help version",
            ..GNU
        },
    ),
    program(
        "comm",
        Spec {
            short: "123z",
            long: "check-order nocheck-order output-delimiter= total zero-terminated help version",
            ..GNU
        },
    ),
    program(
        "cut",
        Spec {
            short: "b:c:d:f:nsz",
            long: "bytes= characters= delimiter= fields= complement only-delimited output-delimiter= \
                zero-terminated help version",
            ..GNU
        },
    ),
    program(
        "df",
        Spec {
            short: "aB:hHiklPt:Tx:v",
            long: "all block-size= human-readable si inodes local no-sync output[=] portability sync \
                total type= print-type exclude-type= help version",
            ..GNU
        },
    ),
    guarded(
        "diff",
        Spec {
            short: "qscC:uU:enyW:pF:tTrNx:X:S:iEZbwBI:D:daNv",
            long: "brief report-identical-files context[=] unified[=] ed normal rcs side-by-side \
                width= left-column suppress-common-lines show-c-function show-function-line= \
                label= expand-tabs initial-tab tabsize= suppress-blank-empty recursive \
                no-dereference new-file unidirectional-new-file ignore-file-name-case \
                no-ignore-file-name-case exclude= exclude-from= starting-file= from-file= to-file= \
                ignore-case ignore-tab-expansion ignore-trailing-space ignore-space-change \
                ignore-all-space ignore-blank-lines ignore-matching-lines= ifdef= line-format= \
                old-line-format= new-line-format= unchanged-line-format= minimal horizon-lines= \
                speed-large-files text strip-trailing-cr color[=] palette= help version",
            ..GNU
        },
    ),
    program(
        "dirname",
        Spec {
            short: "z",
            long: "zero help version",
            ..GNU
        },
    ),
    program(
        "du",
        Spec {
            short: "0aB:bcDd:HhkLlmPSst:X:x",
            long: "null all apparent-size block-size= bytes total dereference-args max-depth= \
                files0-from= human-readable inodes dereference count-links no-dereference \
                separate-dirs si summarize threshold= time[=] time-style= exclude-from= exclude= \
                one-file-system help version",
            ..GNU
        },
    ),
    Program {
        name: "echo",
        globs: true,
        syntax: Syntax::Echo,
    },
    program("egrep", GREP),
    // `expr` has no options but `--help` and `--version`; its operands
    // are an expression it prints the value of.
    Program {
        name: "expr",
        globs: true,
        syntax: Syntax::Expression,
    },
    Program {
        name: "false",
        globs: true,
        syntax: Syntax::Ignored,
    },
    program("fgrep", GREP),
    program(
        "fold",
        Spec {
            short: "bsw:",
            long: "bytes spaces width= help version",
            ..GNU
        },
    ),
    program("grep", GREP),
    program(
        "head",
        Spec {
            short: "c:n:qvz",
            long: "bytes= lines= quiet silent verbose zero-terminated help version",
            numeric: true,
            ..GNU
        },
    ),
    program(
        "id",
        Spec {
            short: "aZgGnruz",
            long: "context group groups name real user zero help version",
            ..GNU
        },
    ),
    // jq 1.6 reads files (`-f`, `--rawfile`, `-L` modules) and writes
    // nothing. `--arg NAME VALUE` takes two words; the second is read again
    // as an operand or option, which only refuses more.
    program(
        "jq",
        Spec {
            short: "cnesrjaSCMRhfL:V",
            long: "compact-output null-input exit-status slurp raw-output join-output ascii-output \
                sort-keys color-output monochrome-output raw-input from-file tab indent= seq \
                stream unbuffered arg= argjson= slurpfile= rawfile= args jsonargs help version",
            ..GNU
        },
    ),
    program(
        "ls",
        Spec {
            short: "aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
            long: "all almost-all author escape block-size= ignore-backups color[=] directory dired \
                classify[=] file-type format= full-time group-directories-first no-group \
                human-readable si dereference-command-line dereference-command-line-symlink-to-dir \
                hide= hyperlink[=] indicator-style= inode ignore= kibibytes dereference \
                numeric-uid-gid literal hide-control-chars show-control-chars quote-name \
                quoting-style= reverse recursive size sort= time= time-style= tabsize= width= \
                context zero help version",
            ..GNU
        },
    ),
    program("md5sum", CHECKSUM),
    program(
        "nl",
        Spec {
            short: "b:d:f:h:i:l:n:ps:v:w:",
            long: "body-numbering= section-delimiter= footer-numbering= header-numbering= \
                line-increment= join-blank-lines= number-format= no-renumber number-separator= \
                starting-line-number= number-width= help version",
            ..GNU
        },
    ),
    program(
        "nproc",
        Spec {
            long: "all ignore= help version",
            ..GNU
        },
    ),
    program(
        "numfmt",
        Spec {
            short: "d:z",
            long: "debug delimiter= field= format= from= from-unit= grouping header[=] invalid= \
                padding= round= suffix= unit-separator= to= to-unit= zero-terminated help version",
            ..GNU
        },
    ),
    program(
        "od",
        Spec {
            short: "A:j:N:S:t:vw::abcdfilosx",
            long: "address-radix= endian= skip-bytes= read-bytes= strings[=] format= \
                output-duplicates width[=] traditional help version",
            ..GNU
        },
    ),
    program(
        "paste",
        Spec {
            short: "d:sz",
            long: "delimiters= serial zero-terminated help version",
            ..GNU
        },
    ),
    program(
        "printenv",
        Spec {
            short: "0",
            long: "null help version",
            ..GNU
        },
    ),
    Program {
        name: "printf",
        globs: false,
        syntax: Syntax::Printf,
    },
    program(
        "pwd",
        Spec {
            short: "LP",
            permute: false,
            ..GNU
        },
    ),
    program(
        "readlink",
        Spec {
            short: "femnqsvz",
            long: "canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent \
                verbose zero help version",
            ..GNU
        },
    ),
    program(
        "realpath",
        Spec {
            short: "emLPqsz",
            long: "canonicalize-existing canonicalize-missing logical physical quiet relative-to= \
                relative-base= strip no-symlinks zero help version",
            ..GNU
        },
    ),
    program(
        "rev",
        Spec {
            short: "0hV",
            long: "zero help version",
            ..GNU
        },
    ),
    // `seq -5 5`: a negative number is an operand.
    program(
        "seq",
        Spec {
            short: "f:s:w",
            long: "format= separator= equal-width help version",
            numeric: true,
            ..GNU
        },
    ),
    program("sha1sum", CHECKSUM),
    program("sha256sum", CHECKSUM),
    program("sha512sum", CHECKSUM),
    program("sleep", Spec { long: HELP, ..GNU }),
    program(
        "stat",
        Spec {
            short: "Lfc:t",
            long: "dereference file-system format= printf= terse cached= help version",
            ..GNU
        },
    ),
    program(
        "tac",
        Spec {
            short: "brs:",
            long: "before regex separator= help version",
            ..GNU
        },
    ),
    // `tail -f` never ends by itself, but it only reads; the call's timeout
    // ends it.
    program(
        "tail",
        Spec {
            short: "c:fFn:qs:vz",
            long: "bytes= follow[=] lines= max-unchanged-stats= pid= quiet silent retry \
                sleep-interval= verbose zero-terminated help version",
            numeric: true,
            ..GNU
        },
    ),
    program(
        "tr",
        Spec {
            short: "cCdst",
            long: "complement delete squeeze-repeats truncate-set1 help version",
            ..GNU
        },
    ),
    Program {
        name: "true",
        globs: true,
        syntax: Syntax::Ignored,
    },
    program(
        "type",
        Spec {
            short: "afptP",
            permute: false,
            ..GNU
        },
    ),
    program(
        "uname",
        Spec {
            short: "asnrvmpio",
            long: "all kernel-name nodename kernel-release kernel-version machine processor \
                hardware-platform operating-system help version",
            ..GNU
        },
    ),
    program(
        "wc",
        Spec {
            short: "cmlLw",
            long: "bytes chars lines files0-from= max-line-length words total= help version",
            ..GNU
        },
    ),
    program("which", Spec { short: "as", ..GNU }),
    program("whoami", Spec { long: HELP, ..GNU }),
    Program {
        name: "env",
        globs: false,
        syntax: Syntax::Bare,
    },
    // `-s`/`--set` set the clock; an operand not starting with `+` does too.
    guarded(
        "date",
        Spec {
            short: "d:f:I::r:Ru",
            long: "date= file= iso-8601[=] reference= rfc-email rfc-3339= utc universal debug \
                resolution help version",
            operands: Operands::Prefixed("+"),
            ..GNU
        },
    ),
    // Absent: `-C`/`--compile` writes `magic.mgc`; `-p`/`--preserve-date`
    // writes access times back.
    guarded(
        "file",
        Spec {
            short: "bikLhNnrszZ0Ede:F:f:m:P:v",
            long: "brief mime mime-type mime-encoding apple extension keep-going dereference \
                no-dereference no-buffer no-pad raw special-files uncompress uncompress-noreport \
                print0 separator= files-from= magic-file= exclude= exclude-quiet= parameter= help \
                version",
            ..GNU
        },
    ),
    Program {
        name: "find",
        globs: false,
        syntax: Syntax::Find,
    },
    // Absent: `--pre`, `--pre-glob` and `--hostname-bin` run a program. `-z`
    // runs fixed decompressors (gzip, xz, …) found on PATH, which a command
    // line cannot change.
    guarded(
        "rg",
        Spec {
            short: "A:B:C:cE:e:Ff:g:Hhij:LlM:m:Nnop0qr:SsT:t:UuvwxzVd:abI",
            long: "after-context= before-context= context= count count-matches color= colors= column \
                no-column context-separator= crlf encoding= engine= files files-with-matches \
                files-without-match fixed-strings follow glob= iglob= glob-case-insensitive \
                heading no-heading hidden no-hidden ignore-case ignore-file= include-zero \
                invert-match json line-buffered line-number no-line-number line-regexp \
                max-columns= max-columns-preview max-count= max-depth= max-filesize= multiline \
                multiline-dotall no-config no-ignore no-ignore-dot no-ignore-exclude \
                no-ignore-files no-ignore-global no-ignore-messages no-ignore-parent no-ignore-vcs \
                no-messages null null-data one-file-system only-matching passthru pcre2 pretty \
                quiet regexp= replace= search-zip smart-case case-sensitive sort= sortr= stats \
                text threads= trim type= type-not= type-list unrestricted vimgrep with-filename \
                no-filename word-regexp binary help version",
            ..GNU
        },
    ),
    // Absent: `-o`/`--output` writes, `--compress-program` runs a program,
    // `-T`/`--temporary-directory` leaves files where it is told when
    // killed.
    guarded(
        "sort",
        Spec {
            short: "bdfghiMnRrVcCmsuzk:t:S:",
            long: "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort \
                human-numeric-sort ignore-nonprinting month-sort numeric-sort random-sort reverse \
                version-sort sort= random-source= check[=] merge stable unique zero-terminated \
                key= field-separator= buffer-size= parallel= files0-from= debug help version",
            ..GNU
        },
    ),
    // Absent: `-o` writes the listing, `-R` writes `00Tree.html` files.
    // tree takes a short option's value from the next word even inside a
    // cluster (`-Lo 2 x`), unlike getopt.
    guarded(
        "tree",
        Spec {
            short: "adlfxL:P:I:iASnCpugshDFqNQvtcUrXJ",
            long: "noreport dirsfirst filesfirst gitignore prune ignore-case matchdirs charset= \
                filelimit= sort= du si inodes device timefmt= help version",
            values_from_next_word: true,
            ..GNU
        },
    ),
    // A second operand is the output file.
    guarded(
        "uniq",
        Spec {
            short: "cdDf:is:uw:z",
            long: "count repeated all-repeated[=] skip-fields= ignore-case skip-chars= unique \
                group[=] check-chars= zero-terminated help version",
            operands: Operands::AtMost(1),
            ..GNU
        },
    ),
    Program {
        name: "git",
        globs: false,
        syntax: Syntax::Git,
    },
    // A file named `-i` that a glob matches would edit in place.
    Program {
        name: "sed",
        globs: false,
        syntax: Syntax::Sed,
    },
    // Runs the builtin it names, skipping functions of that name; only
    // the builtins above pass (`builtin eval`, `source`, `exec` do not).
    Program {
        name: "builtin",
        globs: false,
        syntax: Syntax::Builtin,
    },
];

/// The builtins `builtin` may run: those the table reads as themselves.
pub(super) const BUILTINS: &[&str] = &["cd", "echo", "false", "printf", "pwd", "true", "type"];

/// The entry for `name`.
pub(super) fn lookup(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name == name)
}
