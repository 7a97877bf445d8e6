//! The word level: quoting, every `$` form, backticks, globs, braces and
//! tilde, read in one pass.

use super::brace;
use super::parser::{MAX_DEPTH, Parser, parse_chars, unparsed};
use super::{Script, Unparsed, Word};

/// A word as read, with the assignment it makes when it is one.
pub(super) struct RawWord {
    pub(super) word: Word,
    pub(super) assignment: Option<Assignment>,
    /// The text is exactly `{name}`, every character plain.
    fd_variable: bool,
}

impl RawWord {
    /// `{name}` right before a redirection operator: bash opens a
    /// descriptor and assigns its number to `name`.
    pub(super) fn is_fd_variable(&self) -> bool {
        self.fd_variable
    }
}

/// `NAME=value`, `NAME+=value` or `NAME[subscript]=value`.
pub(super) struct Assignment {
    pub(super) name: String,
    pub(super) value: Word,
}

/// A word being read: its text, and which characters of it are plain
/// (unquoted characters written as themselves), the only ones that can
/// start brace, tilde or glob expansion or make an assignment.
#[derive(Default)]
struct Builder {
    text: Vec<char>,
    plain: Vec<bool>,
    expands: bool,
    globs: bool,
    tilde: bool,
    substitutions: Vec<Script>,
    quoted_from: Option<usize>,
    /// Something other than plain characters occurred (quotes, escapes,
    /// expansions, substitutions).
    mixed: bool,
    opaque: Option<String>,
    fields: Option<Vec<String>>,
}

impl Builder {
    fn plain(&mut self, c: char) {
        match c {
            '*' | '?' | '[' => self.globs = true,
            '~' if self.text.is_empty() || matches!(self.last_plain(), Some('=' | ':')) => {
                self.tilde = true;
            }
            c if c.is_control() && c != '\t' => self.obscure("a control character"),
            _ => {}
        }
        self.text.push(c);
        self.plain.push(true);
    }

    fn last_plain(&self) -> Option<char> {
        match (self.text.last(), self.plain.last()) {
            (Some(&c), Some(true)) => Some(c),
            _ => None,
        }
    }

    /// A character that is quoted, escaped or produced by decoding.
    fn quoted(&mut self, c: char) {
        self.quoted_from.get_or_insert(self.text.len());
        if c.is_control() && c != '\t' && c != '\n' {
            self.obscure("a control character");
        }
        self.mixed = true;
        self.text.push(c);
        self.plain.push(false);
    }

    /// Text standing for an expansion or substitution, never plain.
    fn stand_in(&mut self, s: &str) {
        self.mixed = true;
        for c in s.chars() {
            self.text.push(c);
            self.plain.push(false);
        }
    }

    fn obscure(&mut self, why: &str) {
        self.opaque.get_or_insert_with(|| why.to_string());
    }

    fn finish(mut self) -> RawWord {
        let assignment_at = assignment_split(&self.text, &self.plain);
        self.braces();
        let fd_variable = self.text.len() > 2
            && self.text.first() == Some(&'{')
            && self.text.last() == Some(&'}')
            && self.plain.iter().all(|p| *p)
            && is_name(&self.text[1..self.text.len() - 1]);
        let text: String = self.text.iter().collect();
        // `quoted_from` counts characters while reading; the word says bytes.
        let bytes_to =
            |chars: usize| -> usize { self.text[..chars].iter().map(|c| c.len_utf8()).sum() };
        let quoted_from = self.quoted_from.map(bytes_to);
        let value_quoted_from = assignment_at.and_then(|(_, value_at, _)| {
            let quoted = self.quoted_from?;
            Some(bytes_to(quoted.max(value_at)) - bytes_to(value_at))
        });
        let word = Word {
            text,
            expands: self.expands,
            globs: self.globs,
            substitutions: self.substitutions,
            quoted_from,
            tilde: self.tilde,
            opaque: self.opaque,
            fields: self.fields,
        };
        let assignment = assignment_at.map(|(name_len, value_at, kind)| {
            let name: String = word.text.chars().take(name_len).collect();
            let value_text: String = word.text.chars().skip(value_at).collect();
            let mut value = Word {
                text: value_text,
                quoted_from: value_quoted_from,
                // No globbing or brace expansion in an assignment.
                globs: false,
                fields: None,
                ..word.clone()
            };
            if let Some(why) = kind {
                value.opaque.get_or_insert_with(|| why.to_string());
            }
            Assignment { name, value }
        });
        RawWord {
            word,
            assignment,
            fd_variable,
        }
    }

