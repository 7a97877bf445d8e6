//! Named model servers (LLM6): `[providers.NAME]` in the user's
//! configuration, chosen with `provider = "NAME"` beside any `model`.
//!
//! A provider's key is read from the environment variable its `env_key`
//! names, by the host (the command line reads the environment; a library
//! host passes keys itself), and never written to a configuration file or
//! the store: a launch record keeps only the variable's name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::OpenAiConfig;
use super::params::{MaxTokensField, ModelParams};

/// The provider every configuration knows without defining it: OpenAI,
/// with its key in `OPENAI_API_KEY`. A `[providers.openai]` replaces it.
pub const OPENAI: &str = "openai";

/// OpenAI's endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The variable OpenAI's key is read from.
pub const OPENAI_KEY_VAR: &str = "OPENAI_API_KEY";

/// `[providers.NAME]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The API base including `/v1`.
    pub base_url: String,
    /// The environment variable holding its key (none: it needs none).
    pub env_key: Option<String>,
    /// Headers sent with every request (an organisation, a project).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Query parameters added to every request's URL (Azure's `api-version`).
    #[serde(default)]
    pub query_params: BTreeMap<String, String>,
    /// The context window of its models, unless `[context]`, a role or the
    /// built-in table says otherwise.
    pub context_window: Option<u64>,
    /// Which field carries the output limit (default: by the base URL,
    /// `max_completion_tokens` for OpenAI and Azure, else `max_tokens`).
    pub max_tokens_field: Option<MaxTokensField>,
}

/// A provider as the host uses it: its configuration and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct Provider {
    /// Its name.
    pub name: String,
    /// What the configuration says.
    pub config: ProviderConfig,
    /// The key read from `config.env_key`, when that variable is set.
    pub key: Option<String>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("base_url", &self.config.base_url)
            .field("env_key", &self.config.env_key)
            .field("key", &self.key.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Every provider a host knows, by name, with their keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Providers(BTreeMap<String, Provider>);

impl Providers {
    /// The configured providers and the built-in `openai`, each with the
    /// key `lookup` finds in the variable its `env_key` names (an empty
    /// value is no key).
    pub fn resolve(
        configured: &BTreeMap<String, ProviderConfig>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let mut all = BTreeMap::new();
        all.insert(
            OPENAI.to_string(),
            ProviderConfig {
                base_url: OPENAI_BASE_URL.into(),
                env_key: Some(OPENAI_KEY_VAR.into()),
                ..ProviderConfig::default()
            },
        );
        all.extend(configured.clone());
        Self(
            all.into_iter()
                .map(|(name, config)| {
                    let key = config
                        .env_key
                        .as_deref()
                        .and_then(&lookup)
                        .filter(|k| !k.is_empty());
                    (name.clone(), Provider { name, config, key })
                })
                .collect(),
        )
    }

    /// The provider named `name`, or an error listing the known ones.
    pub fn get(&self, name: &str) -> Result<&Provider, UnknownProvider> {
        self.0.get(name).ok_or_else(|| UnknownProvider {
            name: name.to_string(),
            known: self.0.keys().cloned().collect(),
        })
    }
}

/// A `provider = "NAME"` that no `[providers.NAME]` defines. Not retryable:
/// the configuration must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("provider '{name}' is not configured (known: {}); define [providers.{name}] in your user config", known.join(", "))]
pub struct UnknownProvider {
    /// The name asked for.
    pub name: String,
    /// The names defined.
    pub known: Vec<String>,
}

/// What a server model choice carries besides its URL, model and key: the
/// provider it came from (for messages and resumes), where its key comes
/// from, the provider's headers and query parameters, and the choice's
/// parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// The provider's name, when a provider was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The variable the key is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// Headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Query parameters added to the URL.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query_params: BTreeMap<String, String>,
    /// Which field carries the output limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<MaxTokensField>,
    /// Reasoning effort, output limit, sampling, extra fields.
    #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
    pub params: ModelParams,
}

impl ServerOptions {
    /// The options of `provider` with `params`.
    pub fn of(provider: &Provider, params: ModelParams) -> Self {
        Self {
            provider: Some(provider.name.clone()),
            key_env: provider.config.env_key.clone(),
            headers: provider.config.headers.clone(),
            query_params: provider.config.query_params.clone(),
            max_tokens_field: provider.config.max_tokens_field,
            params,
        }
    }

