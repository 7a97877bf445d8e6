//! How a failed request becomes a [`ModelError`]: async-openai's error
//! types, what the transport saw of the error response ([`Hint`]), and the
//! URL that answered.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use async_openai::error::OpenAIError;
use serde_json::Value;

use super::super::ModelError;
use super::super::assemble::{error_kind, error_message};

/// An error status names the URL that answered it, and a 404 or 405 (the
/// usual answer to a base URL without its `/v1`) suggests the likely fix.
pub(super) fn located(err: ModelError, base_url: &str) -> ModelError {
    let ModelError::Http {
        status,
        message,
        retry_after,
        kind,
    } = err
    else {
        return err;
    };
    let base = base_url.trim_end_matches('/');
    let said = message.trim();
    let mut located = format!("POST {base}/chat/completions answered");
    if said.is_empty() {
        located.push_str(" with no message");
    } else {
        located.push_str(&format!(": {}", said.chars().take(300).collect::<String>()));
    }
    if matches!(status, 404 | 405) {
        if base.ends_with("/v1") {
            located.push_str(" (check the base URL and the model name)");
        } else {
            located.push_str(&format!(" (a base URL usually ends in /v1: try {base}/v1)"));
        }
    }
    ModelError::Http {
        status,
        message: located,
        retry_after,
        kind,
    }
}

/// Where a client's key comes from, so a refused request can say what to
/// fix: `OPENAI_API_KEY is unset`, `LOCAL_LLM_KEY is unset (provider local)`.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    /// The provider's name, when the client is a named provider's.
    provider: Option<String>,
    /// The variable the key is read from.
    key_env: Option<String>,
    /// Whether a key was set.
    has_key: bool,
}

impl Keys {
    pub(super) fn of(config: &super::OpenAiConfig) -> Self {
        Self {
            provider: config.provider.clone(),
            key_env: config.key_env.clone(),
            has_key: config.api_key.as_deref().is_some_and(|k| !k.is_empty()),
        }
    }

    /// A 401 or 403 says which variable is unset, or that its key was
    /// refused; any other error is left as it is.
    pub(super) fn explain(&self, err: ModelError) -> ModelError {
        let ModelError::Http {
            status: status @ (401 | 403),
            message,
            retry_after,
            kind,
        } = err
        else {
            return err;
        };
        let provider = self
            .provider
            .as_ref()
            .map(|p| format!(" (provider {p})"))
            .unwrap_or_default();
        let why = match (&self.key_env, self.has_key) {
            (Some(var), false) => format!("{var} is unset{provider}"),
            (Some(var), true) => format!("the key in {var} was refused{provider}"),
            (None, false) => format!("no API key is set{provider}"),
            (None, true) => format!("the API key was refused{provider}"),
        };
        ModelError::Http {
            status,
            message: format!("{why}: {message}"),
            retry_after,
            kind,
        }
    }
}

/// What the transport saw of an error response, which async-openai's error
/// types do not carry: the status (for bodies it could not parse) and the
/// `Retry-After` hint.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Hint {
    /// The error response's status.
    pub(super) status: Option<u16>,
    /// Its `Retry-After`, if it sent one.
    pub(super) retry_after: Option<Duration>,
}

tokio::task_local! {
    /// What the transport saw of this request's error response.
    pub(super) static HINT: Cell<Hint>;
}

pub(super) async fn with_hint<T>(work: impl Future<Output = T>) -> (T, Hint) {
    HINT.scope(Cell::new(Hint::default()), async {
        let out = work.await;
        (out, HINT.with(Cell::get))
    })
    .await
}

/// An error response as async-openai reads one: a server error's body as
/// text, any other's as an OpenAI error object.
pub(super) async fn error_response(response: reqwest::Response) -> OpenAIError {
    use async_openai::error::{ApiError, ApiErrorResponse, WrappedError};
    let status = response.status();
    let bytes = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(error) => return OpenAIError::Reqwest(error),
    };
    if status.is_server_error() {
        return OpenAIError::ApiError(ApiErrorResponse {
            status_code: status,
            api_error: ApiError {
                message: String::from_utf8_lossy(&bytes).into_owned(),
                ..ApiError::default()
            },
        });
    }
    match serde_json::from_slice::<WrappedError>(&bytes) {
        Ok(wrapped) => OpenAIError::ApiError(ApiErrorResponse {
            status_code: status,
            api_error: wrapped.error,
        }),
        Err(error) => {
            OpenAIError::JSONDeserialize(error, String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

/// `retry-after-ms` (OpenAI's) or `Retry-After` in seconds, capped at a minute.
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let delay = if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
    {
        Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    } else {
        let secs = text("retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
        Duration::from_secs_f64(secs.max(0.0))
    };
    Some(delay.min(Duration::from_secs(60)))
}

pub(super) fn map_error(error: OpenAIError, hint: Hint) -> ModelError {
    match error {
        OpenAIError::ApiError(response) => ModelError::Http {
            status: response.status_code.as_u16(),
            message: response.api_error.message,
            retry_after: hint.retry_after,
            kind: response.api_error.r#type.or(response.api_error.code),
        },
        OpenAIError::JSONDeserialize(err, body) => match hint.status {
            Some(status) => {
                let parsed: Option<Value> = serde_json::from_str(&body).ok();
                ModelError::Http {
                    status,
                    message: parsed
                        .as_ref()
                        .and_then(error_message)
                        .unwrap_or_else(|| body.chars().take(500).collect()),
                    retry_after: hint.retry_after,
                    kind: parsed.as_ref().and_then(error_kind),
                }
            }
            None => ModelError::Malformed(format!(
                "{err}: {}",
                body.chars().take(300).collect::<String>()
            )),
        },
        OpenAIError::Reqwest(err) => reqwest_error(err),
        OpenAIError::StreamError(err) => ModelError::Interrupted(err.to_string()),
        OpenAIError::InvalidArgument(message) => ModelError::Request(message),
        other => ModelError::Transport(other.to_string()),
    }
}

pub(super) fn reqwest_error(err: reqwest::Error) -> ModelError {
    match err.status() {
        Some(status) => ModelError::Http {
            status: status.as_u16(),
            message: err.to_string(),
            retry_after: None,
            kind: None,
        },
        None if err.is_body() || err.is_decode() => ModelError::Interrupted(err.to_string()),
        None => ModelError::Transport(error_chain(&err)),
    }
}

/// An error and its sources, which is where reqwest keeps the useful part.
pub(super) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// An error while reading the stream: a chunk that is not JSON means the
/// stream was cut mid-event, which a new attempt may not repeat.
pub(super) fn stream_error(error: OpenAIError) -> ModelError {
    match error {
        OpenAIError::JSONDeserialize(err, data) => ModelError::Interrupted(format!(
            "unreadable chunk ({err}): {}",
            data.chars().take(200).collect::<String>()
        )),
        other => match map_error(other, Hint::default()) {
            ModelError::Transport(m) => ModelError::Interrupted(m),
            mapped => mapped,
        },
    }
}
