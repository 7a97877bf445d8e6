//! One test per class of command line that scripted calls made the
//! classifier prove read-only while bash ran something, each named after
//! the bug, with hostile variants of the class.

use std::time::{Duration, Instant};

use super::{EXPANDS, GLOB, REFUSED_FLAG, RO, SUBSTITUTION, UNKNOWN, check};
use crate::permission::classify::classify_command;

const OPAQUE_BRACE: &str = "brace expansion in a word with quotes, escapes or expansions";
const OPERATOR: &str = "a parameter expansion with an operator";
const ARITHMETIC: &str = "evaluates variables as expressions, which can run commands";
const NOT_LISTED: &str = "is not an option known to be read-only";

/// The text inside `${…}` was not parsed, and assignment values were not
/// checked for expansions: both ran commands in "read-only" lines.
#[test]
fn parameter_expansion_text_hid_commands() {
    check(&[
        ("LANG=${x:-$(touch F)} ls", SUBSTITUTION),
        ("echo ${x:-$(rm -rf ../d)}", SUBSTITUTION),
        ("echo \"${x:-`touch F`}\"", SUBSTITUTION),
        ("echo ${x:-\"$(touch F)\"}", SUBSTITUTION),
        ("echo ${x:-${y:-$(touch F)}}", SUBSTITUTION),
        ("echo ${x[$(touch F)]}", SUBSTITUTION),
        ("cat <<< ${x:-$(touch F)}", SUBSTITUTION),
        ("echo ${x:-y}", OPERATOR),
        ("echo ${x@P}", OPERATOR),
        ("echo \"${x@P}\"", OPERATOR),
        ("echo ${#x} ${!x} ${x[0]} ${x/a/b}", OPERATOR),
        ("echo ${x}", EXPANDS),
        ("echo \"${10}\"", EXPANDS),
        (
            "LANG=${x:-C} ls",
            "the assignment LANG=… does not assign a plain value: a parameter expansion",
        ),
        (
            "LC_ALL=$x ls",
            "the assignment LC_ALL=$x is not a plain value",
        ),
        ("LANG=\"$x\" ls", "is not a plain value"),
        ("LANG=~ ls", "is not a plain value"),
        ("TZ=`touch F` date", SUBSTITUTION),
        ("LANG=C.UTF-8 ls", RO),
        (
            "LC_ALL=zh_CN.GBK ls",
            "the assignment LC_ALL=zh_CN.GBK is not a plain value",
        ),
        ("COLUMNS=8x ls", "is not a plain value"),
    ]);
}

/// `$[…]` and arithmetic contexts evaluate array subscripts held in
/// variables, which run commands (`y='a[$(touch F)]'; echo $((y))`).
#[test]
fn arithmetic_evaluated_subscripts_that_ran_commands() {
    check(&[
        (
            "y='a[$(touch F)]'; echo $((y))",
            "the assignment y=… can change",
        ),
        ("echo $((y))", ARITHMETIC),
        ("echo \"$((y))\"", ARITHMETIC),
        ("echo $[y]", ARITHMETIC),
        ("echo $(( $(touch F) ))", SUBSTITUTION),
        ("echo $[ `touch F` ]", SUBSTITUTION),
        ("[[ $y -eq 1 ]]", "could not parse: the shell keyword '[['"),
        ("(( y ))", "could not parse: a subshell"),
        ("let y", UNKNOWN),
        ("declare -i x=y", UNKNOWN),
        ("test -v 'a[$(touch F)]'", UNKNOWN),
        ("[ -v x ]", "the program name '[' is a glob"),
        ("a[$(touch F)]=1 ls", SUBSTITUTION),
        (
            "LC_ALL[x]=C ls",
            "an array subscript is evaluated as arithmetic",
        ),
        ("LANG+=C ls", "`+=` appends to the variable"),
        ("printf '%d' 'a[$(touch F)]'", RO),
    ]);
}

/// `$"…"` was read as a literal `$` and a string: bash reads it as the
/// (translated) string, so `$"-o"` is the option `-o`.
#[test]
fn locale_quoting_read_as_a_dollar_and_a_string() {
    check(&[
        ("sort $\"-o\" F README", "locale quoting"),
        ("find d $\"-delete\"", "locale quoting"),
        ("git $\"push\"", "locale quoting"),
        ("echo $\"hello\"", "locale quoting"),
        ("echo \"$\"", RO),
        ("echo \"a$\"'b'", RO),
        ("echo \"$'x'\"", RO),
        ("ls $'\\x2d'la", "ANSI-C quoting"),
        ("sort $'-o' F README", "ANSI-C quoting"),
        ("find . $'\\055delete'", "ANSI-C quoting"),
    ]);
}