    /// Sets these options on a client's configuration.
    pub fn apply(&self, config: &mut OpenAiConfig) {
        config.provider = self.provider.clone();
        config.key_env = self.key_env.clone();
        config.headers = self.headers.clone();
        config.query_params = self.query_params.clone();
        config.max_tokens_field = self.max_tokens_field;
        config.params = self.params.clone();
    }
}

/// A model on an OpenAI-compatible server, with everything its client
/// needs.
#[derive(Clone, PartialEq)]
pub struct ServerChoice {
    /// The API base including `/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The key, if any.
    pub api_key: Option<String>,
    /// Stream responses.
    pub stream: bool,
    /// Provider, headers, parameters.
    pub options: ServerOptions,
}

impl std::fmt::Debug for ServerChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerChoice")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("options", &self.options)
            .finish()
    }
}

impl ServerChoice {
    /// The client configuration (the default timeouts, these limits).
    pub fn config(&self, limits: super::ResponseLimits) -> OpenAiConfig {
        let mut config = OpenAiConfig::new(self.base_url.clone(), self.model.clone());
        config.api_key = self.api_key.clone();
        config.stream = self.stream;
        config.limits = limits;
        self.options.apply(&mut config);
        config
    }

    /// What tells two choices' clients apart (never the key itself: the
    /// provider or variable it came from stands for it).
    pub fn identity(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}",
            self.base_url,
            self.model,
            self.stream,
            serde_json::to_string(&self.options).unwrap_or_default()
        )
    }
}

/// Why a model choice has no server. Not retryable: the configuration must
/// change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// See [`UnknownProvider`].
    #[error(transparent)]
    Provider(#[from] UnknownProvider),
    /// A server was chosen but no model named for it.
    #[error("no model named for {0}: set `model` beside it")]
    NoModel(String),
}

/// The server a model choice (`provider`, `base_url`, `model`, parameters)
/// talks to, given the session's own (`None` when the session runs a
/// script). `Ok(None)`: the session's client serves it as it is.
///
/// A provider gives the URL, key, headers and query parameters; a bare
/// `base_url` gets the session's key (as before providers existed); the
/// choice's parameters layer over the session's, each unset one inherited.
pub fn choose_server(
    session: Option<&ServerChoice>,
    provider: Option<&str>,
    base_url: Option<&str>,
    model: Option<&str>,
    params: &ModelParams,
    providers: &Providers,
) -> Result<Option<ServerChoice>, ChoiceError> {
    let inherited = session.map(|s| &s.options.params);
    let params = match inherited {
        Some(lower) => params.over(lower),
        None => params.clone(),
    };
    let model = model
        .map(str::to_string)
        .or_else(|| session.map(|s| s.model.clone()));
    let stream = session.is_none_or(|s| s.stream);
    if let Some(name) = provider {
        let provider = providers.get(name)?;
        let base_url = provider.config.base_url.clone();
        return Ok(Some(ServerChoice {
            model: model.ok_or_else(|| ChoiceError::NoModel(format!("provider {name}")))?,
            base_url,
            api_key: provider.key.clone(),
            stream,
            options: ServerOptions::of(provider, params),
        }));
    }
    if let Some(base_url) = base_url {
        return Ok(Some(ServerChoice {
            model: model.ok_or_else(|| ChoiceError::NoModel(base_url.to_string()))?,
            base_url: base_url.to_string(),
            api_key: session.and_then(|s| s.api_key.clone()),
            stream,
            options: ServerOptions {
                key_env: session.and_then(|s| s.options.key_env.clone()),
                params,
                ..ServerOptions::default()
            },
        }));
    }
    let Some(session) = session else {
        // A script answers every choice alike.
        return Ok(None);
    };
    if params == session.options.params {
        return Ok(None);
    }
    Ok(Some(ServerChoice {
        model: model.unwrap_or_else(|| session.model.clone()),
        options: ServerOptions {
            params,
            ..session.options.clone()
        },
        ..session.clone()
    }))
}

#[cfg(test)]
mod tests;
