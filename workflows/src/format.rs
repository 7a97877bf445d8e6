//! The workflow file as written (TOML), every value with its byte span.
//!
//! This is the user-facing contract (`docs/workflows.md`): `[workflow]`,
//! `[vars]` and `[[steps]]`. Unknown keys are refused. A plan the model
//! writes as JSON (the Operate `workflow` tool) has the same shape; it is
//! rendered to TOML and read here too, so both go through one validator.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::diagnostic::{Diagnostic, Source};

/// A whole workflow file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    /// `[workflow]`.
    pub workflow: Spanned<RawHeader>,
    /// `[vars]`: defaults that `--var key=value` overrides.
    #[serde(default)]
    pub vars: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    /// `[[steps]]`, in file order.
    #[serde(default)]
    pub steps: Vec<Spanned<RawStep>>,
}

/// `[workflow]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeader {
    /// Required.
    pub name: Spanned<String>,
    /// Steps running at once.
    pub max_parallel: Option<Spanned<i64>>,
    /// The widest posture any step runs with.
    pub posture: Option<Spanned<String>>,
    /// The steps' default (and widest) mode.
    pub mode: Option<Spanned<String>>,
    /// The cap on an output handed forward.
    pub max_output_bytes: Option<Spanned<i64>>,
    /// Tokens and agents for the whole run.
    pub budget: Option<Spanned<RawBudget>>,
}

/// `budget = { tokens = …, agents = … }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    /// Model tokens (prompt and completion) of every step and its sub-agents.
    pub tokens: Option<Spanned<i64>>,
    /// Agents started: step instances and their sub-agents.
    pub agents: Option<Spanned<i64>>,
}

/// One `[[steps]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    /// Unique, `[a-z0-9_-]+`.
    pub name: Spanned<String>,
    /// The prompt template.
    pub prompt: Spanned<String>,
    /// Steps that must have a result first.
    pub needs: Option<Spanned<Vec<Spanned<String>>>>,
    /// A JSON list from an earlier step (`{{steps.X.output}}`) or a literal list.
    pub for_each: Option<Spanned<toml::Value>>,
    /// `text` (default) or `json`.
    pub output: Option<Spanned<String>>,
    /// A JSON Schema the output must match (with `output = "json"`).
    pub output_schema: Option<Spanned<toml::Value>>,
    /// The step's mode, never wider than the workflow's.
    pub mode: Option<Spanned<String>>,
    /// A role from the configuration.
    pub role: Option<Spanned<String>>,
    /// A model name for this step's requests.
    pub model: Option<Spanned<String>>,
    /// Globs (templates) the step may write.
    pub scope: Option<Spanned<Vec<Spanned<String>>>>,
    /// A command (`exit 0` = verified), or `{ verifier = true }`.
    pub check: Option<Spanned<toml::Value>>,
    /// Wall-clock limit per attempt (`30s`, `10m`, `1h`).
    pub timeout: Option<Spanned<String>>,
    /// Limit on a stretch with no model or tool progress.
    pub idle_timeout: Option<Spanned<String>>,
    /// Further attempts after a failure.
    pub retries: Option<Spanned<i64>>,
    /// `continue` (default) or `fail_fast`, for a fan-out.
    pub on_failure: Option<Spanned<String>>,
    /// Items that must succeed for a fan-out step to have a result.
    pub min_success: Option<Spanned<i64>>,
    /// This step's cap on an output handed forward.
    pub max_output_bytes: Option<Spanned<i64>>,
    /// `none` (default) or `worktree`.
    pub isolation: Option<Spanned<String>>,
    /// With `isolation = "worktree"`: bring the worktree's changes back.
    pub merge: Option<Spanned<bool>>,
}

/// The keys of each table, as the structs above name them (a test checks
/// them against serde's own list).
const FILE_KEYS: &[&str] = &["workflow", "vars", "steps"];
const HEADER_KEYS: &[&str] = &[
    "name",
    "max_parallel",
    "posture",
    "mode",
    "max_output_bytes",
    "budget",
];
const BUDGET_KEYS: &[&str] = &["tokens", "agents"];
const STEP_KEYS: &[&str] = &[
    "name",
    "prompt",
    "needs",
    "for_each",
    "output",
    "output_schema",
    "mode",
    "role",
    "model",
    "scope",
    "check",
    "timeout",
    "idle_timeout",
    "retries",
    "on_failure",
    "min_success",
    "max_output_bytes",
    "isolation",
    "merge",
];

