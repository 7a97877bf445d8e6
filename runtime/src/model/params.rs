//! What a model choice sends besides the model's name (LLM7): reasoning
//! effort, the output-token limit, sampling, and provider-specific fields.
//!
//! A [`ModelParams`] belongs to a client (one per model choice: the
//! session's, a role's, the guardian's, a step's), and its wire form is
//! made once ([`WireParams`]), so a request adds a few prepared entries to
//! its body and serializes nothing twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// How hard a reasoning model thinks before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// The least reasoning the model allows.
    Minimal,
    /// Little reasoning: cheap, fast workers.
    Low,
    /// The usual default of reasoning models.
    Medium,
    /// The most: a verifier, a planner.
    High,
}

impl Effort {
    /// The word sent and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

impl std::fmt::Display for Effort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which body field carries the output-token limit. OpenAI's reasoning
/// models refuse `max_tokens` and want `max_completion_tokens`; Ollama
/// reads only `max_tokens` (and ignores the other silently); vLLM,
/// llama.cpp and most hosted servers read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: every OpenAI-compatible server but OpenAI's own newer models.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI and Azure OpenAI.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The field a server at `base_url` reads: `max_completion_tokens` for
    /// OpenAI's and Azure's endpoints, `max_tokens` elsewhere.
    pub fn for_url(base_url: &str) -> Self {
        let host = base_url
            .split("://")
            .nth(1)
            .unwrap_or(base_url)
            .split(['/', ':'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if host == "api.openai.com" || host.ends_with(".openai.azure.com") {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        }
    }
}

/// The parameters of one model choice; every one optional, none sent
/// when unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelParams {
    /// Sent as `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Effort>,
    /// Sent as `max_tokens` or `max_completion_tokens` ([`MaxTokensField`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Sent as `temperature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sent as `top_p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Provider-specific fields merged into the body as given; a field
    /// named here replaces the typed parameter of the same name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
}

/// The body fields cadre itself writes, which `extra` may not replace.
pub const RESERVED_FIELDS: [&str; 5] = ["model", "messages", "tools", "stream", "stream_options"];

/// Why parameters cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// `extra` names a field cadre writes itself. Not retryable.
    #[error("extra.{0}: cadre writes this field itself; it cannot be replaced")]
    Reserved(String),
    /// A number is out of range or not finite. Not retryable.
    #[error("{0}")]
    Range(String),
}

impl ModelParams {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These parameters over `lower`: each one set here wins; `extra`
    /// fields merge, these winning.
    pub fn over(&self, lower: &ModelParams) -> ModelParams {
        let mut extra = lower.extra.clone();
        extra.extend(self.extra.clone());
        ModelParams {
            reasoning_effort: self.reasoning_effort.or(lower.reasoning_effort),
            max_output_tokens: self.max_output_tokens.or(lower.max_output_tokens),
            temperature: self.temperature.or(lower.temperature),
            top_p: self.top_p.or(lower.top_p),
            extra,
        }
    }

    /// Refuses what no server could accept: `extra` replacing a field
    /// cadre writes, a temperature outside 0..=2, a `top_p` outside 0..=1,
    /// a zero output limit.
    pub fn validate(&self) -> Result<(), ParamsError> {
        if let Some(name) = self
            .extra
            .keys()
            .find(|k| RESERVED_FIELDS.contains(&k.as_str()))
        {
            return Err(ParamsError::Reserved(name.clone()));
        }
        if let Some(t) = self.temperature
            && !(t.is_finite() && (0.0..=2.0).contains(&t))
        {
            return Err(ParamsError::Range(format!(
                "temperature {t}: it must be between 0 and 2"
            )));
        }
        if let Some(p) = self.top_p
            && !(p.is_finite() && (0.0..=1.0).contains(&p))
        {
            return Err(ParamsError::Range(format!(
                "top_p {p}: it must be between 0 and 1"
            )));
        }
        if self.max_output_tokens == Some(0) {
            return Err(ParamsError::Range(
                "max_output_tokens 0: it must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// A short description for people: `effort high · max 2048 tokens`;
    /// empty when nothing is set.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(effort) = self.reasoning_effort {
            parts.push(format!("effort {effort}"));
        }
        if let Some(max) = self.max_output_tokens {
            parts.push(format!("max {max} tokens"));
        }
        if let Some(t) = self.temperature {
            parts.push(format!("temperature {t}"));
        }
        if let Some(p) = self.top_p {
            parts.push(format!("top_p {p}"));
        }
        if !self.extra.is_empty() {
            let names: Vec<&str> = self.extra.keys().map(String::as_str).collect();
            parts.push(format!("extra {}", names.join(", ")));
        }
        parts.join(" · ")
    }
}

/// Parameters as body entries, each value serialized once when the client
/// is built.
#[derive(Debug, Clone, Default)]
pub struct WireParams {
    entries: Vec<(String, Box<RawValue>)>,
}

impl WireParams {
    /// The entries `params` adds to a body, the limit under `field`;
    /// `extra` replaces a typed entry of the same name.
    pub fn new(params: &ModelParams, field: MaxTokensField) -> Result<Self, ParamsError> {
        params.validate()?;
        let raw = |value: &Value| {
            serde_json::value::to_raw_value(value)
                .map_err(|e| ParamsError::Range(format!("a parameter did not serialize: {e}")))
        };
        let mut entries: Vec<(String, Box<RawValue>)> = Vec::new();
        let mut typed = |name: &str, value: Option<Value>| -> Result<(), ParamsError> {
            if let Some(value) = value
                && !params.extra.contains_key(name)
            {
                entries.push((name.to_string(), raw(&value)?));
            }
            Ok(())
        };
        typed(
            "reasoning_effort",
            params.reasoning_effort.map(|e| Value::from(e.as_str())),
        )?;
        typed(field.as_str(), params.max_output_tokens.map(Value::from))?;
        typed("temperature", params.temperature.map(Value::from))?;
        typed("top_p", params.top_p.map(Value::from))?;
        for (name, value) in &params.extra {
            entries.push((name.clone(), raw(value)?));
        }
        Ok(Self { entries })
    }

    /// The entries, in the order they are sent.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    /// The names of the entries.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// These entries without `name`.
    pub fn without(&self, name: &str) -> Self {
        Self {
            entries: self
                .entries
                .iter()
                .filter(|(k, _)| k != name)
                .cloned()
                .collect(),
        }
    }

    /// The typed parameter a 400's message says the server rejects, if it
    /// names one this body sends (`Unsupported parameter: 'reasoning_effort'`,
    /// `Unrecognized request argument supplied: reasoning_effort`,
    /// `extra fields not permitted` with the name). `extra` fields are the
    /// user's own and are never dropped.
    pub fn rejected(&self, message: &str, extra: &ModelParams) -> Option<String> {
        self.names()
            .filter(|name| !extra.extra.contains_key(*name))
            .find(|name| mentions(message, name))
            .map(str::to_string)
    }
}

/// Whether `message` names `field` as a word (not inside a longer name:
/// `max_tokens` is not named by `max_completion_tokens`).
fn mentions(message: &str, field: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    message.match_indices(field).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + field.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[cfg(test)]
mod tests;
