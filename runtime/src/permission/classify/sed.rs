//! `sed` that only prints: `sed -n 1,5p file`, `sed -n '/re/p'`, `sed 5q`.
//!
//! A script is accepted only when every command in it is one that prints,
//! deletes from the output, reads the next line or quits (`p P = l d n N q
//! Q`), each with at most two addresses of the forms `N`, `N~M`, `$`,
//! `/re/` (flags `I`, `M`), `+N` and `~N`, commands separated by `;` or
//! newlines. Everything else is refused, above all the commands that
//! write or run: `w`, `W`, `s///w`, `s///e`, `e`, `r`, `R` and braces, and
//! the options `-i` (edits in place) and `-f` (a script from a file, which
//! the reader cannot see).

use super::options::{GNU, Operands, Spec, check_operands};
use crate::permission::shell::Word;

/// The options that only change how sed reads or prints.
const SED: Spec = Spec {
    short: "nErsuze:l:",
    long: "quiet silent regexp-extended separate unbuffered null-data posix debug sandbox \
        expression= line-length= help version",
    dash_values_are_options: true,
    ..GNU
};

/// Checks `sed`'s arguments.
pub(super) fn check(args: &[Word]) -> Result<(), String> {
    let read = SED.read("sed", args)?;
    let mut scripts: Vec<&str> = read
        .values
        .iter()
        .filter(|(option, _)| matches!(option.as_str(), "-e" | "--expression"))
        .map(|(_, script)| script.as_str())
        .collect();
    // Without `-e`, the first operand is the script; the rest are files.
    if scripts.is_empty() {
        match read.operands.first() {
            Some(script) => scripts.push(&script.text),
            None => return Ok(()),
        }
    }
    for script in scripts {
        prints_only(script).map_err(|why| {
            format!("the sed script '{script}' is not known to only print: {why}")
        })?;
    }
    check_operands("sed", &Operands::Any, &read)
}

/// Whether `script` only prints, or why not.
fn prints_only(script: &str) -> Result<(), String> {
    let chars: Vec<char> = script.chars().collect();
    let mut at = 0;
    let mut commands = 0;
    loop {
        skip_blanks(&chars, &mut at, true);
        if at >= chars.len() {
            break;
        }
        address(&chars, &mut at)?;
        skip_blanks(&chars, &mut at, false);
        if chars.get(at) == Some(&',') {
            at += 1;
            skip_blanks(&chars, &mut at, false);
            second_address(&chars, &mut at)?;
            skip_blanks(&chars, &mut at, false);
        }
        if chars.get(at) == Some(&'!') {
            at += 1;
            skip_blanks(&chars, &mut at, false);
        }
        match chars.get(at) {
            Some('p' | 'P' | '=' | 'l' | 'd' | 'n' | 'N') => at += 1,
            Some('q' | 'Q') => {
                at += 1;
                skip_blanks(&chars, &mut at, false);
                while chars.get(at).is_some_and(char::is_ascii_digit) {
                    at += 1;
                }
            }
            Some(c) => return Err(format!("the command '{c}'")),
            None => return Err("an address without a command".into()),
        }
        commands += 1;
        skip_blanks(&chars, &mut at, false);
        match chars.get(at) {
            None => break,
            Some(';' | '\n') => at += 1,
            Some(c) => return Err(format!("'{c}' after a command")),
        }
    }
    if commands == 0 {
        return Err("no command".into());
    }
    Ok(())
}

fn skip_blanks(chars: &[char], at: &mut usize, newlines: bool) {
    while chars
        .get(*at)
        .is_some_and(|c| *c == ' ' || *c == '\t' || (newlines && (*c == '\n' || *c == ';')))
    {
        *at += 1;
    }
}

fn digits(chars: &[char], at: &mut usize) -> bool {
    let start = *at;
    while chars.get(*at).is_some_and(char::is_ascii_digit) {
        *at += 1;
    }
    *at > start
}

/// An optional first address.
fn address(chars: &[char], at: &mut usize) -> Result<(), String> {
    match chars.get(*at) {
        Some('$') => *at += 1,
        Some('/') => regex(chars, at)?,
        Some(c) if c.is_ascii_digit() => {
            digits(chars, at);
            if chars.get(*at) == Some(&'~') {
                *at += 1;
                if !digits(chars, at) {
                    return Err("'~' without a step".into());
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The address after `,`.
fn second_address(chars: &[char], at: &mut usize) -> Result<(), String> {
    match chars.get(*at) {
        Some('$') => *at += 1,
        Some('/') => regex(chars, at)?,
        Some('+' | '~') => {
            *at += 1;
            if !digits(chars, at) {
                return Err("'+' or '~' without a number".into());
            }
        }
        Some(c) if c.is_ascii_digit() => {
            digits(chars, at);
        }
        _ => return Err("',' without a second address".into()),
    }
    Ok(())
}

/// `/re/` with its flags. A bracket expression may hold only plain
/// characters (`[a-z_.]`, `[^0-9]`): where `[:class:]`, a leading `]` or a
/// `/` inside one ends the address is where readings of sed differ.
fn regex(chars: &[char], at: &mut usize) -> Result<(), String> {
    *at += 1;
    loop {
        match chars.get(*at) {
            None | Some('\n') => return Err("an unterminated /regex/".into()),
            Some('\\') => match chars.get(*at + 1) {
                None | Some('\n' | 'c') => {
                    return Err("a backslash the reader does not follow in a /regex/".into());
                }
                Some(_) => *at += 2,
            },
            Some('[') => {
                *at += 1;
                if chars.get(*at) == Some(&'^') {
                    *at += 1;
                }
                let start = *at;
                while chars
                    .get(*at)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || " _.-^".contains(*c))
                {
                    *at += 1;
                }
                if *at == start || chars.get(*at) != Some(&']') {
                    return Err("a bracket expression the reader does not follow".into());
                }
                *at += 1;
            }
            Some('/') => {
                *at += 1;
                break;
            }
            Some(_) => *at += 1,
        }
    }
    while matches!(chars.get(*at), Some('I' | 'M')) {
        *at += 1;
    }
    Ok(())
}
