//! A local mock of an OpenAI-compatible chat-completions server.
//!
//! It serves concurrent requests on a loopback port, answers each from a
//! queue of scripted responses (SSE streams cut into pieces of any size,
//! JSON bodies, error statuses, streams that break off or hang), records
//! every request body, and checks on every request the protocol invariant a
//! real server enforces: each `tool` message answers a call made by an
//! earlier assistant message, and every call is answered before the
//! conversation moves on. A request that breaks it gets a 400, like from a
//! real server, and the violation is kept for the test to assert on. A test
//! may also give it a context window ([`MockServer::enforce_window`]): a
//! request body past it gets the 400 a real server of that kind sends.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A `text/event-stream` body, written in pieces of `piece` bytes
    /// (whole when `None`) with `gap` between pieces.
    Stream {
        body: String,
        piece: Option<usize>,
        gap: Duration,
    },
    /// Any status, content type and body, with extra headers.
    Raw {
        status: u16,
        content_type: String,
        body: String,
        headers: Vec<(String, String)>,
        piece: Option<usize>,
    },
    /// A stream that sends `body` and then breaks the connection.
    BreakAfter { body: String },
    /// A stream that sends `body` and then stays silent until the client leaves.
    HangAfter { body: String },
    /// `reply`, once as many requests as the barrier holds are waiting on
    /// it: proof that they were in flight at the same time.
    Together(Arc<tokio::sync::Barrier>, Box<Reply>),
    /// `reply`, once the gate is open (the test opens it when it has done
    /// what must happen while the request waits).
    Gate(tokio::sync::watch::Receiver<bool>, Box<Reply>),
}

impl Reply {
    /// An SSE stream of chunks, sent whole.
    pub fn sse(chunks: &[Value]) -> Self {
        Reply::Stream {
            body: sse_body(chunks),
            piece: None,
            gap: Duration::ZERO,
        }
    }

    /// The same stream cut into `piece`-byte writes.
    pub fn sse_in_pieces(chunks: &[Value], piece: usize) -> Self {
        Reply::Stream {
            body: sse_body(chunks),
            piece: Some(piece),
            gap: Duration::ZERO,
        }
    }

    /// A JSON body with a status.
    pub fn json(status: u16, body: Value) -> Self {
        Reply::Raw {
            status,
            content_type: "application/json".into(),
            body: body.to_string(),
            headers: Vec::new(),
            piece: None,
        }
    }

    /// An error status with an OpenAI-style error body and `retry-after-ms: 1`.
    pub fn error(status: u16, message: &str) -> Self {
        Reply::Raw {
            status,
            content_type: "application/json".into(),
            body: json!({"error": {"message": message, "type": "server_error"}}).to_string(),
            headers: vec![("retry-after-ms".into(), "1".into())],
            piece: None,
        }
    }
}

/// The body of an SSE stream: one `data:` event per chunk, then `[DONE]`.
pub fn sse_body(chunks: &[Value]) -> String {
    let mut body = String::new();
    for chunk in chunks {
        body.push_str("data: ");
        body.push_str(&chunk.to_string());
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// A streamed chunk with the usual envelope.
pub fn chunk(choices: Value) -> Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock", "choices": choices})
}

/// Chunks streaming `text` in a few pieces, then `finish_reason: stop`.
pub fn text_chunks(text: &str) -> Vec<Value> {
    let mut out = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
    )];
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    for piece in words.chunks(3) {
        out.push(chunk(
            json!([{"index": 0, "delta": {"content": piece.concat()}, "finish_reason": null}]),
        ));
    }
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    ));
    out.push(usage_chunk(10, 5));
    out
}

/// One tool call, its arguments streamed in two pieces.
pub fn tool_call_chunks(id: &str, name: &str, arguments: &Value) -> Vec<Value> {
    tool_calls_chunks(&[(id, name, arguments.clone())])
}

/// Several tool calls in one response, their argument pieces interleaved.
pub fn tool_calls_chunks(calls: &[(&str, &str, Value)]) -> Vec<Value> {
    let mut out = Vec::new();
    let texts: Vec<String> = calls.iter().map(|(_, _, a)| a.to_string()).collect();
    for (index, (id, name, _)) in calls.iter().enumerate() {
        out.push(chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [
            {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}, "finish_reason": null}])));
    }
    for half in 0..2 {
        for (index, text) in texts.iter().enumerate() {
            let mid = text.len() / 2;
            let mid = (0..=mid)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            let piece = if half == 0 {
                &text[..mid]
            } else {
                &text[mid..]
            };
            out.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": piece}}
            ]}, "finish_reason": null}])));
        }
    }
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ));
    out.push(usage_chunk(20, 7));
    out
}

