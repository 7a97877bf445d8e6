//! The OpenAI-compatible client (LLM2).
//!
//! One HTTP path for whole and streamed answers ([`Wire`]): async-openai's
//! configuration gives the URL and headers, and its error types and error
//! reading are kept, so an error status maps to the same [`ModelError`]
//! either way; the request is serialized straight from the request's shared
//! parts and sent on a plain reqwest client with no retry layer (retries
//! belong to [`super::Retrying`] alone, so each one is visible as
//! `model.retry` and bounded in one place). A streamed body is framed by
//! `eventsource-stream` (async-openai's parser) in the task that reads it:
//! async-openai's own streaming reads the body on a task of its own and
//! hands every event over a channel. Every body is bounded first
//! ([`guarded_bytes`]); cadre reads each chunk as loose JSON and assembles
//! it with [`Assembler`], because real servers break the strict types. One
//! response is bounded in size and wall time by [`ResponseLimits`].

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_openai::config::{Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::assemble::{error_kind, error_message};
use super::{
    Assembler, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, ResponseLimits,
    parse_completion,
};
mod body;

use body::{ToolsJson, WireRequest, chat_request};

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
        let url = reqwest::Url::parse(&api.url("/chat/completions"))
            .map_err(|e| ModelError::Request(format!("base URL {}: {e}", config.base_url)))?;
        let wire = Wire {
            http,
            url,
            headers: Arc::new(api.headers()),
            max_wire_bytes: config.limits.max_wire_bytes(),
            tools: Arc::default(),
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
        let body = chat_request(request, &self.config, &self.wire.tools);
        let limits = self.config.limits;
        if !self.config.stream {
            let wire = self.wire.clone();
            let base_url = self.config.base_url.clone();
            return Box::pin(futures::stream::once(async move {
                let oversize = Arc::new(AtomicBool::new(false));
                let call = OVERSIZE.scope(oversize.clone(), with_hint(wire.whole(body)));
                let Ok((result, hint)) = tokio::time::timeout(limits.max_duration, call).await
                else {
                    return Err(limits.too_long());
                };
                let value = result.map_err(|e| match oversize.load(Ordering::Relaxed) {
                    true => limits.too_large_on_the_wire(),
                    false => located(map_error(e, hint), &base_url),
                })?;
                parse_completion(&value, Some(limits)).map(ModelEvent::Completed)
            }));
        }
        let state = StreamState {
            phase: Phase::Connect(self.wire.clone(), Box::new(body)),
            pending: VecDeque::new(),
            limits,
            deadline: None,
            oversize: Arc::new(AtomicBool::new(false)),
        };
        let base_url = self.config.base_url.clone();
        Box::pin(
            futures::stream::unfold(state, StreamState::next)
                .map(move |item| item.map_err(|e| located(e, &base_url))),
        )
    }
}

