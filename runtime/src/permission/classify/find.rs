//! `find`: options, starting points, then an expression whose every primary
//! is on an allow-list and is read with its exact number of arguments, as
//! find reads it (`-name -delete` is a pattern, not an action).

use super::options::unknown_option;
use crate::permission::shell::Word;

/// Primaries and operators that take no argument and only read or print to
/// the call's output. Absent: `-delete`, `-exec`, `-execdir`, `-ok`,
/// `-okdir` (delete or run), `-fprint`, `-fprint0`, `-fprintf`, `-fls`
/// (write a file).
const NO_ARGUMENT: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-true",
    "-false",
    "-empty",
    "-readable",
    "-writable",
    "-executable",
    "-nouser",
    "-nogroup",
    "-depth",
    "-d",
    "-mount",
    "-xdev",
    "-noleaf",
    "-follow",
    "-daystart",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-nowarn",
    "-warn",
    "-not",
    "-a",
    "-and",
    "-o",
    "-or",
    "-help",
    "--help",
    "-version",
    "--version",
    "(",
    ")",
    "!",
    ",",
];

/// Primaries that take one argument and only read or print.
const ONE_ARGUMENT: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-lname",
    "-ilname",
    "-type",
    "-xtype",
    "-size",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-links",
    "-inum",
    "-samefile",
    "-newer",
    "-anewer",
    "-cnewer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-maxdepth",
    "-mindepth",
    "-printf",
    "-fstype",
    "-context",
    "-files0-from",
];

/// `-newerXY` compares with a reference file's or a date's time.
fn is_newer_xy(word: &str) -> bool {
    word.strip_prefix("-newer").is_some_and(|xy| {
        let mut xy = xy.chars();
        matches!(
            (xy.next(), xy.next(), xy.next()),
            (
                Some('a' | 'B' | 'c' | 'm'),
                Some('a' | 'B' | 'c' | 'm' | 't'),
                None
            )
        )
    })
}

/// Checks `find`'s arguments.
pub(super) fn check(args: &[Word]) -> Result<(), String> {
    let mut i = 0;
    // Options before the starting points: `-H`, `-L`, `-P`, `-D list`,
    // `-Olevel`.
    while let Some(word) = args.get(i) {
        match word.text.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") && t[2..].chars().all(|c| c.is_ascii_digit()) => i += 1,
            _ => break,
        }
    }
    // Starting points: up to the first word that starts an expression.
    while args
        .get(i)
        .is_some_and(|w| !(w.text.starts_with('-') || matches!(w.text.as_str(), "(" | "!")))
    {
        i += 1;
    }
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text.as_str();
        if NO_ARGUMENT.contains(&text) {
            continue;
        }
        if ONE_ARGUMENT.contains(&text) || is_newer_xy(text) {
            i += 1;
            continue;
        }
        if text.starts_with('-') {
            return Err(unknown_option("find", text));
        }
        // A stray word: find stops with "paths must precede expression"
        // before it looks at any file.
    }
    Ok(())
}
