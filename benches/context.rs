//! A long run inside a small window: one agent, 1,000 tool steps, each
//! reading a 4 KB file, in a 32k-token context window, against a local
//! server (in a process of its own, so only the client is measured) that
//! answers every request at once and refuses one past the window, as real
//! servers do.
//!
//! Reported: that every step completed; the client's CPU per step over
//! steps 100–199 and over 900–999, and their ratio (flat means ≈ 1: the
//! cost of a step does not grow with the history); the resident memory at
//! step 100 and at the end, and the peak; what the compactions cost (their
//! count, the summary requests' bytes, and the requests' largest size);
//! the requests the window refused (0 expected: the threshold comes
//! first); and how many messages the store holds at the end (every one,
//! compacted or not).
//!
//! The store is a file in a temporary data directory, as a real session's
//! is; `STORE=memory` puts it in memory instead, where the whole stored
//! history is resident by design.
//!
//! Run with `cargo bench --bench context`; `STEPS=N` changes the number of
//! steps.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use cadre::actors::store::StoreHandle;
use cadre::actors::{PermissionConfig, SessionConfig, SessionServices, spawn_session};
use cadre::runtime::context::{ContextBudget, SUMMARY_TAG};
use cadre::runtime::model::{OpenAiClient, OpenAiConfig, RetryPolicy, Retrying};
use cadre::runtime::paths::DataDir;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{Event, Op};
use cadre::runtime::store::{Store, store_path};
use cadre::runtime::tool::{ToolRegistry, ToolRunner, Workspace};
use serde_json::{Value, json};

/// The window, in tokens, and the server's, in bytes (4 bytes a token, as
/// cadre estimates).
const WINDOW: u64 = 32_000;
const FILE_BYTES: usize = 4_096;

