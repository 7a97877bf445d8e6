//! What validation reports: errors and warnings tied to a place in the
//! workflow's text, printed `FILE:LINE:COL: message`.

use std::fmt;
use std::ops::Range;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Nothing may start.
    Error,
    /// Worth a look; the run may start (overlapping write scopes).
    Warning,
}

/// One finding, at a byte range of the text when it has a place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Where in the text (bytes); `None` for the file as a whole.
    pub span: Option<Range<usize>>,
    /// What is wrong, naming the step and the field.
    pub message: String,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            span,
            message: message.into(),
        }
    }

    /// A warning at `span`.
    pub fn warning(span: Option<Range<usize>>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            span,
            message: message.into(),
        }
    }

    /// Whether it stops the run.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A workflow's text and the name it is shown by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file name as given, or a label (`workflow`) for a plan the model
    /// wrote.
    pub name: String,
    /// The TOML text.
    pub text: String,
    /// Whether positions mean anything to the reader: false for a plan
    /// given as JSON, whose TOML rendering the reader never saw.
    pub positions: bool,
}

impl Source {
    /// A file's text.
    pub fn file(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
            positions: true,
        }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or(&self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        (line, col)
    }

    /// A finding as printed: `FILE:LINE:COL: error: message`.
    pub fn render(&self, diagnostic: &Diagnostic) -> String {
        Rendered {
            source: self,
            diagnostic,
        }
        .to_string()
    }
}

struct Rendered<'a> {
    source: &'a Source,
    diagnostic: &'a Diagnostic,
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Rendered { source, diagnostic } = self;
        f.write_str(&source.name)?;
        if let (true, Some(span)) = (source.positions, &diagnostic.span) {
            let (line, col) = source.line_col(span.start);
            write!(f, ":{line}:{col}")?;
        }
        match diagnostic.severity {
            Severity::Error => f.write_str(": ")?,
            Severity::Warning => f.write_str(": warning: ")?,
        }
        f.write_str(&diagnostic.message)
    }
}

/// Every finding of a workflow that did not validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct Invalid {
    /// The text the findings point into.
    pub file: Source,
    /// The findings, errors and warnings, in the order of the text.
    pub diagnostics: Vec<Diagnostic>,
}

impl Invalid {
    /// One line per finding.
    pub fn render(&self) -> String {
        self.diagnostics
            .iter()
            .map(|d| self.file.render(d))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
