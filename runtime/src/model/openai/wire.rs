//! The HTTP side: one request sent, its answer read whole or as framed
//! events, every successful body bounded ([`guarded_bytes`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_openai::error::OpenAIError;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::SentParams;
use super::errors::{HINT, Hint, error_chain, error_response, retry_after};
use super::request::{ToolsJson, WireRequest};

/// A streamed response's chunks, each read as loose JSON.
pub(super) type ChunkStream = Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>;

/// The HTTP side: async-openai's URL and headers (built once), a plain
/// reqwest client with no retry layer of its own (retries belong to
/// [`super::Retrying`] alone), a look at error responses' status and
/// `Retry-After`, and a bound on what a successful body may make the
/// client hold ([`guarded_bytes`]). A streamed body's events are framed by
/// `eventsource-stream` in the task that reads them.
#[derive(Clone)]
pub(super) struct Wire {
    /// The client, shared by every request.
    pub(super) http: reqwest::Client,
    /// `<base URL>/chat/completions`.
    pub(super) url: reqwest::Url,
    /// async-openai's headers (the key among them), built once.
    pub(super) headers: Arc<reqwest::header::HeaderMap>,
    /// See [`ResponseLimits::max_wire_bytes`](super::super::ResponseLimits::max_wire_bytes).
    pub(super) max_wire_bytes: u64,
    /// The tool lists sent, as JSON.
    pub(super) tools: Arc<ToolsJson>,
    /// The model parameters sent, less any a server rejected.
    pub(super) params: Arc<SentParams>,
}

tokio::task_local! {
    /// Set when a body of this request went past the wire limit: the
    /// caller reports a response limit, not a broken stream to retry.
    pub(super) static OVERSIZE: Arc<AtomicBool>;
}

impl Wire {
    /// Sends the request. An error status is left in the `with_hint`
    /// scope and read as async-openai reads it, so it maps to the same
    /// [`ModelError`] whichever way the answer comes.
    pub(super) async fn send(&self, body: &WireRequest) -> Result<reqwest::Response, OpenAIError> {
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
    pub(super) async fn whole(&self, body: &WireRequest) -> Result<Value, OpenAIError> {
        let response = self.send(body).await?;
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
    pub(super) async fn open(&self, body: &WireRequest) -> Result<ChunkStream, OpenAIError> {
        let response = self.send(body).await?;
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

/// Whether a response says it is an event stream.
pub(super) fn is_event_stream(response: &reqwest::Response) -> bool {
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
pub(super) fn guarded_bytes(
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
pub(super) enum Guarded {
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
pub(super) struct WireSize {
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
