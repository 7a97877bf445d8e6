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

/// Parses the text; a syntax error or an unknown key is one diagnostic at
/// its place.
pub fn parse(source: &Source) -> Result<RawFile, Diagnostic> {
    toml::from_str(&source.text).map_err(|e| Diagnostic::error(e.span(), e.message().trim_end()))
}

/// Why a plan given as JSON has no TOML form. Not retryable: the plan
/// must change.
#[derive(Debug, thiserror::Error)]
pub enum PlanJsonError {
    /// The plan is `null` (or nothing but `null`s).
    #[error("the workflow is null; expected an object with `workflow` and `steps`")]
    Null,
    /// The plan is not a JSON object.
    #[error("the workflow must be an object with `workflow` and `steps`")]
    NotAnObject,
    /// TOML cannot hold it (an array mixing tables and values, say).
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
