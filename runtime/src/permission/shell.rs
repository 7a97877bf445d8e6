//! A conservative parser for the shell commands `bash` is given.
//!
//! It understands what decides whether a command can be proven harmless:
//! quoting (single, double, backslash), the list and pipe operators
//! (`|`, `|&`, `&&`, `||`, `;`, newline, `&`), redirections (with their fd
//! prefixes), leading variable assignments, parameter expansion, globs and
//! brace expansion, and command and process substitution (`$(…)`, backticks,
//! `<(…)`, `>(…)`), whose insides are parsed too so nothing hides in them.
//! Everything else a shell can do (subshells, `{ …; }` groups, `if`/`for`/
//! `case`, functions, here-documents, arithmetic) is reported as
//! [`Unparsed`]; callers treat that as "cannot prove anything".

use std::fmt;

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
    /// `NAME=value` words before the program.
    pub assignments: Vec<(String, Word)>,
    /// The program and its arguments.
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
}

/// A word after quote removal, and what the shell would still do to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The text with quotes removed and escapes resolved; expansions are
    /// kept as written (`$HOME`).
    pub text: String,
    /// It contains a parameter expansion (`$x`, `${x}`), quoted or not, so
    /// its final value is unknown.
    pub expands: bool,
    /// It contains an unquoted glob (`*`, `?`, `[`) or brace expansion, so
    /// it may become several words, some starting with `-`.
    pub globs: bool,
    /// Commands substituted into it (`$(…)`, backticks, `<(…)`, `>(…)`).
    pub substitutions: Vec<Script>,
    /// Where in `text` the first quoted or escaped part began, if any: a
    /// quoted word is never a keyword, and `NAME=` must be unquoted to be an
    /// assignment.
    pub quoted_from: Option<usize>,
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
    /// (`2>&1`, `>&2`), or only discards output (`> /dev/null`).
    pub fn is_harmless(&self) -> bool {
        let plain_target = !self.target.expands && self.target.substitutions.is_empty();
        match self.op.as_str() {
            "<" | "<<<" => plain_target,
            ">&" | "<&" => {
                plain_target
                    && self
                        .target
                        .text
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '-')
            }
            ">" | ">>" | "&>" | "&>>" | ">|" => plain_target && self.target.text == "/dev/null",
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
            let words = command
                .words
                .iter()
                .chain(command.assignments.iter().map(|(_, w)| w))
                .chain(command.redirects.iter().map(|r| &r.target));
            for word in words {
                for inner in &word.substitutions {
                    inner.collect(out);
                }
            }
        }
    }

    /// Whether any command substitution or process substitution occurs.
    pub fn has_substitution(&self) -> bool {
        self.commands.iter().any(|c| {
            c.words
                .iter()
                .chain(c.assignments.iter().map(|(_, w)| w))
                .chain(c.redirects.iter().map(|r| &r.target))
                .any(|w| !w.substitutions.is_empty())
        })
    }
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "{", "}", "[[", "]]", "!", "time", "coproc",
];

