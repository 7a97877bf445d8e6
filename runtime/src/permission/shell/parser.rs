//! The command level: simple commands, operators, redirections,
//! assignments, reserved words and comments.

use super::word::{Assignment, RawWord};
use super::{Join, Redirect, Script, SimpleCommand, Unparsed};

/// How deep substitutions may nest (`$(… $(… ))`, backticks, `${…}`)
/// before the reader gives up: deeper lines are [`Unparsed`], so reading
/// never exhausts the stack.
pub const MAX_DEPTH: usize = 32;

/// Words that are reserved in command position; a line using any of them
/// has structure the reader does not follow.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "{", "}", "[[", "]]", "!", "time", "coproc",
];

pub(super) struct Parser<'a> {
    pub(super) chars: &'a [char],
    pub(super) pos: usize,
    /// How many substitutions enclose this text.
    pub(super) depth: usize,
}

pub(super) fn unparsed<T>(why: impl Into<String>) -> Result<T, Unparsed> {
    Err(Unparsed(why.into()))
}

/// Parses `chars` as a whole script at `depth` substitutions in.
pub(super) fn parse_chars(chars: &[char], depth: usize) -> Result<Script, Unparsed> {
    if depth > MAX_DEPTH {
        return unparsed("substitutions nested too deeply");
    }
    let mut parser = Parser {
        chars,
        pos: 0,
        depth,
    };
    parser.script(None)
}

enum Token {
    Word(Box<RawWord>),
    Join(Join),
    /// A newline: a [`Join::Sequence`] that may also follow an operator.
    Newline,
    Redirect {
        op: &'static str,
        fd: Option<u32>,
    },
    End,
}