/// One tool call whose arguments are sent verbatim, valid JSON or not.
pub fn raw_tool_call_chunks(id: &str, name: &str, arguments: &str) -> Vec<Value> {
    vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ]}, "finish_reason": "tool_calls"}]),
        ),
        usage_chunk(5, 5),
    ]
}

/// The usage chunk OpenAI sends last, with empty `choices`.
pub fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock",
           "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

/// Which server's context-length error a window answers with
/// (`notes/context-acp-mcp.md` §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// OpenAI (Azure and Groq alike): `code: context_length_exceeded`.
    OpenAi,
    /// vLLM 0.33: `type: BadRequestError`, the window only in the message.
    Vllm,
    /// llama.cpp's server: `type: exceed_context_size_error`.
    LlamaCpp,
}

impl Overflow {
    /// The 400 body for a request of `tokens` against a window of `window`.
    pub fn body(self, window: usize, tokens: usize) -> Value {
        match self {
            Overflow::OpenAi => json!({"error": {
                "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            Overflow::Vllm => json!({"error": {
                "message": format!("This model's maximum context length is {window} tokens. However, your prompt contains at least {tokens} input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value={tokens})"),
                "type": "BadRequestError", "param": "input_tokens", "code": 400}}),
            Overflow::LlamaCpp => json!({"error": {
                "code": 400,
                "message": format!("request ({tokens} tokens) exceeds the available context size ({window} tokens), try increasing it"),
                "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": window}}),
        }
    }
}

/// A context window the mock enforces: request bodies past `bytes` are
/// refused, their tokens counted as bytes / 4.
#[derive(Debug, Clone, Copy)]
struct Window {
    bytes: usize,
    shape: Overflow,
}

type Responder = Arc<dyn Fn(&Value) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<Reply>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<Value>>,
    /// Each request's URI, `Authorization` and other headers, in the
    /// order of `requests`.
    seen: Mutex<Vec<Seen>>,
    violations: Mutex<Vec<String>>,
    window: Mutex<Option<Window>>,
    /// Requests refused for their length.
    overflows: std::sync::atomic::AtomicUsize,
    /// Requests being answered now, and the most there ever were.
    in_flight: std::sync::atomic::AtomicUsize,
    most_in_flight: std::sync::atomic::AtomicUsize,
}