    /// Brace expansion: flags the word, lists its fields, and refuses one
    /// that mixes braces with quotes, escapes or expansions.
    fn braces(&mut self) {
        let Some(fields) = brace::expand(&self.text, &self.plain) else {
            return;
        };
        self.globs = true;
        if self.mixed {
            self.obscure("brace expansion in a word with quotes, escapes or expansions");
        }
        match fields {
            Some(mut fields) => {
                if fields.iter().any(|f| f.starts_with('~')) {
                    self.tilde = true;
                }
                // Unquoted empty words vanish (`{,a}` is `a`).
                if !self.mixed {
                    fields.retain(|f| !f.is_empty());
                }
                self.fields = Some(fields);
            }
            None => self.obscure("a brace expansion too large to list"),
        }
    }
}

/// Where an assignment word splits: the name's length, where the value
/// starts, and why the value is opaque (`+=` appends, a subscript is
/// evaluated as arithmetic).
fn assignment_split(text: &[char], plain: &[bool]) -> Option<(usize, usize, Option<&'static str>)> {
    let is_plain = |i: usize| plain.get(i).copied().unwrap_or(false);
    let mut end = 0;
    while end < text.len()
        && is_plain(end)
        && (text[end].is_ascii_alphanumeric() || text[end] == '_')
    {
        end += 1;
    }
    if end == 0 || text[0].is_ascii_digit() {
        return None;
    }
    match text.get(end) {
        Some('=') if is_plain(end) => Some((end, end + 1, None)),
        Some('+') if is_plain(end) && text.get(end + 1) == Some(&'=') && is_plain(end + 1) => {
            Some((end, end + 2, Some("`+=` appends to the variable")))
        }
        Some('[') if is_plain(end) => {
            // `NAME[…]=` or `NAME[…]+=`: the subscript is arithmetic.
            let close = (end + 1..text.len()).find(|&i| {
                text[i] == ']' && is_plain(i) && matches!(text.get(i + 1), Some('=' | '+'))
            })?;
            let value_at = if text.get(close + 1) == Some(&'=') {
                close + 2
            } else if text.get(close + 2) == Some(&'=') {
                close + 3
            } else {
                return None;
            };
            Some((
                end,
                value_at,
                Some("an array subscript is evaluated as arithmetic"),
            ))
        }
        _ => None,
    }
}

fn is_name(chars: &[char]) -> bool {
    chars
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == '_')
        && chars.iter().all(|c| c.is_ascii_alphanumeric() || *c == '_')
}

/// Where a `$` form that the reader scans rather than evaluates ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    /// `${…}`: the matching `}`, nested braces counted.
    Brace,
    /// `$((…))`: the matching `))`.
    Arith,
    /// `$[…]`: the matching `]`.
    Bracket,
}

