//! The OpenAI-compatible client (LLM2).
//!
//! One HTTP path for whole and streamed answers (`wire::Wire`): async-openai's
//! configuration gives the URL and headers, and its error types and error
//! reading are kept, so an error status maps to the same [`ModelError`]
//! either way; the request is serialized straight from the request's shared
//! parts and sent on a plain reqwest client with no retry layer (retries
//! belong to [`super::Retrying`] alone, so each one is visible as
//! `model.retry` and bounded in one place). A streamed body is framed by
//! `eventsource-stream` (async-openai's parser) in the task that reads it:
//! async-openai's own streaming reads the body on a task of its own and
//! hands every event over a channel. Every body is bounded first
//! (`wire::guarded_bytes`); cadre reads each chunk as loose JSON and assembles
//! it with [`Assembler`], because real servers break the strict types. One
//! response is bounded in size and wall time by [`ResponseLimits`].
//!
//! # Layout
//!
//! - this file: the client, its configuration, and the stream of one
//!   response's events.
//! - `request`: the request as JSON, tool lists serialized once.
//! - `wire`: sending it, reading the answer whole or as framed events, the
//!   bound on a body.
//! - `errors`: a failure as a [`ModelError`], naming the URL that answered.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_openai::config::{Config, OpenAIConfig};
use futures::StreamExt;

use super::params::{MaxTokensField, ModelParams, WireParams};
use super::{
    Assembler, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, ResponseLimits,
    parse_completion,
};
use errors::{Keys, located, map_error, stream_error, with_hint};
use request::{WireRequest, chat_request};
use wire::{ChunkStream, OVERSIZE, Wire};

mod errors;
mod request;
mod wire;

/// Where and how to reach an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The API base including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The bearer token; local servers often need none.
    pub api_key: Option<String>,
    /// The model name sent with every request.
    pub model: String,
    /// Stream responses (the default) or ask for whole ones.
    pub stream: bool,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long a response may stay silent (between stream chunks, too)
    /// before the request counts as timed out.
    pub idle_timeout: Duration,
    /// How large and how long one response may be.
    pub limits: ResponseLimits,
    /// Reasoning effort, output limit, sampling and extra body fields.
    pub params: ModelParams,
    /// Which field carries `params.max_output_tokens`; `None` picks by the
    /// base URL ([`MaxTokensField::for_url`]).
    pub max_tokens_field: Option<MaxTokensField>,
    /// Headers sent with every request besides the key (a provider's
    /// `headers`).
    pub headers: BTreeMap<String, String>,
    /// Query parameters added to the URL (a provider's `query_params`,
    /// e.g. Azure's `api-version`).
    pub query_params: BTreeMap<String, String>,
    /// The provider's name, for messages (`None`: the session's own
    /// server, named by its URL).
    pub provider: Option<String>,
    /// The environment variable the key is read from, for messages: a 401
    /// with no key says which variable is unset.
    pub key_env: Option<String>,
}

impl OpenAiConfig {
    /// Streaming, 10 s to connect, 120 s of silence allowed, the default
    /// [`ResponseLimits`] (8 MiB, 600 s).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            stream: true,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            limits: ResponseLimits::default(),
            params: ModelParams::default(),
            max_tokens_field: None,
            headers: BTreeMap::new(),
            query_params: BTreeMap::new(),
            provider: None,
            key_env: None,
        }
    }
}

/// A client for any OpenAI-compatible chat-completions server.
#[derive(Clone)]
pub struct OpenAiClient {
    wire: Wire,
    config: Arc<OpenAiConfig>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .finish()
    }
}

