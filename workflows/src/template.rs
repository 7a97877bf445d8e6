//! Prompt, scope and check templates: text with `{{…}}` references.
//!
//! A reference is one of `vars.NAME`, `item`, `index`,
//! `steps.NAME.output` (a single step's final answer) or
//! `steps.NAME.outputs` (a fan-out step's answers, a JSON array in item
//! order). Spaces inside the braces are allowed. Anything else between
//! `{{` and `}}` is an error found at validation, with its place.
//!
//! A check command never holds a value as text: it runs with each value
//! in an environment variable ([`ITEM_VAR`], [`INDEX_VAR`],
//! [`var_env_names`]), and [`Template::render_shell`] writes each
//! reference as an expansion of its variable, quoted for where it stands
//! ([`shell`]). Bash does not parse what an expansion yields, so an item
//! cannot add a command of its own in any quoting.

pub mod shell;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

/// The variable a check reads `{{item}}` from.
pub const ITEM_VAR: &str = "CADRE_ITEM";

/// The variable a check reads `{{index}}` from.
pub const INDEX_VAR: &str = "CADRE_INDEX";

/// What a check's variable for `{{vars.NAME}}` starts with.
pub const VAR_PREFIX: &str = "CADRE_VAR_";

/// What a `{{…}}` names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ref {
    /// `{{vars.NAME}}`.
    Var(String),
    /// `{{item}}`: the fan-out item (a string as is, anything else as JSON).
    Item,
    /// `{{index}}`: the fan-out item's index, from 0.
    Index,
    /// `{{steps.NAME.output}}`.
    Output(String),
    /// `{{steps.NAME.outputs}}`.
    Outputs(String),
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ref::Var(name) => write!(f, "{{{{vars.{name}}}}}"),
            Ref::Item => f.write_str("{{item}}"),
            Ref::Index => f.write_str("{{index}}"),
            Ref::Output(step) => write!(f, "{{{{steps.{step}.output}}}}"),
            Ref::Outputs(step) => write!(f, "{{{{steps.{step}.outputs}}}}"),
        }
    }
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text.
    Text(String),
    /// A reference, with its byte range in the template's text.
    Ref(Ref, Range<usize>),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    /// Its pieces, in order.
    pub parts: Vec<Part>,
}

/// A `{{…}}` that is not a reference, at its byte range in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRef {
    /// Where in the template text.
    pub range: Range<usize>,
    /// What is wrong.
    pub message: String,
}

impl Template {
    /// Parses `text`; every bad reference is reported, not only the first.
    pub fn parse(text: &str) -> Result<Self, Vec<BadRef>> {
        let mut parts = Vec::new();
        let mut bad = Vec::new();
        let mut rest = 0;
        while let Some(open) = text[rest..].find("{{").map(|i| rest + i) {
            if open > rest {
                parts.push(Part::Text(text[rest..open].to_string()));
            }
            let Some(close) = text[open + 2..].find("}}").map(|i| open + 2 + i) else {
                bad.push(BadRef {
                    range: open..text.len(),
                    message: "`{{` is never closed with `}}`".into(),
                });
                rest = text.len();
                break;
            };
            let range = open..close + 2;
            match parse_ref(text[open + 2..close].trim()) {
                Ok(r) => parts.push(Part::Ref(r, range)),
                Err(message) => bad.push(BadRef { range, message }),
            }
            rest = close + 2;
        }
        if rest < text.len() {
            parts.push(Part::Text(text[rest..].to_string()));
        }
        if bad.is_empty() {
            Ok(Self { parts })
        } else {
            Err(bad)
        }
    }

    /// The references, with their ranges.
    pub fn refs(&self) -> impl Iterator<Item = (&Ref, &Range<usize>)> {
        self.parts.iter().filter_map(|p| match p {
            Part::Ref(r, range) => Some((r, range)),
            Part::Text(_) => None,
        })
    }

    /// Whether the template is exactly one reference and nothing else.
    pub fn single_ref(&self) -> Option<&Ref> {
        match self.parts.as_slice() {
            [Part::Ref(r, _)] => Some(r),
            [] | [Part::Text(_)] | [_, _, ..] => None,
        }
    }

    /// The text with every reference replaced by `lookup`'s answer.
    pub fn render(&self, mut lookup: impl FnMut(&Ref) -> String) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Ref(r, _) => out.push_str(&lookup(r)),
            }
        }
        out
    }

    /// The text as a shell command in which each reference is an
    /// expansion of the environment variable `var` names for it, quoted
    /// for where the reference stands in the text ([`shell::Lexer`]):
    /// `"${CADRE_ITEM}"` unquoted, `${CADRE_ITEM}` inside `"…"`,
    /// `'"${CADRE_ITEM}"'` inside `'…'`. The command must run with those
    /// variables set; a value never becomes part of its text.
    pub fn render_shell(&self, mut var: impl FnMut(&Ref) -> String) -> String {
        let mut lexer = shell::Lexer::default();
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => {
                    lexer.feed(text);
                    out.push_str(text);
                }
                Part::Ref(r, _) => out.push_str(&lexer.reference(&var(r))),
            }
        }
        out
    }
}

/// The check variable of each of `names` (workflow variables):
/// [`VAR_PREFIX`] and the name upper-cased, every character but `A-Z`,
/// `0-9` and `_` written `_`. A name whose variable is taken by an earlier
/// one (in order: `A` before `a`, `a-b` before `a_b`) gets `_2`, `_3`, …,
/// so distinct names never share a variable and a set maps alike each time.
pub fn var_env_names<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let names: BTreeSet<&str> = names.into_iter().collect();
    let mut taken = BTreeSet::new();
    let mut out = BTreeMap::new();
    for name in names {
        let base = format!("{VAR_PREFIX}{}", sanitize(name));
        let mut var = base.clone();
        let mut n = 2;
        while taken.contains(&var) {
            var = format!("{base}_{n}");
            n += 1;
        }
        taken.insert(var.clone());
        out.insert(name.to_string(), var);
    }
    out
}

/// `name` upper-cased, with `_` for every character outside `A-Z0-9_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_uppercase() {
            c @ ('A'..='Z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect()
}

fn parse_ref(expr: &str) -> Result<Ref, String> {
    let segments: Vec<&str> = expr.split('.').collect();
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    };
    match segments.as_slice() {
        ["item"] => Ok(Ref::Item),
        ["index"] => Ok(Ref::Index),
        ["vars", name] if valid(name) => Ok(Ref::Var((*name).to_string())),
        ["steps", name, "output"] if valid(name) => Ok(Ref::Output((*name).to_string())),
        ["steps", name, "outputs"] if valid(name) => Ok(Ref::Outputs((*name).to_string())),
        ["steps", name, other] if valid(name) => Err(format!(
            "`{{{{{expr}}}}}`: a step has `output` (its answer) or `outputs` (a fan-out's answers), not `{other}`"
        )),
        [] | [""] => Err("`{{}}` names nothing; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs".into()),
        _ => Err(format!(
            "`{{{{{expr}}}}}` is not a reference; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs"
        )),
    }
}

#[cfg(test)]
mod tests;