impl Parser<'_> {
    /// One word, up to an unquoted blank or operator.
    pub(super) fn word(&mut self) -> Result<RawWord, Unparsed> {
        let mut b = Builder::default();
        let start = self.pos;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '|' | '&' | ')' => break,
                '(' => return unparsed("a subshell or function definition"),
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    let inner = self.nested_script()?;
                    b.substitutions.push(inner);
                    b.stand_in(if c == '<' { "<(…)" } else { ">(…)" });
                }
                '<' | '>' => break,
                '\'' => {
                    self.pos += 1;
                    b.quoted_from.get_or_insert(b.text.len());
                    b.mixed = true;
                    loop {
                        match self.peek() {
                            None => return unparsed("an unterminated single quote"),
                            Some('\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(ch) => {
                                b.quoted(ch);
                                self.pos += 1;
                            }
                        }
                    }
                }
                '"' => {
                    self.pos += 1;
                    b.quoted_from.get_or_insert(b.text.len());
                    b.mixed = true;
                    self.double_quoted(&mut b)?;
                }
                '\\' => match self.peek_at(1) {
                    Some('\n') => {
                        return unparsed("a line continuation (backslash-newline) inside a word");
                    }
                    Some(ch) => {
                        b.quoted(ch);
                        self.pos += 2;
                    }
                    None => return unparsed("a trailing backslash"),
                },
                '$' => self.dollar(&mut b, false)?,
                '`' => self.backtick(&mut b, false)?,
                _ => {
                    b.plain(c);
                    self.pos += 1;
                }
            }
        }
        if self.pos == start {
            return unparsed("an empty word");
        }
        Ok(b.finish())
    }

    /// The inside of `"…"`, the opening quote already read.
    fn double_quoted(&mut self, b: &mut Builder) -> Result<(), Unparsed> {
        loop {
            match self.peek() {
                None => return unparsed("an unterminated double quote"),
                Some('"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some(ch @ ('$' | '`' | '"' | '\\')) => b.quoted(ch),
                        Some('\n') => {
                            return unparsed(
                                "a line continuation (backslash-newline) inside a word",
                            );
                        }
                        Some(ch) => {
                            b.quoted('\\');
                            b.quoted(ch);
                        }
                        None => return unparsed("an unterminated double quote"),
                    }
                    self.pos += 2;
                }
                Some('$') => self.dollar(b, true)?,
                Some('`') => self.backtick(b, true)?,
                Some(ch) => {
                    b.quoted(ch);
                    self.pos += 1;
                }
            }
        }
    }

    /// `$…` at the cursor: an expansion, a substitution, or a plain `$`.
    fn dollar(&mut self, b: &mut Builder, in_quotes: bool) -> Result<(), Unparsed> {
        let start = self.pos;
        match self.peek_at(1) {
            Some('(') if self.peek_at(2) == Some('(') => {
                self.pos += 3;
                self.scan(b, Close::Arith, in_quotes)?;
                b.expands = true;
                self.stand_in_source(b, start);
                b.obscure("arithmetic expansion evaluates variables as expressions, which can run commands");
            }
            Some('(') => {
                self.pos += 2;
                let inner = self.nested_script()?;
                b.substitutions.push(inner);
                b.stand_in("$(…)");
            }
            Some('[') => {
                self.pos += 2;
                self.scan(b, Close::Bracket, in_quotes)?;
                b.expands = true;
                self.stand_in_source(b, start);
                b.obscure("arithmetic expansion $[…] evaluates variables as expressions, which can run commands");
            }
            Some('{') => {
                self.pos += 2;
                let plain = self.plain_parameter();
                self.scan(b, Close::Brace, in_quotes)?;
                b.expands = true;
                self.stand_in_source(b, start);
                if !plain {
                    b.obscure("a parameter expansion with an operator");
                }
            }
            Some('\'') if !in_quotes => {
                self.pos += 2;
                self.ansi_c(b)?;
                b.obscure("ANSI-C quoting $'…'");
            }
            Some('"') if !in_quotes => {
                self.pos += 2;
                b.quoted_from.get_or_insert(b.text.len());
                b.mixed = true;
                self.double_quoted(b)?;
                b.obscure("locale quoting $\"…\", which bash may translate");
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.pos += 1;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                b.expands = true;
                self.stand_in_source(b, start);
            }
            // bash's parser reads `$$(` as `$` and a command substitution,
            // its expander as `$$` and a `(`: where the word ends is not
            // known.
            Some('$') if self.peek_at(2) == Some('(') => {
                return unparsed("'$$(', which bash reads as a command substitution after '$'");
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 2;
                b.expands = true;
                self.stand_in_source(b, start);
            }
            _ => {
                // A `$` before anything else is itself.
                if in_quotes {
                    b.quoted('$');
                } else {
                    b.plain('$');
                }
                self.pos += 1;
            }
        }
        Ok(())
    }

    fn stand_in_source(&self, b: &mut Builder, start: usize) {
        let source: String = self.chars[start..self.pos].iter().collect();
        b.stand_in(&source);
    }

    /// Whether `${` at the cursor holds only a name, a number or a special
    /// parameter and its `}`.
    fn plain_parameter(&self) -> bool {
        let rest = &self.chars[self.pos..];
        let len = rest
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
            .count();
        let body = if len == 0 {
            usize::from(rest.first().is_some_and(|c| "@*#?$!-".contains(*c)))
        } else {
            len
        };
        let name = &rest[..body];
        let valid = match name.first() {
            Some(c) if c.is_ascii_digit() => name.iter().all(char::is_ascii_digit),
            Some(_) => true,
            None => false,
        };
        valid && rest.get(body) == Some(&'}')
    }

    /// Scans an expansion the reader does not evaluate up to its end,
    /// parsing the substitutions inside it.
    fn scan(&mut self, b: &mut Builder, close: Close, in_quotes: bool) -> Result<(), Unparsed> {
        if self.depth + 1 > MAX_DEPTH {
            return unparsed("expansions nested too deeply");
        }
        self.depth += 1;
        let scanned = self.scan_to(b, close, in_quotes);
        self.depth -= 1;
        scanned
    }

    fn scan_to(&mut self, b: &mut Builder, close: Close, in_quotes: bool) -> Result<(), Unparsed> {
        let mut depth = 0usize;
        loop {
            let Some(c) = self.peek() else {
                return unparsed("an unterminated expansion");
            };
            match c {
                '\\' => {
                    if self.peek_at(1) == Some('\n') {
                        return unparsed("a line continuation (backslash-newline) inside a word");
                    }
                    self.pos += 2;
                }
                '\'' if !(in_quotes && close != Close::Brace) => {
                    self.pos += 1;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.pos += 1;
                    }
                    if self.peek().is_none() {
                        return unparsed("an unterminated single quote");
                    }
                    self.pos += 1;
                }
                '"' => {
                    self.pos += 1;
                    let mut inner = Builder::default();
                    self.double_quoted(&mut inner)?;
                    b.substitutions.append(&mut inner.substitutions);
                }
                '$' => {
                    let mut inner = Builder::default();
                    self.dollar(&mut inner, in_quotes)?;
                    b.substitutions.append(&mut inner.substitutions);
                }
                '`' => {
                    let mut inner = Builder::default();
                    self.backtick(&mut inner, in_quotes)?;
                    b.substitutions.append(&mut inner.substitutions);
                }
                _ => {
                    self.pos += 1;
                    match (close, c) {
                        (Close::Brace, '{') | (Close::Arith, '(') | (Close::Bracket, '[') => {
                            depth += 1;
                        }
                        (Close::Brace, '}') | (Close::Bracket, ']') => {
                            if depth == 0 {
                                return Ok(());
                            }
                            depth -= 1;
                        }
                        (Close::Arith, ')') => {
                            if depth > 0 {
                                depth -= 1;
                            } else if self.peek() == Some(')') {
                                self.pos += 1;
                                return Ok(());
                            } else {
                                return unparsed(
                                    "'$((' that is not closed by '))': arithmetic or a subshell",
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// `$'…'`, the `$'` already read: decoded as bash does, best effort.
    fn ansi_c(&mut self, b: &mut Builder) -> Result<(), Unparsed> {
        b.quoted_from.get_or_insert(b.text.len());
        b.mixed = true;
        loop {
            match self.peek() {
                None => return unparsed("an unterminated $'…'"),
                Some('\'') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some('\\') => {
                    let Some(e) = self.peek_at(1) else {
                        return unparsed("an unterminated $'…'");
                    };
                    self.pos += 2;
                    let decoded = match e {
                        'a' => Some('\x07'),
                        'b' => Some('\x08'),
                        'e' | 'E' => Some('\x1b'),
                        'f' => Some('\x0c'),
                        'n' => Some('\n'),
                        'r' => Some('\r'),
                        't' => Some('\t'),
                        'v' => Some('\x0b'),
                        '\\' | '\'' | '"' | '?' => Some(e),
                        'x' => self.digits(16, 2).and_then(char::from_u32),
                        'u' => self.digits(16, 4).and_then(char::from_u32),
                        'U' => self.digits(16, 8).and_then(char::from_u32),
                        '0'..='7' => {
                            self.pos -= 1;
                            self.digits(8, 3).and_then(char::from_u32)
                        }
                        'c' => {
                            let c = self.peek();
                            self.pos += 1;
                            c.map(|c| char::from((c as u8) & 0x1f))
                        }
                        _ => None,
                    };
                    match decoded {
                        Some(c) => b.quoted(c),
                        None => {
                            b.quoted('\\');
                            b.quoted(e);
                        }
                    }
                }
                Some(c) => {
                    b.quoted(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// Up to `max` digits in `radix` at the cursor, as a number.
    fn digits(&mut self, radix: u32, max: usize) -> Option<u32> {
        let mut value: Option<u32> = None;
        for _ in 0..max {
            let Some(d) = self.peek().and_then(|c| c.to_digit(radix)) else {
                break;
            };
            value = Some(value.unwrap_or(0) * radix + d);
            self.pos += 1;
        }
        value
    }

    /// A backtick substitution at the cursor: its inside, unescaped as bash
    /// does, is parsed as a script.
    fn backtick(&mut self, b: &mut Builder, in_quotes: bool) -> Result<(), Unparsed> {
        let mut inner: Vec<char> = Vec::new();
        let mut at = self.pos + 1;
        loop {
            match self.chars.get(at) {
                None => return unparsed("an unterminated backtick"),
                Some('`') => break,
                Some('\\') => {
                    let Some(&next) = self.chars.get(at + 1) else {
                        return unparsed("an unterminated backtick");
                    };
                    if !(matches!(next, '$' | '`' | '\\') || (in_quotes && next == '"')) {
                        inner.push('\\');
                    }
                    inner.push(next);
                    at += 2;
                }
                Some(&c) => {
                    inner.push(c);
                    at += 1;
                }
            }
        }
        self.pos = at + 1;
        let script = parse_chars(&inner, self.depth + 1)?;
        b.substitutions.push(script);
        b.stand_in("`…`");
        Ok(())
    }

    /// The script of a `$(…)` or `<(…)`, the opening already read.
    fn nested_script(&mut self) -> Result<Script, Unparsed> {
        if self.depth + 1 > MAX_DEPTH {
            return unparsed("substitutions nested too deeply");
        }
        self.depth += 1;
        let script = self.script(Some(')'));
        self.depth -= 1;
        script
    }
}