fn main() {
    if std::env::var("CONTEXT_MOCK").is_ok() {
        return serve();
    }
    let steps: usize = std::env::var("STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let exe = std::env::current_exe().expect("exe");
    let mut server = std::process::Command::new(exe)
        .env("CONTEXT_MOCK", "1")
        .env("STEPS", steps.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server");
    let mut from_server = std::io::BufReader::new(server.stdout.take().expect("stdout"));
    let mut url = String::new();
    from_server.read_line(&mut url).expect("its address");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = runtime.block_on(run(url.trim(), steps));
    let mut to_server = server.stdin.take().expect("stdin");
    writeln!(to_server, "figures").expect("ask");
    let mut figures = String::new();
    from_server.read_line(&mut figures).expect("figures");
    drop(to_server);
    let _ = server.wait();
    let served: Value = serde_json::from_str(&figures).expect("json");
    run.print(steps, &served);
}

/// What the client measured.
struct Run {
    /// Process CPU time when each step's result arrived.
    cpu_at: Vec<Duration>,
    /// Resident bytes when each step's result arrived.
    rss_at: Vec<f64>,
    /// Messages the store holds at the end (`None`: a store in memory,
    /// gone with the run).
    stored: Option<usize>,
    compactions: usize,
    fallbacks: usize,
    completed: bool,
    wall: Duration,
}

impl Run {
    fn print(&self, steps: usize, served: &Value) {
        let per_step = |from: usize, to: usize| {
            let to = to.min(self.cpu_at.len() - 1);
            (self.cpu_at[to] - self.cpu_at[from]).as_secs_f64() * 1e6 / (to - from) as f64
        };
        let (early, late) = (per_step(100, 199), per_step(steps - 100, steps - 1));
        let mib = |b: f64| b / (1024.0 * 1024.0);
        let peak = self.rss_at.iter().copied().fold(0.0, f64::max);
        println!(
            "one agent, {steps} tool steps of {} KB in a {WINDOW}-token window",
            FILE_BYTES / 1024
        );
        println!(
            "  steps completed {} of {steps} (turn completed: {})   wall {:.1} s",
            self.cpu_at.len(),
            self.completed,
            self.wall.as_secs_f64()
        );
        println!(
            "  client CPU per step: steps 100-199 {early:.0} µs, steps {}-{} {late:.0} µs, ratio {:.2}",
            steps - 100,
            steps - 1,
            late / early
        );
        println!(
            "  resident memory: {:.1} MiB at step 100, {:.1} MiB at step {}, {:.1} MiB at the end, peak {:.1} MiB",
            mib(self.rss_at[100]),
            mib(self.rss_at[self.rss_at.len().min(1_000) - 1]),
            self.rss_at.len().min(1_000),
            mib(*self.rss_at.last().expect("steps")),
            mib(peak)
        );
        if let Some(stored) = self.stored {
            println!("  messages stored at the end: {stored}");
        }
        println!(
            "  compactions {} ({} by the fallback); summary requests {} of {} B in all ({} tokens at 4 B a token)",
            self.compactions,
            self.fallbacks,
            served["summaries"],
            served["summary_bytes"],
            served["summary_bytes"].as_u64().unwrap_or(0) / 4
        );
        println!(
            "  requests {} (largest {} B); refused past the window: {}",
            served["requests"], served["largest"], served["refused"]
        );
    }
}

async fn run(url: &str, steps: usize) -> Run {
    let workspace = tempfile::TempDir::new().expect("workspace");
    let data = tempfile::TempDir::new().expect("data");
    let line = "a line of a file read again and again by a long-running agent.\n";
    let text = line.repeat(FILE_BYTES / line.len() + 1);
    std::fs::write(workspace.path().join("file.txt"), &text[..FILE_BYTES]).expect("file");
    // Whole answers (the server writes JSON, not a stream).
    let mut model = OpenAiConfig::new(url, "m");
    model.stream = false;
    let client = OpenAiClient::new(model).expect("client");
    let on_disk = std::env::var("STORE").as_deref() != Ok("memory");
    let (store, thread) = if on_disk {
        let (handle, thread) =
            StoreHandle::start(Store::open(&store_path(data.path())).expect("store"))
                .await
                .expect("store");
        (handle, Some(thread))
    } else {
        (StoreHandle::in_memory().await.expect("store"), None)
    };
    let session_id = uuid::Uuid::new_v4().to_string();
    let services = SessionServices {
        model: Arc::new(Retrying::new(Arc::new(client), RetryPolicy::default())),
        tools: ToolRunner::new(
            Arc::new(ToolRegistry::with_builtins()),
            Duration::from_secs(30),
        ),
        store: Some(store.clone()),
        summarizer: None,
        subagents: None,
    };
    let paths = DataDir::new(data.path()).session(&session_id);
    let mut config = SessionConfig::new(
        session_id.clone(),
        Workspace::new(workspace.path()).expect("workspace"),
        paths,
    );
    config.max_iterations = steps as u32 + 10;
    config.context = ContextBudget::default().with_window(WINDOW);
    config.permissions = PermissionConfig {
        posture: Posture::Bypass,
        ..PermissionConfig::default()
    };
    let (session, mut events) = spawn_session(config, services).await.expect("session");
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let start = Instant::now();
    session
        .submit(Op::user("read file.txt again and again"))
        .expect("submit");
    let mut run = Run {
        cpu_at: Vec::with_capacity(steps),
        rss_at: Vec::with_capacity(steps),
        stored: None,
        compactions: 0,
        fallbacks: 0,
        completed: false,
        wall: Duration::ZERO,
    };
    while let Some(envelope) = events.recv().await {
        match envelope.event {
            Event::ToolResult { .. } => {
                run.cpu_at.push(cpu());
                run.rss_at.push(resident_bytes());
            }
            Event::ContextCompacted { kind, .. } => {
                run.compactions += 1;
                if kind.as_str() == "fallback" {
                    run.fallbacks += 1;
                }
            }
            Event::TurnCompleted { .. } => {
                run.completed = true;
                break;
            }
            Event::TurnFailed { message, .. } => {
                eprintln!("the turn failed: {message}");
                break;
            }
            _ => {}
        }
    }
    run.wall = start.elapsed();
    session.submit(Op::Shutdown).expect("shutdown");
    let _ = session.stopped().await;
    if let Some(thread) = thread {
        store.close(thread).await;
        let store = Store::open(&store_path(data.path())).expect("reopen");
        run.stored = Some(store.conversation(&session_id).expect("conversation").len());
    }
    run
}

fn resident_bytes() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .expect("rss")
        .parse()
        .expect("number");
    pages * 4096.0
}

/// The server's side: answers `STEPS` requests with a `read_file` call,
/// then text; a summary request with a short summary; a request past the
/// window with OpenAI's context-length error. Prints its figures when asked.
fn serve() {
    let steps: u64 = std::env::var("STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let served = Arc::new(Served {
        steps,
        ..Served::default()
    });
    let url = runtime.block_on(async {
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(served.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}/v1")
    });
    println!("{url}");
    for line in std::io::stdin().lock().lines() {
        if line.as_deref().ok() != Some("figures") {
            break;
        }
        let figures = json!({
            "requests": served.requests.load(Ordering::Relaxed),
            "summaries": served.summaries.load(Ordering::Relaxed),
            "summary_bytes": served.summary_bytes.load(Ordering::Relaxed),
            "largest": served.largest.load(Ordering::Relaxed),
            "refused": served.refused.load(Ordering::Relaxed),
        });
        println!("{figures}");
    }
}

#[derive(Default)]
struct Served {
    steps: u64,
    requests: AtomicU64,
    calls: AtomicU64,
    summaries: AtomicU64,
    summary_bytes: AtomicU64,
    largest: AtomicU64,
    refused: AtomicU64,
}

async fn answer(
    State(served): State<Arc<Served>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    served.requests.fetch_add(1, Ordering::Relaxed);
    served
        .largest
        .fetch_max(body.len() as u64, Ordering::Relaxed);
    let respond = |status: u16, body: Value| {
        axum::response::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .expect("response")
    };
    let tokens = body.len() as u64 / 4;
    if tokens > WINDOW {
        served.refused.fetch_add(1, Ordering::Relaxed);
        return respond(
            400,
            json!({"error": {
                "message": format!("This model's maximum context length is {WINDOW} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"
            }}),
        );
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let summary = request.get("tools").is_none()
        && body
            .windows(SUMMARY_TAG.len())
            .any(|w| w == SUMMARY_TAG.as_bytes());
    let message = if summary {
        served.summaries.fetch_add(1, Ordering::Relaxed);
        served
            .summary_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        json!({"role": "assistant", "content": "The agent reads file.txt again and again, one call per request; nothing else has happened."})
    } else if served.calls.fetch_add(1, Ordering::Relaxed) < served.steps {
        let n = served.calls.load(Ordering::Relaxed);
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{n}"), "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"file.txt\"}"}
        }]})
    } else {
        json!({"role": "assistant", "content": "Done reading."})
    };
    respond(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}
        }),
    )
}
