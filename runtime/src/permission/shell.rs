//! A reader for the command lines `bash` is given: for every word it either
//! knows exactly what bash makes of it, or says that it does not.
//!
//! The reader is the authority the classifier (T5) and the floor (P4) build
//! on, so it reads a closed part of bash's grammar and refuses the rest:
//! - structure: simple commands joined by `|`, `|&`, `&&`, `||`, `;`,
//!   newline and `&`; redirections (with fd prefixes); leading `NAME=value`
//!   assignments; comments. Subshells, `{ …; }`, `if`/`for`/`case`/`[[`/`((`,
//!   functions, here-documents, case terminators and a backslash-newline
//!   anywhere but between words are [`Unparsed`].
//! - words: plain characters, `'…'`, `"…"` and backslash escapes are read
//!   exactly (bash runs non-interactively, so `!` is plain). Everything else
//!   a word can hold is recognised, delimited and flagged on the [`Word`]:
//!   parameter expansions (`expands`), globs and brace expansion (`globs`,
//!   `fields`), tilde expansion (`tilde`), command and process substitutions
//!   (`substitutions`, parsed in turn so nothing hides in them), and what the
//!   reader will not evaluate (`opaque`, with the reason): a parameter
//!   expansion with an operator (`${x:-…}`, `${#x}`, `${x@P}`), arithmetic
//!   (`$((…))`, `$[…]`), `$'…'`, `$"…"`, brace expansion with quotes or
//!   expansions in it, control characters.
//!
//! Reading is linear in the length of the line: every character is looked
//! at a bounded number of times, and substitutions nest at most
//! [`MAX_DEPTH`] deep.

mod brace;
pub mod fd;
mod parser;
#[cfg(test)]
mod tests;
mod word;

use std::fmt;

pub use parser::MAX_DEPTH;

/// A parsed command line: simple commands joined by operators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The simple commands, in order.
    pub commands: Vec<SimpleCommand>,
    /// `joins[i]` joins `commands[i]` and `commands[i + 1]`; a trailing `&`
    /// or `;` after the last command is the last entry.
    pub joins: Vec<Join>,
}

/// How two simple commands are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// `|` or `|&`.
    Pipe,
    /// `&&`.
    And,
    /// `||`.
    Or,
    /// `;` or a newline.
    Sequence,
    /// `&`: the command before it runs in the background.
    Background,
}

/// One simple command: assignments, words, redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    /// `NAME=value` words before the program. `NAME+=value` and
    /// `NAME[subscript]=value` are here too, under `NAME`, with an `opaque`
    /// value.
    pub assignments: Vec<(String, Word)>,
    /// The program and its arguments, as written (before brace expansion:
    /// see [`SimpleCommand::expanded_words`]).
    pub words: Vec<Word>,
    /// Redirections, wherever they appeared.
    pub redirects: Vec<Redirect>,
}

impl SimpleCommand {
    /// The program name as written, if there is one.
    pub fn program(&self) -> Option<&str> {
        self.words.first().map(|w| w.text.as_str())
    }

    /// The arguments after the program, as text.
    pub fn args(&self) -> impl Iterator<Item = &str> {
        self.words.iter().skip(1).map(|w| w.text.as_str())
    }

    /// The words after brace expansion, as bash would hand them on: a word
    /// with [`Word::fields`] becomes one word per field (each keeping the
    /// other flags of the word it came from); every other word stays.
    pub fn expanded_words(&self) -> Vec<Word> {
        let mut out = Vec::with_capacity(self.words.len());
        for word in &self.words {
            match &word.fields {
                Some(fields) => out.extend(fields.iter().map(|field| Word {
                    text: field.clone(),
                    substitutions: Vec::new(),
                    fields: None,
                    ..word.clone()
                })),
                None => out.push(word.clone()),
            }
        }
        out
    }
}