/// An error status names the URL that answered it, and a 404 or 405 (the
/// usual answer to a base URL without its `/v1`) suggests the likely fix.
fn located(err: ModelError, base_url: &str) -> ModelError {
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

type ChunkStream = Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>;

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
                Phase::Connect(wire, body) => {
                    // Boxed: this future is large, and only connecting needs
                    // it; the rest of the read (waiting for the answer, the
                    // long part) keeps a small one.
                    let connect = Box::pin(
                        OVERSIZE.scope(self.oversize.clone(), with_hint(wire.open(*body))),
                    );
                    match tokio::time::timeout_at(deadline, connect).await {
                        Err(_) => self.pending.push_back(Err(limits.too_long())),
                        Ok((Ok(chunks), _)) => {
                            self.phase = Phase::Reading(chunks, Assembler::limited(limits));
                        }
                        Ok((Err(e), hint)) => self.pending.push_back(Err(map_error(e, hint))),
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

/// What the transport saw of an error response, which async-openai's error
/// types do not carry: the status (for bodies it could not parse) and the
/// `Retry-After` hint.
#[derive(Debug, Clone, Copy, Default)]
struct Hint {
    status: Option<u16>,
    retry_after: Option<Duration>,
}

tokio::task_local! {
    static HINT: Cell<Hint>;
    /// Set when a body of this request went past the wire limit: the
    /// caller reports a response limit, not a broken stream to retry.
    static OVERSIZE: Arc<AtomicBool>;
}

async fn with_hint<T>(work: impl Future<Output = T>) -> (T, Hint) {
    HINT.scope(Cell::new(Hint::default()), async {
        let out = work.await;
        (out, HINT.with(Cell::get))
    })
    .await
}

/// The HTTP side: async-openai's URL and headers (built once), a plain
/// reqwest client with no retry layer of its own (retries belong to
/// [`super::Retrying`] alone), a look at error responses' status and
/// `Retry-After`, and a bound on what a successful body may make the
/// client hold ([`guarded_bytes`]). A streamed body's events are framed by
/// `eventsource-stream` in the task that reads them.
#[derive(Clone)]
struct Wire {
    http: reqwest::Client,
    url: reqwest::Url,
    headers: Arc<reqwest::header::HeaderMap>,
    /// See [`ResponseLimits::max_wire_bytes`].
    max_wire_bytes: u64,
    /// The tool lists sent, as JSON.
    tools: Arc<ToolsJson>,
}

impl Wire {
    /// Sends the request. An error status is left in the `with_hint`
    /// scope and read as async-openai reads it, so it maps to the same
    /// [`ModelError`] whichever way the answer comes.
    async fn send(&self, body: &WireRequest) -> Result<reqwest::Response, OpenAIError> {
        let mut body = serde_json::to_vec(body).map_err(|error| {
            OpenAIError::InvalidArgument(format!("failed to serialize request: {error}"))
        })?;
        // The buffer grew by doubling; it lives until the answer comes.
        body.shrink_to_fit();
        let request = self
            .http
            .post(self.url.clone())
            .headers((*self.headers).clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .build()
            .map_err(OpenAIError::Reqwest)?;
        let response = self
            .http
            .execute(request)
            .await
            .map_err(OpenAIError::Reqwest)?;
        if response.status().is_success() {
            return Ok(response);
        }
        let hint = Hint {
            status: Some(response.status().as_u16()),
            retry_after: retry_after(response.headers()),
        };
        // Outside a `with_hint` scope there is nobody to tell.
        let _ = HINT.try_with(|cell| cell.set(hint));
        Err(error_response(response).await)
    }

    /// A whole response, read as JSON.
    async fn whole(self, body: WireRequest) -> Result<Value, OpenAIError> {
        let response = self.send(&body).await?;
        let mut body = std::pin::pin!(guarded_bytes(response, self.max_wire_bytes, false));
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(Guarded::Transport(error)) => return Err(OpenAIError::Reqwest(error)),
                Err(Guarded::Oversize(message)) => {
                    return Err(OpenAIError::InvalidArgument(message));
                }
            }
        }
        serde_json::from_slice(&bytes).map_err(|error| {
            OpenAIError::JSONDeserialize(error, String::from_utf8_lossy(&bytes).into_owned())
        })
    }

    /// A streamed response, as its chunks.
    async fn open(self, body: WireRequest) -> Result<ChunkStream, OpenAIError> {
        let response = self.send(&body).await?;
        let is_event_stream = is_event_stream(&response);
        let bytes = guarded_bytes(response, self.max_wire_bytes, is_event_stream)
            .map(|chunk| chunk.map_err(std::io::Error::other));
        Ok(Box::pin(futures::stream::unfold(
            Box::pin(eventsource_stream::EventStream::new(bytes)),
            |mut events| async move {
                loop {
                    let event = match events.next().await? {
                        Ok(event) => event,
                        Err(error) => {
                            let error =
                                async_openai::error::StreamError::EventStream(error.to_string());
                            return Some((Err(OpenAIError::StreamError(Box::new(error))), events));
                        }
                    };
                    if event.data == "[DONE]" {
                        return None;
                    }
                    if event.event == "keepalive" {
                        continue;
                    }
                    let chunk = serde_json::from_str::<Value>(&event.data)
                        .map_err(|error| OpenAIError::JSONDeserialize(error, event.data));
                    return Some((chunk, events));
                }
            },
        )))
    }
}

/// An error response as async-openai reads one: a server error's body as
/// text, any other's as an OpenAI error object.
async fn error_response(response: reqwest::Response) -> OpenAIError {
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

/// Whether a response says it is an event stream.
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// Bounds a successful body, and makes an event stream end with a blank
/// line.
///
/// **The bound.** The framing holds an event until its blank line, and a
/// whole response is held until its end: a server that never
/// ends a line would grow the process without limit. Past `max_wire_bytes`
/// in one event (or in a whole plain body) the body ends with an error and
/// the request's `OVERSIZE` flag is set, so the caller reports a response
/// limit rather than a broken stream that would be retried.
///
/// **The blank line.** `eventsource-stream` 0.2 (async-openai's framing
/// too), at EOF, silently drops whatever it has not dispatched yet: a
/// last event not followed by a blank line (`data: {...}\n` then close),
/// and any event whose lines end in a lone CR (held back in case an LF
/// follows). Servers that close the stream after their last chunk instead
/// of sending `data: [DONE]` would lose that chunk, and with it the finish
/// reason, the usage, or an error, which would then pass for a normal,
/// truncated answer. Appending `\n\n` after the server's last byte completes
/// a pending line (a trailing CR becomes CRLF) and dispatches the pending
/// event; where the stream already ended with a blank line, the extra lines
/// dispatch nothing. A stream closed mid-chunk now yields an unreadable
/// chunk (an interrupted stream) instead of a silently shortened answer. A
/// body that breaks off reports its transport error first, which ends the
/// stream before the tail.
fn guarded_bytes(
    response: reqwest::Response,
    max_wire_bytes: u64,
    is_event_stream: bool,
) -> impl Stream<Item = Result<bytes::Bytes, Guarded>> + Send + 'static {
    let mut size = WireSize::new(is_event_stream);
    // Outside an `OVERSIZE` scope there is nobody to tell.
    let oversize = OVERSIZE.try_with(Arc::clone).ok();
    let guarded = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(Guarded::Transport)?;
        if size.add(&chunk) > max_wire_bytes {
            if let Some(flag) = &oversize {
                flag.store(true, Ordering::Relaxed);
            }
            return Err(Guarded::Oversize(format!(
                "the body went past {max_wire_bytes} bytes in one event"
            )));
        }
        Ok(chunk)
    });
    let tail =
        futures::stream::iter(is_event_stream.then(|| Ok(bytes::Bytes::from_static(b"\n\n"))));
    guarded.chain(tail)
}