/// What a request carried besides its body.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The path and query.
    pub uri: String,
    /// Every header, names lower-case.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Counts a request in flight until its response body is done.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn new(shared: Arc<Shared>) -> Self {
        use std::sync::atomic::Ordering;
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.most_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A running mock server; it stops when dropped.
pub struct MockServer {
    /// The base URL, including `/v1`.
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Starts a server on a free loopback port.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(shared.clone());
        // Room for a thousand connections opened at once (the workflow
        // bench): past tokio's default backlog a SYN is dropped and retried
        // only a second later.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("address"))
            .expect("bind");
        let listener = socket.listen(4096).expect("listen");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Queues replies, answered in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.queue.lock().expect("lock").extend(replies);
    }

    /// Answers requests the queue does not cover by calling `responder` with
    /// the request body (for concurrent agents, each picking by its prompt).
    pub fn respond_with(
        &self,
        responder: impl Fn(&Value) -> Option<Reply> + Send + Sync + 'static,
    ) {
        *self.shared.responder.lock().expect("lock") = Some(Arc::new(responder));
    }

    /// Every request body received, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().expect("lock").clone()
    }

    /// What each request carried besides its body, in arrival order
    /// (aligned with [`MockServer::requests`]).
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().expect("lock").clone()
    }

    /// The most requests that were being answered at once.
    pub fn most_in_flight(&self) -> usize {
        self.shared
            .most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Refuses every request whose body is longer than `bytes` with the
    /// 400 `shape`'s server sends (its window stated as `bytes / 4` tokens),
    /// before the queue or the responder sees it.
    pub fn enforce_window(&self, bytes: usize, shape: Overflow) {
        *self.shared.window.lock().expect("lock") = Some(Window { bytes, shape });
    }

    /// How many requests the window refused.
    pub fn overflows(&self) -> usize {
        self.shared
            .overflows
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Protocol violations seen in requests.
    pub fn violations(&self) -> Vec<String> {
        self.shared.violations.lock().expect("lock").clone()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return plain(400, &format!("mock: request is not JSON: {e}")),
    };
    {
        // One lock order for both lists, so they stay aligned.
        let mut requests = shared.requests.lock().expect("lock");
        shared.seen.lock().expect("lock").push(Seen {
            uri: uri.to_string(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                .collect(),
        });
        requests.push(request.clone());
    }
    if let Err(violation) = check_tool_protocol(&request) {
        shared
            .violations
            .lock()
            .expect("lock")
            .push(violation.clone());
        return Reply::json(
            400,
            json!({"error": {"message": violation, "type": "invalid_request_error"}}),
        )
        .into_response();
    }
    let window = *shared.window.lock().expect("lock");
    if let Some(window) = window.filter(|w| body.len() > w.bytes) {
        shared
            .overflows
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = window.shape.body(window.bytes / 4, body.len() / 4);
        return Reply::json(400, body).into_response();
    }
    let flight = InFlight::new(shared.clone());
    let reply = shared.queue.lock().expect("lock").pop_front();
    let responder = shared.responder.lock().expect("lock").clone();
    let mut reply = reply.or_else(|| responder.and_then(|r| r(&request)));
    loop {
        match reply {
            Some(Reply::Together(barrier, inner)) => {
                barrier.wait().await;
                reply = Some(*inner);
            }
            Some(Reply::Gate(mut open, inner)) => {
                let _ = open.wait_for(|open| *open).await;
                reply = Some(*inner);
            }
            other => {
                reply = other;
                break;
            }
        }
    }
    match reply {
        Some(reply) => {
            let response = reply.into_response();
            let (parts, body) = response.into_parts();
            // The request stays in flight until its body is sent.
            let stream = body.into_data_stream().map(move |chunk| {
                let _held = &flight;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(stream))
        }
        None => plain(500, "mock: no reply left for this request"),
    }
}

fn plain(status: u16, text: &str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Body::from(text.to_string()))
        .expect("response")
}

/// Every tool message must answer a call of the nearest assistant message
/// before it, once; every call must be answered before another message.
pub fn check_tool_protocol(request: &Value) -> Result<(), String> {
    let messages = request["messages"].as_array().ok_or("no messages array")?;
    let mut open: HashSet<String> = HashSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        match message["role"].as_str() {
            Some("assistant") => {
                if !open.is_empty() {
                    return Err(format!(
                        "message {i}: assistant message while calls {open:?} are unanswered"
                    ));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default().to_string();
                    if id.is_empty() || !seen.insert(id.clone()) {
                        return Err(format!(
                            "message {i}: tool call id '{id}' is empty or repeated"
                        ));
                    }
                    open.insert(id);
                }
            }
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                if !open.remove(id) {
                    return Err(format!(
                        "message {i}: tool message answers '{id}', which no earlier assistant message left open"
                    ));
                }
            }
            Some(_) => {
                if !open.is_empty() {
                    return Err(format!(
                        "message {i}: conversation moved on while calls {open:?} are unanswered"
                    ));
                }
            }
            None => return Err(format!("message {i} has no role")),
        }
    }
    Ok(())
}

impl Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Stream { body, piece, gap } => {
                streamed(200, "text/event-stream", &[], body, piece, gap)
            }
            Reply::Raw {
                status,
                content_type,
                body,
                headers,
                piece,
            } => streamed(status, &content_type, &headers, body, piece, Duration::ZERO),
            Reply::BreakAfter { body } => {
                let stream = futures::stream::iter(vec![
                    Ok::<Bytes, std::io::Error>(Bytes::from(body)),
                    Err(std::io::Error::other("mock: connection broken on purpose")),
                ]);
                sse_response(Body::from_stream(stream))
            }
            Reply::Together(_, inner) | Reply::Gate(_, inner) => inner.into_response(),
            Reply::HangAfter { body } => {
                let stream =
                    futures::stream::once(
                        async move { Ok::<Bytes, Infallible>(Bytes::from(body)) },
                    )
                    .chain(futures::stream::pending());
                sse_response(Body::from_stream(stream))
            }
        }
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .expect("response")
}

fn streamed(
    status: u16,
    content_type: &str,
    headers: &[(String, String)],
    body: String,
    piece: Option<usize>,
    gap: Duration,
) -> Response {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).expect("status"))
        .header("content-type", content_type);
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let bytes = body.into_bytes();
    let body = match piece {
        None if gap.is_zero() => Body::from(bytes),
        _ => {
            let size = piece.unwrap_or(bytes.len().max(1)).max(1);
            let pieces: Vec<Bytes> = bytes.chunks(size).map(Bytes::copy_from_slice).collect();
            let stream = futures::stream::iter(pieces).then(move |p| async move {
                if !gap.is_zero() {
                    tokio::time::sleep(gap).await;
                }
                Ok::<Bytes, Infallible>(p)
            });
            Body::from_stream(stream)
        }
    };
    builder.body(body).expect("response")
}