/// A word after quote removal, and what the shell would still do to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The text with quotes removed and escapes resolved. Expansions are
    /// kept as written (`$HOME`, `${x:-y}`, `$((1+2))`), substitutions as
    /// `$(…)`, `` `…` ``, `<(…)`; `$'…'` is decoded and `$"…"` read as
    /// `"…"`, as bash does without a message catalog.
    pub text: String,
    /// It contains a parameter expansion (`$x`, `${x}`, `${x:-y}`, `$1`),
    /// quoted or not, so its final value is unknown.
    pub expands: bool,
    /// It contains an unquoted glob (`*`, `?`, `[`) or a brace expansion,
    /// so it may become several words, some starting with `-`.
    pub globs: bool,
    /// Commands substituted into it (`$(…)`, backticks, `<(…)`, `>(…)`),
    /// also those inside `${…}` and arithmetic.
    pub substitutions: Vec<Script>,
    /// Where in `text` the first quoted or escaped part began, if any: a
    /// quoted word is never a keyword, and `NAME=` must be unquoted to be an
    /// assignment.
    pub quoted_from: Option<usize>,
    /// It may start a tilde expansion (`~`, `~/x`, `~user`, `x=~`): a
    /// home or working directory, an absolute path known only when it runs.
    pub tilde: bool,
    /// Why the reader does not know what bash makes of this word, when it
    /// does not: `text` is then only a best reading.
    pub opaque: Option<String>,
    /// The words brace expansion makes of it (quotes removed), in bash's
    /// order, when it has a brace expansion the reader could list.
    pub fields: Option<Vec<String>>,
}

impl Word {
    /// The one string bash passes for this word, when the reader knows it:
    /// no expansion, glob, brace, tilde, substitution or opaque part.
    pub fn exact(&self) -> Option<&str> {
        let known = !self.expands
            && !self.globs
            && !self.tilde
            && self.opaque.is_none()
            && self.substitutions.is_empty();
        known.then_some(self.text.as_str())
    }

    /// Whether its value is known only when it runs: an expansion, a
    /// substitution or an opaque part (globs and tilde not counted).
    pub fn is_unknown(&self) -> bool {
        self.expands || !self.substitutions.is_empty() || self.opaque.is_some()
    }
}

/// A redirection such as `> out.txt`, `2>&1` or `< in.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The operator without its fd prefix: `>`, `>>`, `<`, `>&`, `<&`, `&>`,
    /// `&>>`, `>|`, `<>`, `<<<`.
    pub op: String,
    /// The fd it applies to, when one was written (`2>` → 2).
    pub fd: Option<u32>,
    /// The target word.
    pub target: Word,
}

impl Redirect {
    /// Whether it only reads (`<`, `<<<`) or duplicates a descriptor
    /// (`2>&1`, `>&2`), or only discards output (`> /dev/null`), with a
    /// target the reader knows exactly.
    pub fn is_harmless(&self) -> bool {
        let Some(target) = self.target.exact() else {
            return false;
        };
        match self.op.as_str() {
            "<" | "<<<" => true,
            ">&" | "<&" => target.chars().all(|c| c.is_ascii_digit() || c == '-'),
            ">" | ">>" | "&>" | "&>>" | ">|" => target == "/dev/null",
            _ => false,
        }
    }
}

/// Why a command line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed(pub String);

impl fmt::Display for Unparsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Script {
    /// Every simple command, including those inside substitutions, depth first.
    pub fn all_commands(&self) -> Vec<&SimpleCommand> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a SimpleCommand>) {
        for command in &self.commands {
            out.push(command);
            for word in command_words(command) {
                for inner in &word.substitutions {
                    inner.collect(out);
                }
            }
        }
    }

    /// Whether any command substitution or process substitution occurs.
    pub fn has_substitution(&self) -> bool {
        self.commands
            .iter()
            .any(|c| command_words(c).any(|w| !w.substitutions.is_empty()))
    }
}

/// Every word of a command: its words, assignment values, redirect targets.
pub fn command_words(command: &SimpleCommand) -> impl Iterator<Item = &Word> {
    command
        .words
        .iter()
        .chain(command.assignments.iter().map(|(_, w)| w))
        .chain(command.redirects.iter().map(|r| &r.target))
}

/// Parses a command line.
pub fn parse(src: &str) -> Result<Script, Unparsed> {
    let chars: Vec<char> = src.chars().collect();
    parser::parse_chars(&chars, 0)
}