/// Why a guarded body broke off.
#[derive(Debug)]
enum Guarded {
    /// The connection failed.
    Transport(reqwest::Error),
    /// It went past the bound.
    Oversize(String),
}

impl std::fmt::Display for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Guarded::Transport(error) => write!(f, "{}", error_chain(error)),
            Guarded::Oversize(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Guarded {}

/// Bytes the framing layer may be holding: for an event stream, those since
/// the last blank line (the event being built); for any other body, all.
struct WireSize {
    events: bool,
    size: u64,
    /// The last byte ended a line (the stream starts at a line start).
    line_start: bool,
    /// The last byte was a CR, whose LF (if it comes) ends nothing more.
    after_cr: bool,
}

impl WireSize {
    fn new(events: bool) -> Self {
        Self {
            events,
            size: 0,
            line_start: true,
            after_cr: false,
        }
    }

    /// Adds a chunk; returns the largest size reached while adding it.
    fn add(&mut self, chunk: &[u8]) -> u64 {
        if !self.events {
            self.size += chunk.len() as u64;
            return self.size;
        }
        let mut largest = self.size;
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    if self.line_start {
                        self.size = 0;
                    }
                    self.line_start = true;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    self.size += 1;
                    largest = largest.max(self.size);
                    self.line_start = false;
                    self.after_cr = false;
                }
            }
        }
        largest
    }
}

/// `retry-after-ms` (OpenAI's) or `Retry-After` in seconds, capped at a minute.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
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

fn map_error(error: OpenAIError, hint: Hint) -> ModelError {
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

fn reqwest_error(err: reqwest::Error) -> ModelError {
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
fn error_chain(err: &dyn std::error::Error) -> String {
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
fn stream_error(error: OpenAIError) -> ModelError {
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
