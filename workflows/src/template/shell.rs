//! Where a reference sits in a check command's shell text, and the
//! parameter expansion that reads its value there.
//!
//! A check's value is never written into its command: the check runs with
//! the value in an environment variable, and the reference becomes an
//! expansion of that variable. Bash does not parse what an expansion
//! yields, so a value cannot add a command in any quoting; the quoting
//! only decides whether the value stays one word. [`Lexer`] follows the
//! author's literal text far enough to know it: unquoted (also inside
//! `$(…)` and backticks), inside `"…"`, `'…'` or `$'…'`, in a `#` comment,
//! and whether a backslash is waiting to escape what comes next.
//! Here-documents are not followed: a reference in one reads as unquoted.

/// The quoting a reference sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// Unquoted: top level, or in `$(…)` or backticks.
    Bare,
    /// Inside `"…"` (or `$"…"`).
    Double,
    /// Inside `'…'`.
    Single,
    /// Inside `$'…'`, where a backslash escapes.
    AnsiC,
    /// In a `#` comment, to the end of the line.
    Comment,
}

/// What closes unquoted code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Nothing: the top level.
    Never,
    /// A `)`: code in `$(…)`.
    Paren,
    /// A backtick.
    Backtick,
}

/// One level of nesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Unquoted code, closed by `close`, with `parens` `(` open in it.
    Code { close: Close, parens: u32 },
    /// `"…"`.
    Double,
    /// `'…'`.
    Single,
    /// `$'…'`.
    AnsiC,
    /// A `#` comment.
    Comment,
}

/// Follows shell text a character at a time.
#[derive(Debug, Clone)]
pub struct Lexer {
    /// The open levels, the top level first; never empty.
    stack: Vec<Frame>,
    /// A backslash escapes the next character.
    escaped: bool,
    /// The last character was an unescaped `$`.
    dollar: bool,
    /// The next character starts a word (where `#` starts a comment).
    word_start: bool,
}

impl Default for Lexer {
    fn default() -> Self {
        Self {
            stack: vec![Frame::Code {
                close: Close::Never,
                parens: 0,
            }],
            escaped: false,
            dollar: false,
            word_start: true,
        }
    }
}

impl Lexer {
    /// Follows `text`.
    pub fn feed(&mut self, text: &str) {
        for c in text.chars() {
            self.step(c);
        }
    }

    /// The quoting at this point, and whether a backslash waits.
    pub fn quoting(&self) -> (Quoting, bool) {
        let quoting = match self.top() {
            Frame::Code { .. } => Quoting::Bare,
            Frame::Double => Quoting::Double,
            Frame::Single => Quoting::Single,
            Frame::AnsiC => Quoting::AnsiC,
            Frame::Comment => Quoting::Comment,
        };
        (quoting, self.escaped)
    }

    /// The expansion of `var` for a reference at this point, which then
    /// counts as part of a word: it yields the value as it is, one word,
    /// and leaves the quoting as it found it.
    pub fn reference(&mut self, var: &str) -> String {
        let (quoting, escaped) = self.quoting();
        self.escaped = false;
        self.dollar = false;
        self.word_start = false;
        expansion(quoting, escaped, var)
    }

    fn top(&self) -> Frame {
        self.stack.last().copied().unwrap_or(Frame::Code {
            close: Close::Never,
            parens: 0,
        })
    }

    fn push(&mut self, frame: Frame) {
        self.stack.push(frame);
    }

    /// Closes the top level (the top level itself stays).
    fn pop(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }

    fn step(&mut self, c: char) {
        if std::mem::replace(&mut self.escaped, false) {
            self.dollar = false;
            self.word_start = false;
            return;
        }
        let dollar = std::mem::replace(&mut self.dollar, false);
        match self.top() {
            Frame::Single if c == '\'' => self.pop(),
            Frame::Single => {}
            Frame::Comment if c == '\n' => self.pop(),
            Frame::Comment => {}
            Frame::AnsiC => match c {
                '\\' => self.escaped = true,
                '\'' => self.pop(),
                _ => {}
            },
            Frame::Double => match c {
                '\\' => self.escaped = true,
                '"' => self.pop(),
                '`' => self.push(code(Close::Backtick)),
                '(' if dollar => self.push(code(Close::Paren)),
                '$' => self.dollar = true,
                _ => {}
            },
            Frame::Code { close, parens } => self.code(c, close, parens, dollar),
        }
        let separates = matches!(
            c,
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>'
        );
        self.word_start = separates && matches!(self.top(), Frame::Code { .. });
    }

    /// A character of unquoted code.
    fn code(&mut self, c: char, close: Close, parens: u32, dollar: bool) {
        match c {
            '\\' => self.escaped = true,
            '\'' if dollar => self.push(Frame::AnsiC),
            '\'' => self.push(Frame::Single),
            '"' => self.push(Frame::Double),
            '`' if close == Close::Backtick => self.pop(),
            '`' => self.push(code(Close::Backtick)),
            '(' if dollar => self.push(code(Close::Paren)),
            '(' => self.set_parens(parens + 1),
            ')' if parens > 0 => self.set_parens(parens - 1),
            ')' if close == Close::Paren => self.pop(),
            '#' if self.word_start => self.push(Frame::Comment),
            '$' => self.dollar = true,
            _ => {}
        }
    }

    fn set_parens(&mut self, n: u32) {
        if let Some(Frame::Code { parens, .. }) = self.stack.last_mut() {
            *parens = n;
        }
    }
}

fn code(close: Close) -> Frame {
    Frame::Code { close, parens: 0 }
}

/// The expansion of `var` in `quoting`; `escaped`: a backslash before it
/// waits to escape its first character.
///
/// Unquoted it is `"${VAR}"` (no splitting, no globbing); in `"…"` it is
/// `${VAR}`; in `'…'` the quote is closed, `"${VAR}"` put in and the quote
/// reopened; in `$'…'` likewise, reopened with `$'`. A waiting backslash
/// is spent harmlessly: on a newline (a line continuation, which bash
/// drops) unquoted and in `"…"`, on a second backslash in `$'…'`.
pub fn expansion(quoting: Quoting, escaped: bool, var: &str) -> String {
    let spent = match (quoting, escaped) {
        (Quoting::Bare | Quoting::Double, true) => "\n",
        (Quoting::AnsiC, true) => "\\",
        // A backslash escapes nothing in `'…'` or a comment: nothing to spend.
        (Quoting::Single | Quoting::Comment, true) | (_, false) => "",
    };
    let word = match quoting {
        Quoting::Bare => format!("\"${{{var}}}\""),
        Quoting::Double | Quoting::Comment => format!("${{{var}}}"),
        Quoting::Single => format!("'\"${{{var}}}\"'"),
        Quoting::AnsiC => format!("'\"${{{var}}}\"$'"),
    };
    format!("{spent}{word}")
}

#[cfg(test)]
mod tests;