impl OpenAiClient {
    /// Builds the client; fails if the HTTP stack cannot start, the base
    /// URL does not parse or the key cannot be sent as a header.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.idle_timeout)
            .build()
            .map_err(|e| ModelError::Request(format!("HTTP client: {e}")))?;
        // async-openai's `headers()` panics on a key that is not a valid
        // header value (a stray newline, say): refused here instead.
        if let Some(key) = &config.api_key
            && reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err()
        {
            return Err(ModelError::Request(
                "the API key cannot be sent in an HTTP header (it has a control character or a line break)".into(),
            ));
        }
        let mut api = OpenAIConfig::new().with_api_base(config.base_url.trim_end_matches('/'));
        // async-openai reads OPENAI_API_KEY itself when no key is set; an
        // explicit empty key keeps configuration in the caller's hands.
        api = api.with_api_key(config.api_key.clone().unwrap_or_default());
        let mut url = reqwest::Url::parse(&api.url("/chat/completions"))
            .map_err(|e| ModelError::Request(format!("base URL {}: {e}", config.base_url)))?;
        if !config.query_params.is_empty() {
            url.query_pairs_mut().extend_pairs(&config.query_params);
        }
        let mut headers = api.headers();
        for (name, value) in &config.headers {
            let bad = |what: &str| ModelError::Request(format!("header {name}: {what}"));
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad("not a valid header name"))?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                bad("its value cannot be sent (a control character or a line break)")
            })?;
            headers.insert(name, value);
        }
        let field = config
            .max_tokens_field
            .unwrap_or_else(|| MaxTokensField::for_url(&config.base_url));
        let params = WireParams::new(&config.params, field)
            .map_err(|e| ModelError::Request(e.to_string()))?;
        let wire = Wire {
            http,
            url,
            headers: Arc::new(headers),
            max_wire_bytes: config.limits.max_wire_bytes(),
            tools: Arc::default(),
            params: Arc::new(SentParams(Mutex::new(Arc::new(params)))),
        };
        Ok(Self {
            wire,
            config: Arc::new(config),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

impl ModelClient for OpenAiClient {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = chat_request(request, &self.config, &self.wire);
        let limits = self.config.limits;
        let keys = Keys::of(&self.config);
        if !self.config.stream {
            let wire = self.wire.clone();
            let (base_url, params) = (self.config.base_url.clone(), self.config.params.clone());
            return Box::pin(
                futures::stream::once(async move {
                    let mut body = body;
                    let mut events = Vec::new();
                    loop {
                        let oversize = Arc::new(AtomicBool::new(false));
                        let call = OVERSIZE.scope(oversize.clone(), with_hint(wire.whole(&body)));
                        let Ok((result, hint)) =
                            tokio::time::timeout(limits.max_duration, call).await
                        else {
                            events.push(Err(limits.too_long()));
                            return events;
                        };
                        let error = match result {
                            Ok(value) => {
                                events.push(
                                    parse_completion(&value, Some(limits))
                                        .map(ModelEvent::Completed),
                                );
                                return events;
                            }
                            Err(_) if oversize.load(Ordering::Relaxed) => {
                                limits.too_large_on_the_wire()
                            }
                            Err(e) => map_error(e, hint),
                        };
                        match rejected(&error, &body, &params, events.is_empty()) {
                            Some(param) => {
                                events.push(Ok(wire.params.dropped(&mut body, param, &error)));
                            }
                            None => {
                                events.push(Err(keys.explain(located(error, &base_url))));
                                return events;
                            }
                        }
                    }
                })
                .flat_map(futures::stream::iter),
            );
        }
        let state = StreamState {
            phase: Phase::Connect(self.wire.clone(), Box::new(body)),
            pending: VecDeque::new(),
            limits,
            deadline: None,
            oversize: Arc::new(AtomicBool::new(false)),
            params: self.config.params.clone(),
            resent: false,
        };
        let base_url = self.config.base_url.clone();
        Box::pin(
            futures::stream::unfold(state, StreamState::next)
                .map(move |item| item.map_err(|e| keys.explain(located(e, &base_url)))),
        )
    }
}

/// The parameters a client sends, shared by its requests: a parameter the
/// server rejected is left out of every later request too, so it is
/// rejected (and reported) once.
pub(super) struct SentParams(Mutex<Arc<WireParams>>);

impl SentParams {
    /// The parameters sent now.
    pub(super) fn current(&self) -> Arc<WireParams> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Leaves `param` out of `body` and of every later request; the event
    /// that says so.
    fn dropped(&self, body: &mut WireRequest, param: String, error: &ModelError) -> ModelEvent {
        let without = Arc::new(body.params().without(&param));
        {
            let mut sent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if sent.names().any(|n| n == param) {
                *sent = Arc::new(sent.without(&param));
            }
        }
        body.set_params(without);
        ModelEvent::ParamDropped {
            param,
            reason: error.to_string().chars().take(300).collect(),
        }
    }
}

/// The parameter `error` says the server rejects, when it is a 400 naming
/// one `body` sent and no parameter was dropped for this request yet
/// (`first`): the request is sent once more without it (LLM7).
fn rejected(
    error: &ModelError,
    body: &WireRequest,
    params: &ModelParams,
    first: bool,
) -> Option<String> {
    match error {
        ModelError::Http {
            status: 400 | 422,
            message,
            ..
        } if first => body.params().rejected(message, params),
        // A parameter is dropped once, and only for a 400 or a 422.
        ModelError::Http { .. }
        | ModelError::Transport(_)
        | ModelError::Interrupted(_)
        | ModelError::Provider(_)
        | ModelError::Malformed(_)
        | ModelError::Script(_)
        | ModelError::Request(_)
        | ModelError::Limit(_)
        | ModelError::RetriesExhausted { .. } => None,
    }
}

enum Phase {
    Connect(Wire, Box<WireRequest>),
    Reading(ChunkStream, Assembler),
    Done,
}

struct StreamState {
    phase: Phase,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    limits: ResponseLimits,
    /// When the response must have ended; set when the request is sent.
    deadline: Option<tokio::time::Instant>,
    /// Set by the transport when the body went past the wire limit.
    oversize: Arc<AtomicBool>,
    /// The client's parameters as configured (to tell a typed one, which
    /// may be dropped, from an `extra` field, which never is).
    params: ModelParams,
    /// A rejected parameter was already dropped and the request sent again.
    resent: bool,
}

impl StreamState {
    async fn next(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some((item, self));
            }
            let limits = self.limits;
            let deadline = *self
                .deadline
                .get_or_insert_with(|| tokio::time::Instant::now() + limits.max_duration);
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Connect(wire, mut body) => {
                    // Boxed: this future is large, and only connecting needs
                    // it; the rest of the read (waiting for the answer, the
                    // long part) keeps a small one.
                    let connect = Box::pin(
                        OVERSIZE.scope(self.oversize.clone(), with_hint(wire.open(&body))),
                    );
                    match tokio::time::timeout_at(deadline, connect).await {
                        Err(_) => self.pending.push_back(Err(limits.too_long())),
                        Ok((Ok(chunks), _)) => {
                            self.phase = Phase::Reading(chunks, Assembler::limited(limits));
                        }
                        Ok((Err(e), hint)) => {
                            let error = map_error(e, hint);
                            match rejected(&error, &body, &self.params, !self.resent) {
                                Some(param) => {
                                    self.resent = true;
                                    let event = wire.params.dropped(&mut body, param, &error);
                                    self.pending.push_back(Ok(event));
                                    self.phase = Phase::Connect(wire, body);
                                }
                                None => self.pending.push_back(Err(error)),
                            }
                        }
                    }
                }
                Phase::Reading(mut chunks, mut assembler) => {
                    match tokio::time::timeout_at(deadline, chunks.next()).await {
                        Err(_) => self.pending.push_back(Err(limits.too_long())),
                        Ok(None) => self
                            .pending
                            .push_back(Ok(ModelEvent::Completed(assembler.finish()))),
                        Ok(Some(Err(_))) if self.oversize.load(Ordering::Relaxed) => {
                            self.pending.push_back(Err(limits.too_large_on_the_wire()));
                        }
                        Ok(Some(Err(e))) => self.pending.push_back(Err(stream_error(e))),
                        Ok(Some(Ok(chunk))) => match assembler.push(&chunk) {
                            Err(e) => self.pending.push_back(Err(e)),
                            Ok(delta) => {
                                if !delta.reasoning.is_empty() {
                                    self.pending
                                        .push_back(Ok(ModelEvent::ReasoningDelta(delta.reasoning)));
                                }
                                if !delta.text.is_empty() {
                                    self.pending
                                        .push_back(Ok(ModelEvent::TextDelta(delta.text)));
                                }
                                self.phase = Phase::Reading(chunks, assembler);
                            }
                        },
                    }
                }
            }
        }
    }
}