/// Parses the text. Every unknown key is a diagnostic at its place, and
/// the rest of the file is still read (each unknown entry blanked out,
/// byte for byte, so every other span stays true), so validation reports
/// what else is wrong too. A syntax error, or a key that cannot be set
/// aside (an unknown table), ends the reading with what was found.
pub fn parse(source: &Source) -> Result<(RawFile, Vec<Diagnostic>), Vec<Diagnostic>> {
    let read = |text: &str| {
        toml::from_str::<RawFile>(text)
            .map_err(|e| Diagnostic::error(e.span(), e.message().trim_end()))
    };
    let unknown = match toml::de::DeTable::parse(&source.text) {
        Ok(doc) => unknown_keys(doc.get_ref()),
        Err(_) => Vec::new(),
    };
    if unknown.is_empty() {
        return read(&source.text)
            .map(|raw| (raw, Vec::new()))
            .map_err(|d| vec![d]);
    }
    let found: Vec<Diagnostic> = unknown
        .iter()
        .map(|u| {
            let expected: Vec<String> = u.expected.iter().map(|k| format!("`{k}`")).collect();
            Diagnostic::error(
                Some(u.key.clone()),
                format!(
                    "unknown field `{}`, expected one of {}",
                    u.name,
                    expected.join(", ")
                ),
            )
        })
        .collect();
    if unknown.iter().any(|u| u.entry.is_none()) {
        return Err(found);
    }
    let mut text = source.text.clone().into_bytes();
    for range in unknown.iter().filter_map(|u| u.entry.clone()) {
        for byte in text.get_mut(range).into_iter().flatten() {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    let blanked = String::from_utf8(text).unwrap_or_default();
    match read(&blanked) {
        Ok(raw) => Ok((raw, found)),
        Err(more) => Err(found.into_iter().chain([more]).collect()),
    }
}

/// A key no table of the format has.
struct Unknown {
    name: String,
    /// The key's bytes.
    key: std::ops::Range<usize>,
    /// The whole `key = value` entry, to blank; `None` for one that cannot
    /// be blanked in place (a table or an array of tables of its own).
    entry: Option<std::ops::Range<usize>>,
    expected: &'static [&'static str],
}

/// Every key of `doc` the format does not know, in file order.
fn unknown_keys(doc: &toml::de::DeTable<'_>) -> Vec<Unknown> {
    use toml::de::DeValue;
    let mut out = Vec::new();
    let mut check = |table: &toml::de::DeTable<'_>, expected: &'static [&'static str]| {
        for (key, value) in table.iter() {
            if expected.contains(&key.get_ref().as_ref()) {
                continue;
            }
            let inline = !matches!(value.get_ref(), DeValue::Table(_) | DeValue::Array(_))
                || value.span().start > key.span().end;
            out.push(Unknown {
                name: key.get_ref().to_string(),
                key: key.span(),
                entry: inline.then(|| key.span().start..value.span().end),
                expected,
            });
        }
    };
    check(doc, FILE_KEYS);
    let table = |name: &str| match doc.get(name).map(|v| v.get_ref()) {
        Some(DeValue::Table(t)) => Some(t),
        _ => None,
    };
    if let Some(header) = table("workflow") {
        check(header, HEADER_KEYS);
        if let Some(DeValue::Table(budget)) = header.get("budget").map(|v| v.get_ref()) {
            check(budget, BUDGET_KEYS);
        }
    }
    if let Some(DeValue::Array(steps)) = doc.get("steps").map(|v| v.get_ref()) {
        for step in steps {
            if let DeValue::Table(step) = step.get_ref() {
                check(step, STEP_KEYS);
            }
        }
    }
    out.sort_by_key(|u| u.key.start);
    out
}

/// Why a plan given as JSON has no TOML form. Not retryable: the plan
/// must change.
#[derive(Debug, thiserror::Error)]
pub enum PlanJsonError {
    /// The plan is `null` (or nothing but `null`s). Not retryable.
    #[error("the workflow is null; expected an object with `workflow` and `steps`")]
    Null,
    /// The plan is not a JSON object. Not retryable.
    #[error("the workflow must be an object with `workflow` and `steps`")]
    NotAnObject,
    /// TOML cannot hold it (an array mixing tables and values, say). Not
    /// retryable.
    #[error("the workflow cannot be read: {0}")]
    Toml(#[from] toml::ser::Error),
}

/// A plan given as JSON (the Operate tool's argument), as TOML text with
/// the same shape, so it is validated like a file. `null`s are dropped.
pub fn json_to_toml(plan: &serde_json::Value) -> Result<String, PlanJsonError> {
    fn strip(value: &serde_json::Value) -> Option<serde_json::Value> {
        match value {
            serde_json::Value::Null => None,
            serde_json::Value::Array(items) => Some(serde_json::Value::Array(
                items.iter().filter_map(strip).collect(),
            )),
            serde_json::Value::Object(map) => Some(serde_json::Value::Object(
                map.iter()
                    .filter_map(|(k, v)| Some((k.clone(), strip(v)?)))
                    .collect(),
            )),
            other => Some(other.clone()),
        }
    }
    let Some(stripped) = strip(plan) else {
        return Err(PlanJsonError::Null);
    };
    if !stripped.is_object() {
        return Err(PlanJsonError::NotAnObject);
    }
    Ok(toml::to_string(&stripped)?)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The keys serde expects in the table `[name]` of a file, read from
    /// its own error for an unknown key.
    fn serde_keys(text: &str) -> Vec<String> {
        let message = match toml::from_str::<RawFile>(text) {
            Err(e) => e.message().to_string(),
            Ok(_) => panic!("{text} was accepted"),
        };
        // serde writes `expected one of `a`, `b`, `c`` or `expected `a` or `b``.
        let (_, list) = message.split_once("expected ").unwrap_or_default();
        let list = list.trim_start_matches("one of ").replace(" or ", ", ");
        list.split(", ")
            .map(|k| k.trim().trim_matches('`').to_string())
            .collect()
    }

    #[test]
    fn the_key_lists_are_the_structs_fields() {
        let cases: [(&str, &[&str]); 4] = [
            (
                "zz_unknown = 1
[workflow]
name = \"t\"\n",
                FILE_KEYS,
            ),
            ("[workflow]\nname = \"t\"\nzz_unknown = 1\n", HEADER_KEYS),
            (
                "[workflow]\nname = \"t\"\nbudget = { zz_unknown = 1 }\n",
                BUDGET_KEYS,
            ),
            (
                "[workflow]\nname = \"t\"\n[[steps]]\nname = \"a\"\nprompt = \"x\"\nzz_unknown = 1\n",
                STEP_KEYS,
            ),
        ];
        for (text, keys) in cases {
            assert_eq!(serde_keys(text), keys, "{text}");
        }
    }
}