/// Redirection operators, longest first.
const REDIRECTS: &[&str] = &["<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">&", ">|", ">"];

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        (self.pos..)
            .zip(s.chars())
            .all(|(at, c)| self.chars.get(at) == Some(&c))
    }

    /// Parses until the end, or until `close` (for substitutions).
    pub(super) fn script(&mut self, close: Option<char>) -> Result<Script, Unparsed> {
        let mut script = Script::default();
        let mut current = SimpleCommand::default();
        loop {
            self.skip_blanks()?;
            if let Some(c) = close
                && self.peek() == Some(c)
            {
                self.pos += 1;
                break;
            }
            match self.token()? {
                Token::End => {
                    if close.is_some() {
                        return unparsed("an unterminated substitution");
                    }
                    break;
                }
                Token::Word(raw) => self.add_word(&mut current, *raw)?,
                Token::Redirect { op, fd } => {
                    if op == "<<" || op == "<<-" {
                        return unparsed("a here-document");
                    }
                    self.skip_blanks()?;
                    match self.token()? {
                        Token::Word(target) => current.redirects.push(Redirect {
                            op: op.into(),
                            fd,
                            target: target.word,
                        }),
                        Token::Join(_) | Token::Newline | Token::Redirect { .. } | Token::End => {
                            return unparsed(format!("a redirection '{op}' without a target"));
                        }
                    }
                }
                Token::Newline => {
                    // A blank line, or a newline after `|`, `&&`, `||`: bash
                    // reads on.
                    if current != SimpleCommand::default() {
                        script.commands.push(std::mem::take(&mut current));
                        script.joins.push(Join::Sequence);
                    }
                }
                Token::Join(join) => {
                    if current == SimpleCommand::default() {
                        return unparsed("an operator without a command before it");
                    }
                    script.commands.push(std::mem::take(&mut current));
                    script.joins.push(join);
                }
            }
        }
        if current != SimpleCommand::default() {
            script.commands.push(current);
        } else if matches!(script.joins.last(), Some(Join::Pipe | Join::And | Join::Or)) {
            return unparsed("an operator without a command after it");
        }
        Ok(script)
    }

    fn add_word(&self, current: &mut SimpleCommand, raw: RawWord) -> Result<(), Unparsed> {
        if current.words.is_empty() {
            if current.assignments.is_empty()
                && raw.word.quoted_from.is_none()
                && KEYWORDS.contains(&raw.word.text.as_str())
            {
                return unparsed(format!("the shell keyword '{}'", raw.word.text));
            }
            if let Some(Assignment { name, value }) = raw.assignment {
                current.assignments.push((name, value));
                return Ok(());
            }
        }
        current.words.push(raw.word);
        Ok(())
    }

    /// Skips blanks, a comment, and a backslash-newline that follows a blank
    /// (bash removes it; anywhere else it could join two tokens into one,
    /// so it is refused).
    pub(super) fn skip_blanks(&mut self) -> Result<(), Unparsed> {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\\' if self.peek_at(1) == Some('\n') => {
                    let after_blank = self.pos == 0
                        || matches!(self.chars.get(self.pos - 1), Some(' ' | '\t' | '\n'));
                    if !after_blank {
                        return unparsed("a line continuation (backslash-newline) inside a word");
                    }
                    self.pos += 2;
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        Ok(())
    }

    fn token(&mut self) -> Result<Token, Unparsed> {
        let Some(c) = self.peek() else {
            return Ok(Token::End);
        };
        match c {
            '\n' => {
                self.pos += 1;
                Ok(Token::Newline)
            }
            ';' => {
                if matches!(self.peek_at(1), Some(';' | '&')) {
                    return unparsed("a case terminator");
                }
                self.pos += 1;
                Ok(Token::Join(Join::Sequence))
            }
            '|' => {
                let join = match self.peek_at(1) {
                    Some('|') => Join::Or,
                    _ => Join::Pipe,
                };
                self.pos += if matches!(self.peek_at(1), Some('|' | '&')) {
                    2
                } else {
                    1
                };
                Ok(Token::Join(join))
            }
            '&' => {
                if self.starts_with("&&") {
                    self.pos += 2;
                    Ok(Token::Join(Join::And))
                } else if self.starts_with("&>>") {
                    self.pos += 3;
                    Ok(Token::Redirect {
                        op: "&>>",
                        fd: None,
                    })
                } else if self.starts_with("&>") {
                    self.pos += 2;
                    Ok(Token::Redirect { op: "&>", fd: None })
                } else {
                    self.pos += 1;
                    Ok(Token::Join(Join::Background))
                }
            }
            '(' => unparsed("a subshell"),
            ')' => unparsed("an unmatched ')'"),
            '<' | '>' if self.peek_at(1) != Some('(') => Ok(self.redirect(None)),
            d if d.is_ascii_digit() => {
                // `2>` is a redirection of fd 2; `2` alone is a word, and so
                // is `2>(…)`, a process substitution glued to it.
                let mut end = self.pos;
                while self.chars.get(end).is_some_and(char::is_ascii_digit) {
                    end += 1;
                }
                if matches!(self.chars.get(end), Some('<' | '>'))
                    && self.chars.get(end + 1) != Some(&'(')
                {
                    let fd: String = self.chars[self.pos..end].iter().collect();
                    self.pos = end;
                    return Ok(self.redirect(fd.parse().ok()));
                }
                self.word_token()
            }
            _ => self.word_token(),
        }
    }

    fn word_token(&mut self) -> Result<Token, Unparsed> {
        let raw = self.word()?;
        // `{name}>file` opens a descriptor and assigns its number to `name`.
        if matches!(self.peek(), Some('<' | '>')) && raw.is_fd_variable() {
            return unparsed(format!(
                "'{}' before a redirection assigns a descriptor to a variable",
                raw.word.text
            ));
        }
        Ok(Token::Word(Box::new(raw)))
    }

    fn redirect(&mut self, fd: Option<u32>) -> Token {
        let op = REDIRECTS
            .iter()
            .copied()
            .find(|op| self.starts_with(op))
            .unwrap_or(">");
        self.pos += op.chars().count();
        Token::Redirect { op, fd }
    }
}