/// Brace expansion with quotes was not recognised: bash expands
/// `{"-o",F}` to `-o F`.
#[test]
fn brace_expansion_with_quotes_was_not_recognised() {
    check(&[
        ("sort {\"-o\",F} README", OPAQUE_BRACE),
        ("find . {'-fprint',F}", OPAQUE_BRACE),
        ("git log {\"--output=F\",-1}", OPAQUE_BRACE),
        ("find . {\"-delete\",}", OPAQUE_BRACE),
        ("find . {\\-delete,}", OPAQUE_BRACE),
        ("find . {$x,}", OPAQUE_BRACE),
        ("ls {\"-la\",.}", OPAQUE_BRACE),
        ("sort {-o,F} README", GLOB),
        ("find . {-fprint,F}", GLOB),
        ("git log --ou{tput=F,}", GLOB),
        ("sort x{1..3}", GLOB),
        ("ls {a,b}", RO),
        ("ls {a..c}", RO),
        ("ls '{a,b}' \\{a,b} {a\\,b}", RO),
        ("git show HEAD@{1}", RO),
        ("find . -\\delete", "`find -delete`"),
        ("rg --pr\\e=sh x", "`rg --pre=sh`"),
        ("git log --o\"utput\"=x", "`git log --output=x`"),
    ]);
}

/// The program tables were deny-lists: later flags negated earlier ones
/// (`--no-list`, `--no-verbose`) and `printf -v` assigned any variable.
#[test]
fn program_tables_were_deny_lists() {
    check(&[
        ("git branch --list --no-list NAME", "`git branch --no-list`"),
        (
            "git branch -v --no-verbose NAME",
            "`git branch --no-verbose`",
        ),
        ("git branch -v NAME", "creates or changes 'NAME'"),
        ("git branch -a NAME", "creates or changes 'NAME'"),
        (
            "git branch --contains HEAD NAME",
            "creates or changes 'NAME'",
        ),
        ("git branch -l NAME", RO),
        ("git tag -n5 NAME", "creates or changes 'NAME'"),
        ("git tag -l --no-list v1", "`git tag --no-list`"),
        ("printf -v PATH x", "`printf -v` assigns its output"),
        ("printf -vPATH x", "`printf -vPATH` assigns"),
        ("printf -- -v", RO),
        ("printf %s -v", RO),
        ("sort -mo F README", "`sort -mo`"),
        ("sort --compress-prog=sh f", "`sort --compress-prog=sh`"),
        ("sed -ni p f", "`sed -ni`"),
        ("ls --hyper", "`ls --hyper`"),
        ("ls --no-color", "`ls --no-color`"),
        ("ls -la --colour", NOT_LISTED),
        ("cat -z f", "`cat -z`"),
        ("head --lines 5 f", RO),
        ("head --line 5 f", NOT_LISTED),
        ("date --s 2020", NOT_LISTED),
        ("git log --outp=F", REFUSED_FLAG),
        ("git log '--format=%G?'", "runs gpg"),
        ("git log --format=%G? x", GLOB),
        ("git log --pretty=format:%GS", "runs gpg"),
        ("git log --show-signature", REFUSED_FLAG),
        ("git log --follow -- x", RO),
        ("git log --stat 10", RO),
        ("git log --format %h", NOT_LISTED),
        ("git log -n 5 --no-walk=unsorted", RO),
        ("git log --no-such-option", NOT_LISTED),
        ("git diff --word-diff=color HEAD", RO),
        ("git diff --text HEAD", RO),
        ("git diff --textc HEAD", REFUSED_FLAG),
        ("git -c core.fsmonitor=x status", "`git -c`"),
        ("git --config-env core.pager=X log", "`git --config-env`"),
        (
            "GIT_EXTERNAL_DIFF=x git diff",
            "the assignment GIT_EXTERNAL_DIFF=…",
        ),
        ("GIT_PAGER=x git log", "the assignment GIT_PAGER=…"),
        ("git -p log", "the git option '-p'"),
        ("git --paginate log", "the git option '--paginate'"),
        ("git stash list", RO),
        ("git stash push", "is not a verb known to only read"),
        ("git config --get x", RO),
        ("git config --get x y z", "sets or changes configuration"),
        ("find . -name -delete", RO),
        ("find . -newermt 2020-01-01 -print", RO),
        ("find . -fprintf out %p", "`find -fprintf`"),
        ("find . -name x -o -delete", "`find -delete`"),
        ("tree -LP 2 x", "`tree -LP`"),
    ]);
}

/// Builtins that assign, define or run are not read-only.
#[test]
fn builtins_that_assign_or_run() {
    check(&[
        ("read x", UNKNOWN),
        ("mapfile x", UNKNOWN),
        ("readarray x", UNKNOWN),
        ("declare x=1", UNKNOWN),
        ("typeset x=1", UNKNOWN),
        ("local x", UNKNOWN),
        ("export PATH=.", UNKNOWN),
        ("set -x", UNKNOWN),
        ("trap 'touch F' EXIT", UNKNOWN),
        ("alias ls=rm", UNKNOWN),
        ("unset PATH", UNKNOWN),
        ("shopt -s extglob", UNKNOWN),
        ("enable -n cd", UNKNOWN),
        ("hash -p /tmp/x ls", UNKNOWN),
        ("command ls", UNKNOWN),
        ("builtin cd", RO),
        (
            "builtin read x",
            "`builtin read` is not a read-only builtin",
        ),
        (
            "builtin declare x=1",
            "`builtin declare` is not a read-only builtin",
        ),
        ("PS4='$(touch F)' ls", "the assignment PS4=…"),
        ("PS4=$(touch F) ls", SUBSTITUTION),
        ("PS4=x ls", "the assignment PS4=…"),
        ("ls() { :; }", "could not parse"),
        ("function ls { :; }", "could not parse"),
    ]);
}