/// Parses a command line.
pub fn parse(src: &str) -> Result<Script, Unparsed> {
    let mut parser = Parser {
        chars: src.chars().collect(),
        pos: 0,
    };
    let script = parser.script(None)?;
    Ok(script)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

enum Token {
    Word(Word),
    Join(Join),
    Redirect { op: String, fd: Option<u32> },
    End,
}

fn unparsed<T>(why: impl Into<String>) -> Result<T, Unparsed> {
    Err(Unparsed(why.into()))
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Parses until the end, or until `close` (for substitutions).
    fn script(&mut self, close: Option<char>) -> Result<Script, Unparsed> {
        let mut script = Script::default();
        let mut current = SimpleCommand::default();
        loop {
            self.skip_blanks();
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
                Token::Word(word) => {
                    let at_start = current.words.is_empty();
                    if at_start
                        && current.assignments.is_empty()
                        && word.quoted_from.is_none()
                        && KEYWORDS.contains(&word.text.as_str())
                    {
                        return unparsed(format!("the shell keyword '{}'", word.text));
                    }
                    match assignment(&word) {
                        Some((name, value)) if at_start => current.assignments.push((name, value)),
                        _ => current.words.push(word),
                    }
                }
                Token::Redirect { op, fd } => {
                    self.skip_blanks();
                    match self.token()? {
                        Token::Word(target) => current.redirects.push(Redirect { op, fd, target }),
                        _ => return unparsed(format!("a redirection '{op}' without a target")),
                    }
                }
                Token::Join(join) => {
                    if current == SimpleCommand::default() {
                        // `;` after `&`, or a blank line: nothing to join.
                        if join == Join::Sequence {
                            continue;
                        }
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

    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || (c == '\\' && self.peek_at(1) == Some('\n')) {
                self.pos += if c == '\\' { 2 } else { 1 };
            } else if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn token(&mut self) -> Result<Token, Unparsed> {
        let Some(c) = self.peek() else {
            return Ok(Token::End);
        };
        let two: String = self.chars[self.pos..].iter().take(3).collect();
        match c {
            '\n' | ';' => {
                if two.starts_with(";;") {
                    return unparsed("a case terminator ';;'");
                }
                self.pos += 1;
                Ok(Token::Join(Join::Sequence))
            }
            '|' => {
                if two.starts_with("||") {
                    self.pos += 2;
                    Ok(Token::Join(Join::Or))
                } else {
                    self.pos += if two.starts_with("|&") { 2 } else { 1 };
                    Ok(Token::Join(Join::Pipe))
                }
            }
            '&' => {
                if two.starts_with("&&") {
                    self.pos += 2;
                    Ok(Token::Join(Join::And))
                } else if two.starts_with("&>") {
                    let op = if two.starts_with("&>>") { "&>>" } else { "&>" };
                    self.pos += op.len();
                    Ok(Token::Redirect {
                        op: op.into(),
                        fd: None,
                    })
                } else {
                    self.pos += 1;
                    Ok(Token::Join(Join::Background))
                }
            }
            '(' | ')' => unparsed("a subshell"),
            '<' | '>' => {
                if self.peek_at(1) == Some('(') {
                    return self.word().map(Token::Word);
                }
                self.redirect(None)
            }
            d if d.is_ascii_digit() => {
                // `2>` is a redirection of fd 2; `2` alone is a word.
                let mut end = self.pos;
                while self.chars.get(end).is_some_and(char::is_ascii_digit) {
                    end += 1;
                }
                if matches!(self.chars.get(end), Some('<' | '>'))
                    && self.chars.get(end + 1) != Some(&'(')
                {
                    let fd: String = self.chars[self.pos..end].iter().collect();
                    self.pos = end;
                    return self.redirect(fd.parse().ok());
                }
                self.word().map(Token::Word)
            }
            _ => self.word().map(Token::Word),
        }
    }

    fn redirect(&mut self, fd: Option<u32>) -> Result<Token, Unparsed> {
        let rest: String = self.chars[self.pos..].iter().take(3).collect();
        let op = ["<<<", "<<-", ">>", "<<", ">&", "<&", ">|", "<>", ">", "<"]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .unwrap_or(">");
        if op == "<<" || op == "<<-" {
            return unparsed("a here-document");
        }
        self.pos += op.len();
        Ok(Token::Redirect { op: op.into(), fd })
    }

    /// One word, up to an unquoted blank or operator.
    fn word(&mut self) -> Result<Word, Unparsed> {
        let mut word = Word::default();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '|' | '&' | ')' => break,
                '(' => return unparsed("a subshell or function definition"),
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    let inner = self.script(Some(')'))?;
                    word.substitutions.push(inner);
                    word.text.push_str("<(…)");
                }
                '<' | '>' => break,
                '\'' => {
                    word.quoted_from.get_or_insert(word.text.len());
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => return unparsed("an unterminated single quote"),
                            Some('\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(ch) => {
                                word.text.push(ch);
                                self.pos += 1;
                            }
                        }
                    }
                }
                '"' => {
                    word.quoted_from.get_or_insert(word.text.len());
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => return unparsed("an unterminated double quote"),
                            Some('"') => {
                                self.pos += 1;
                                break;
                            }
                            Some('\\') => {
                                match self.peek_at(1) {
                                    Some(ch @ ('$' | '`' | '"' | '\\')) => word.text.push(ch),
                                    Some('\n') => {}
                                    Some(ch) => {
                                        word.text.push('\\');
                                        word.text.push(ch);
                                    }
                                    None => return unparsed("an unterminated double quote"),
                                }
                                self.pos += 2;
                            }
                            Some('$') => self.dollar(&mut word)?,
                            Some('`') => self.backtick(&mut word)?,
                            Some(ch) => {
                                word.text.push(ch);
                                self.pos += 1;
                            }
                        }
                    }
                }
                '\\' => {
                    word.quoted_from.get_or_insert(word.text.len());
                    match self.peek_at(1) {
                        Some('\n') => {}
                        Some(ch) => word.text.push(ch),
                        None => return unparsed("a trailing backslash"),
                    }
                    self.pos += 2;
                }
                '$' => self.dollar(&mut word)?,
                '`' => self.backtick(&mut word)?,
                '*' | '?' | '[' => {
                    word.globs = true;
                    word.text.push(c);
                    self.pos += 1;
                }
                '{' => {
                    if self.brace_expands() {
                        word.globs = true;
                    }
                    word.text.push(c);
                    self.pos += 1;
                }
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        if word.text.is_empty() && word.quoted_from.is_none() && word.substitutions.is_empty() {
            return unparsed("an empty word");
        }
        Ok(word)
    }

    /// `$…`: a parameter expansion or a command substitution.
    fn dollar(&mut self, word: &mut Word) -> Result<(), Unparsed> {
        match self.peek_at(1) {
            Some('(') if self.peek_at(2) == Some('(') => unparsed("an arithmetic expansion"),
            Some('(') => {
                self.pos += 2;
                let inner = self.script(Some(')'))?;
                word.substitutions.push(inner);
                word.text.push_str("$(…)");
                Ok(())
            }
            Some('{') => {
                word.expands = true;
                while let Some(c) = self.peek() {
                    word.text.push(c);
                    self.pos += 1;
                    if c == '}' {
                        return Ok(());
                    }
                }
                unparsed("an unterminated ${…}")
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                word.expands = true;
                word.text.push('$');
                self.pos += 1;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        word.text.push(self.chars[self.pos]);
                        self.pos += 1;
                    }
                } else {
                    word.text.push(c);
                    self.pos += 1;
                }
                Ok(())
            }
            Some('\'') => unparsed("an ANSI-C quoted string $'…'"),
            _ => {
                // A lone `$` is literal.
                word.text.push('$');
                self.pos += 1;
                Ok(())
            }
        }
    }

    /// A backtick substitution: its inside is parsed as a script.
    fn backtick(&mut self, word: &mut Word) -> Result<(), Unparsed> {
        let start = self.pos + 1;
        let mut end = start;
        while self.chars.get(end).is_some_and(|&c| c != '`') {
            if self.chars[end] == '\\' {
                end += 1;
            }
            end += 1;
        }
        if end >= self.chars.len() {
            return unparsed("an unterminated backtick");
        }
        let inner: String = self.chars[start..end].iter().collect();
        word.substitutions.push(parse(&inner)?);
        word.text.push_str("`…`");
        self.pos = end + 1;
        Ok(())
    }

    /// Whether the `{` at the cursor starts a brace expansion (`{a,b}`, `{1..3}`).
    fn brace_expands(&self) -> bool {
        let mut depth = 0;
        for (i, &c) in self.chars[self.pos..].iter().enumerate() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let inside: String =
                            self.chars[self.pos + 1..self.pos + i].iter().collect();
                        return inside.contains(',') || inside.contains("..");
                    }
                }
                ' ' | '\t' | '\n' | ';' | '|' | '&' | '\'' | '"' => return false,
                _ => {}
            }
        }
        false
    }
}