/// What else the reader refuses or reads exactly.
#[test]
fn reading_edges() {
    check(&[
        ("ls \\\n -la", RO),
        ("ls\\\n -la", "could not parse: a line continuation"),
        ("ls -\\\nla", "could not parse: a line continuation"),
        ("echo \"a\\\nb\"", "could not parse: a line continuation"),
        ("ls |\\\n| rm x", "could not parse: a line continuation"),
        (
            "ls {x}>/dev/null",
            "could not parse: '{x}' before a redirection",
        ),
        ("ls ;; ls", "could not parse: a case terminator"),
        (
            "; ls",
            "could not parse: an operator without a command before it",
        ),
        ("ls &&\nls", RO),
        ("ls $'a'", "ANSI-C"),
        ("ls ~", RO),
        ("cat ~/.bashrc", RO),
        ("sort ~/x", RO),
        ("sort --output=~/x f", "`sort --output=~/x`"),
        ("uniq ~/a ~/b", "'~/b' would be written"),
        ("~/bin/ls", "names a program by path"),
        ("~ls", "names a program by path"),
        ("ls \u{1}", "a control character"),
        ("ls > /dev/nul?", "output redirection to '/dev/nul?'"),
        ("cat < *.txt", "the redirection '<' from '*.txt'"),
        ("cat < ~/x", "the redirection '<' from '~/x'"),
        ("ls 2>(cat)", "process substitution"),
    ]);
}

/// Lines shaped to make a reader rescan: each is 60,000 characters or so.
pub(in crate::permission) fn huge_lines() -> Vec<String> {
    let n = 60_000;
    vec![
        format!("ls {}", "{".repeat(n)),
        format!("ls {}{}", "{".repeat(n / 2), "}".repeat(n / 2)),
        format!("ls {}", "{a,".repeat(n / 3)),
        format!("ls {}", "{a,b}".repeat(n / 5)),
        format!("ls {}", "{1..3}".repeat(n / 6)),
        format!("ls {}x{}", "{a,".repeat(n / 6), "}".repeat(n / 6)),
        format!("echo {}", "$(".repeat(n / 2)),
        format!("echo {}", "${".repeat(n / 2)),
        format!("echo {}", "$((".repeat(n / 3)),
        format!("echo {}", "`".repeat(n)),
        format!("echo {}", "\\`".repeat(n / 2)),
        format!("echo \"{}\"", "$x".repeat(n / 2)),
        format!("echo {}", "'a'".repeat(n / 3)),
        format!("ls {}", "a ".repeat(n / 2)),
        format!("ls{}", " | ls".repeat(n / 5)),
        format!("ls{}", " && env".repeat(n / 7)),
        format!("{}ls", "env ".repeat(n / 4)),
        format!("{}ls", "LC_ALL=C ".repeat(n / 9)),
        format!("git {}", "-C . ".repeat(n / 5)),
        format!("ls {}", "-l ".repeat(n / 3)),
        format!("find . {}", "-name x ".repeat(n / 8)),
        format!("ls {}", "~/".repeat(n / 2)),
        format!("ls 2>/dev/null{}", " <x".repeat(n / 3)),
    ]
}

/// 60,000 braces took 14 s to classify: the reader rescanned ahead from
/// every `{` and copied the rest of the line for every token.
#[test]
fn sixty_thousand_braces_took_fourteen_seconds() {
    for line in huge_lines() {
        let started = Instant::now();
        let classified = classify_command(&line);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "{took:?} to classify {}… ({})",
            &line[..40.min(line.len())],
            classified.reason
        );
    }
}

/// `file -d` is `--debug` and takes no value, but the table gave it one, so
/// `--preserve-date` (which writes access times back, moving the change
/// time) hid behind it as its value: the differential test found it.
#[test]
fn file_debug_hid_the_option_after_it() {
    check(&[
        (
            "file -nLd --preserve-date README.md",
            "`file --preserve-date`",
        ),
        (
            "file -d --preserve-date README.md",
            "`file --preserve-date`",
        ),
        ("file -d README.md", RO),
        ("file -dp README.md", "`file -dp`"),
        (
            "file -m --preserve-date README.md",
            "`file --preserve-date`",
        ),
        ("file -m magic README.md", RO),
        ("sort -t -o F README.md", "`sort -o`"),
        ("sort -t , -k2 README.md", RO),
        ("date -d -s", "`date -s`"),
        ("uniq -f -5 a", "`uniq -5`"),
        ("grep -e -foo README.md", RO),
    ]);
}