/// `NAME=value` as an assignment, when the word is one.
fn assignment(word: &Word) -> Option<(String, Word)> {
    let (name, value) = word.text.split_once('=')?;
    if word.quoted_from.is_some_and(|q| q <= name.len()) {
        return None;
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    Some((
        name.to_string(),
        Word {
            text: value.to_string(),
            quoted_from: word.quoted_from.map(|q| q - name.len() - 1),
            ..word.clone()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each simple command as its words, or the reason it did not parse.
    fn shape(src: &str) -> Result<Vec<Vec<String>>, String> {
        parse(src)
            .map(|s| {
                s.all_commands()
                    .iter()
                    .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
                    .collect()
            })
            .map_err(|e| e.0)
    }

    fn check(src: &str, expected: &[&[&str]]) {
        let expected: Vec<Vec<String>> = expected
            .iter()
            .map(|c| c.iter().map(|w| w.to_string()).collect())
            .collect();
        assert_eq!(shape(src), Ok(expected), "{src}");
    }

    #[test]
    fn words_quotes_and_operators() {
        check("ls -la", &[&["ls", "-la"]]);
        check("echo 'a | b' \"c && d\"", &[&["echo", "a | b", "c && d"]]);
        check(
            "a|b && c || d; e & f",
            &[&["a"], &["b"], &["c"], &["d"], &["e"], &["f"]],
        );
        check("echo a\\ b", &[&["echo", "a b"]]);
        check(
            "echo $(rm x) `touch y`",
            &[&["echo", "$(…)", "`…`"], &["rm", "x"], &["touch", "y"]],
        );
        check("cat <(git log)", &[&["cat", "<(…)"], &["git", "log"]]);
        check("FOO=1 git push", &[&["git", "push"]]);
        check("grep -c x f 2>/dev/null", &[&["grep", "-c", "x", "f"]]);
        check("ls # a comment; rm -rf /", &[&["ls"]]);
    }

    #[test]
    fn joins_redirects_and_assignments_are_recorded() {
        let script = parse("FOO=1 BAR=\"x y\" cmd > out 2>&1 &").expect("parses");
        let command = &script.commands[0];
        let names: Vec<&str> = command
            .assignments
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["FOO", "BAR"]);
        let ops: Vec<(&str, Option<u32>, &str)> = command
            .redirects
            .iter()
            .map(|r| (r.op.as_str(), r.fd, r.target.text.as_str()))
            .collect();
        assert_eq!(ops, [(">", None, "out"), (">&", Some(2), "1")]);
        assert_eq!(script.joins, [Join::Background]);
        assert!(!command.redirects[0].is_harmless());
        assert!(command.redirects[1].is_harmless());
    }

    #[test]
    fn what_cannot_be_proven_is_unparsed() {
        for src in [
            "(cd x && rm y)",
            "if true; then rm x; fi",
            "cat <<EOF\nx\nEOF",
            "echo 'open",
            "echo $((1+2))",
            "f() { rm x; }",
            "a &&",
            "| b",
        ] {
            assert!(parse(src).is_err(), "{src} parsed");
        }
        assert!(parse("'if' x").is_ok(), "a quoted keyword is a word");
    }

    #[test]
    fn expansions_and_globs_are_flagged() {
        let script = parse("find $DIR *.rs {a,b} \"$x\" '$y'").expect("parses");
        let flags: Vec<(bool, bool)> = script.commands[0]
            .words
            .iter()
            .map(|w| (w.expands, w.globs))
            .collect();
        assert_eq!(
            flags,
            [
                (false, false),
                (true, false),
                (false, true),
                (false, true),
                (true, false),
                (false, false)
            ]
        );
    }
}
