//! What a short-lived agent costs, in a fan-out of many, next to a bare
//! async-openai + tokio loop doing the same requests in the same run.
//!
//! Each agent: one model request answered with a `read_file` call, the
//! call, a second request answered with text (whole responses, no
//! streaming). cadre runs each agent as its own session (one agent actor,
//! its turn actor, the file store on) through a `Host` offering the one
//! tool the agent uses; the bare loop sends the same two requests (cadre's
//! system prompt and `read_file` schema; the bytes per request are printed
//! for both) and reads the same file. A local server, in a process of its
//! own so that only the client's CPU and memory are counted, answers every
//! request after a fixed latency. `TOOLS=all` offers cadre's every built-in tool
//! instead (in both loops).
//!
//! Shapes (the targets of the per-agent cost work):
//! - N=200 agents, 64 at once, 50 ms per model call: wall / ideal ≤ 1.10,
//!   client CPU per model call ≤ 250 µs;
//! - N=1000 agents all at once, 1 s per model call: wall / ideal ≤ 1.15,
//!   resident memory per live agent ≤ 80 KiB.
//!
//! Run with `cargo bench --bench fanout`; `SHAPE=small|burst` runs one
//! shape, `SIDE=bare|cadre` one side once (for profiling), `STORE=memory`
//! keeps cadre's store in memory, `AGENTS=N` changes the number of agents.
//! Each side runs `ROUNDS` times (3 unless set), alternating with the other,
//! each time in a fresh process; the median and the range are printed.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequest, FunctionCall, FunctionObject,
};
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use cadre::actors::host::{Host, ModelChoice, SessionOptions};
use cadre::runtime::mode::Mode;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{Envelope, Event, Op};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// One workload.
#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    agents: usize,
    parallel: usize,
    latency: Duration,
}

const SMALL: Shape = Shape {
    name: "200 agents, 64 at once, 50 ms per model call",
    agents: 200,
    parallel: 64,
    latency: Duration::from_millis(50),
};

const BURST: Shape = Shape {
    name: "1000 agents all at once, 1 s per model call",
    agents: 1000,
    parallel: 1000,
    latency: Duration::from_secs(1),
};

impl Shape {
    /// Two model calls per agent, in waves of `parallel`.
    fn ideal(&self) -> Duration {
        let waves = self.agents.div_ceil(self.parallel) as u32;
        self.latency * 2 * waves
    }
}

/// What one run of one side measured.
struct Measured {
    wall: Duration,
    cpu: Duration,
    /// Request body bytes per model call.
    request_bytes: u64,
    /// Resident-set growth per live agent, when the most were live.
    per_agent: f64,
    calls: u64,
}

impl Measured {
    fn print(&self, side: &str, shape: &Shape) {
        println!(
            "  {side:<12} wall/ideal {:>5.2}   CPU per model call {:>6.0} µs   KiB per live agent {:>6.1}   request {:>5} B",
            self.wall.as_secs_f64() / shape.ideal().as_secs_f64(),
            self.cpu.as_secs_f64() * 1e6 / self.calls.max(1) as f64,
            self.per_agent / 1024.0,
            self.request_bytes,
        );
    }
}

/// The mock server: waits `latency`, then answers a conversation ending
/// with the user's message with a `read_file` call, one ending with a tool
/// result with text.
struct Mock {
    latency: Duration,
    calls: AtomicU64,
    bytes: AtomicU64,
}

impl Mock {
    /// Request bytes per call so far.
    fn request_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed) / self.calls.load(Ordering::Relaxed).max(1)
    }

    fn reset(&self) {
        self.calls.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }
}

/// The mock server's process, driven over its stdin: `reset` zeroes its
/// counts, `bytes` answers with the request bytes per call; end of input
/// stops it.
struct MockProcess {
    url: String,
    child: std::process::Child,
    commands: std::process::ChildStdin,
    answers: std::io::BufReader<std::process::ChildStdout>,
}

impl MockProcess {
    fn start(latency: Duration) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
            .env("MOCK_LATENCY_MS", latency.as_millis().to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the mock server");
        let commands = child.stdin.take().expect("stdin");
        let mut answers = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut url = String::new();
        answers.read_line(&mut url).expect("the mock's url");
        Self {
            url: url.trim().to_string(),
            child,
            commands,
            answers,
        }
    }

    fn ask(&mut self, command: &str) -> String {
        use std::io::{BufRead, Write};
        writeln!(self.commands, "{command}").expect("ask the mock");
        let mut answer = String::new();
        self.answers
            .read_line(&mut answer)
            .expect("the mock answers");
        answer.trim().to_string()
    }

    fn reset(&mut self) {
        self.ask("reset");
    }

    fn request_bytes(&mut self) -> u64 {
        self.ask("bytes").parse().expect("a number")
    }
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The mock server's side: serves until its input ends.
fn serve_mock(latency: Duration) {
    use std::io::BufRead;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (url, mock) = runtime.block_on(start_mock(latency));
    println!("{url}");
    for line in std::io::stdin().lock().lines() {
        match line.as_deref() {
            Ok("reset") => {
                mock.reset();
                println!("ok");
            }
            Ok("bytes") => println!("{}", mock.request_bytes()),
            _ => break,
        }
    }
}

async fn answer(
    State(mock): State<Arc<Mock>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    mock.calls.fetch_add(1, Ordering::Relaxed);
    mock.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    tokio::time::sleep(mock.latency).await;
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let last_is_tool = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let message = if last_is_tool {
        json!({"role": "assistant", "content": "The file says hello."})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}
        }]})
    };
    let reply = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": if last_is_tool { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from(reply.to_string()))
        .expect("response")
}

async fn start_mock(latency: Duration) -> (String, Arc<Mock>) {
    let mock = Arc::new(Mock {
        latency,
        calls: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(mock.clone());
    // A backlog for a thousand connections opened at once: tokio's default
    // (1024) drops SYNs past it, and a dropped SYN is retried only after a
    // second, which would be counted against both sides.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let listener = socket.listen(4096).expect("listen");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), mock)
}

/// CPU time of this process so far (user + system, every thread).
fn cpu_time() -> Duration {
    // Every thread of the process, to the nanosecond (/proc's ticks are
    // 10 ms, a tenth of a short run).
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
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

/// Agents started and not yet finished, on either side.
static LIVE: AtomicU64 = AtomicU64::new(0);

/// Samples the resident set every few milliseconds until `done`; returns
/// the peak growth over `base` divided by the most agents live at once.
fn sample_rss(base: f64, done: Arc<tokio::sync::Notify>) -> tokio::task::JoinHandle<f64> {
    tokio::spawn(async move {
        let (mut most_live, mut peak) = (0, base);
        loop {
            tokio::select! {
                _ = done.notified() => return (peak - base) / most_live.max(1) as f64,
                _ = tokio::time::sleep(Duration::from_millis(5)) => {
                    most_live = most_live.max(LIVE.load(Ordering::Relaxed));
                    peak = peak.max(resident_bytes());
                }
            }
        }
    })
}

/// Whether the agents are offered `tool`: only `read_file`, the one they
/// use, unless `TOOLS=all`.
fn offered(tool: &str) -> bool {
    std::env::var("TOOLS").as_deref() == Ok("all") || tool == "read_file"
}

/// The bare loop: the same two requests and the same file read per agent.
async fn bare(shape: Shape, url: &str, workspace: &std::path::Path) -> Measured {
    let client =
        async_openai::Client::with_config(OpenAIConfig::new().with_api_base(url).with_api_key(""));
    // cadre's own system prompt and tool schemas, so both loops send the
    // same requests.
    let tools: Vec<ChatCompletionTools> = cadre::runtime::tool::builtin_definitions()
        .iter()
        .filter(|def| offered(&def.name))
        .map(|def| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: def.name.clone(),
                    description: Some(def.description.clone()),
                    parameters: Some(def.input_schema.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    let system = cadre::runtime::prompt::system_prompt(&cadre::runtime::prompt::PromptInput::bare(
        Mode::Work,
        workspace,
    ));
    let limit = Arc::new(Semaphore::new(shape.parallel));
    let base = resident_bytes();
    let (cpu, start) = (cpu_time(), Instant::now());
    let done = Arc::new(tokio::sync::Notify::new());
    let rss = sample_rss(base, done.clone());
    let mut tasks = Vec::with_capacity(shape.agents);
    for _ in 0..shape.agents {
        let (client, tools, limit) = (client.clone(), tools.clone(), limit.clone());
        let system = system.clone();
        let file = workspace.join("notes.txt");
        tasks.push(tokio::spawn(async move {
            let _slot = limit.acquire_owned().await.expect("slot");
            LIVE.fetch_add(1, Ordering::Relaxed);
            let mut messages = vec![
                ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                    content: ChatCompletionRequestSystemMessageContent::Text(system),
                    name: None,
                }),
                ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                    content: ChatCompletionRequestUserMessageContent::Text(
                        "What do the notes say?".into(),
                    ),
                    name: None,
                }),
            ];
            loop {
                let request = CreateChatCompletionRequest {
                    model: "m".into(),
                    messages: messages.clone(),
                    tools: Some(tools.clone()),
                    ..Default::default()
                };
                let response = client.chat().create(request).await.expect("request");
                let message = response.choices[0].message.clone();
                let Some(calls) = message.tool_calls.clone() else {
                    break;
                };
                messages.push(ChatCompletionRequestMessage::Assistant(
                    ChatCompletionRequestAssistantMessage {
                        tool_calls: Some(calls.clone()),
                        ..Default::default()
                    },
                ));
                for call in calls {
                    let ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id,
                        function: FunctionCall { .. },
                    }) = call
                    else {
                        continue;
                    };
                    let text = std::fs::read_to_string(&file).expect("read");
                    messages.push(ChatCompletionRequestMessage::Tool(
                        ChatCompletionRequestToolMessage {
                            content: ChatCompletionRequestToolMessageContent::Text(text),
                            tool_call_id: id,
                        },
                    ));
                }
            }
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    for task in tasks {
        task.await.expect("agent");
    }
    Measured {
        wall: start.elapsed(),
        cpu: cpu_time() - cpu,
        per_agent: {
            done.notify_one();
            rss.await.expect("rss")
        },
        calls: 2 * shape.agents as u64,
        request_bytes: 0,
    }
}

/// cadre: one session per agent through a host with a file store.
async fn cadre_side(shape: Shape, url: &str, workspace: &std::path::Path) -> Measured {
    let data = tempfile::TempDir::new().expect("data");
    let mut builder = Host::builder(data.path())
        .model(ModelChoice::Server {
            base_url: url.into(),
            model: "m".into(),
            api_key: None,
            stream: false,
            options: Default::default(),
        })
        .max_subagents(1);
    if std::env::var("TOOLS").as_deref() != Ok("all") {
        builder = builder.builtins(&["read_file"]);
    }
    // `STORE=memory` keeps the store in memory, to see what the file costs.
    if std::env::var("STORE").as_deref() == Ok("memory") {
        builder = builder.memory_store();
    }
    let host = Arc::new(builder.build().await.expect("host"));
    let limit = Arc::new(Semaphore::new(shape.parallel));
    let base = resident_bytes();
    let (cpu, start) = (cpu_time(), Instant::now());
    let done = Arc::new(tokio::sync::Notify::new());
    let rss = sample_rss(base, done.clone());
    let mut tasks = Vec::with_capacity(shape.agents);
    for _ in 0..shape.agents {
        let (host, limit) = (host.clone(), limit.clone());
        let workspace = workspace.to_path_buf();
        tasks.push(tokio::spawn(async move {
            let _slot = limit.acquire_owned().await.expect("slot");
            LIVE.fetch_add(1, Ordering::Relaxed);
            let mut options = SessionOptions::new(&workspace);
            options.posture = Some(Posture::Bypass);
            options.interactive = false;
            // Admitted with the session's opening, in one store trip.
            options.first_message = Some("What do the notes say?".into());
            let mut session = host.start(options).await.expect("session");
            while let Some(Envelope { event, .. }) = session.events.recv().await {
                match event {
                    Event::TurnCompleted { .. } => {
                        let _ = session.handle.submit(Op::Shutdown);
                    }
                    Event::TurnFailed { message, .. } => panic!("agent failed: {message}"),
                    Event::SessionStopped { .. } => break,
                    _ => {}
                }
            }
            session.handle.stopped().await;
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    for task in tasks {
        task.await.expect("agent");
    }
    let measured = Measured {
        wall: start.elapsed(),
        cpu: cpu_time() - cpu,
        per_agent: {
            done.notify_one();
            rss.await.expect("rss")
        },
        calls: 2 * shape.agents as u64,
        request_bytes: 0,
    };
    if let Ok(host) = Arc::try_unwrap(host) {
        host.close().await;
    }
    measured
}

/// Runs each side of each shape in a process of its own (one side's
/// memory does not hide the other's), `ROUNDS` times each (3 unless set),
/// the sides alternating so that both see the machine's drift alike, and
/// prints each side's median and range.
fn run_apart() {
    let exe = std::env::current_exe().expect("exe");
    let shapes: Vec<&str> = match std::env::var("SHAPE").as_deref() {
        Ok("small") => vec!["small"],
        Ok("burst") => vec!["burst"],
        _ => vec!["small", "burst"],
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
        .max(1);
    for shape in shapes {
        let mut title = String::new();
        let mut runs: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            // bare, cadre, then cadre, bare: neither side always goes first.
            let mut order = [0, 1];
            if round % 2 == 1 {
                order.reverse();
            }
            for at in order {
                let side = ["bare", "cadre"][at];
                let out = std::process::Command::new(&exe)
                    .env("SHAPE", shape)
                    .env("SIDE", side)
                    .output()
                    .expect("run a side");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "the {side} side failed ({}): {text}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                let mut lines = text.lines();
                title = lines.next().unwrap_or_default().to_string();
                let figures = lines.find_map(Figures::read);
                runs[at]
                    .push(figures.unwrap_or_else(|| panic!("{side} printed no figures: {text}")));
            }
        }
        println!("{title} median of {rounds} runs (range)");
        for (side, runs) in ["bare loop", "cadre"].into_iter().zip(&runs) {
            let column = |f: fn(&Figures) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                let median = (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0;
                (median, v[0], v[v.len() - 1])
            };
            let (wall, cpu, kib) = (column(|f| f.wall), column(|f| f.cpu), column(|f| f.kib));
            println!(
                "  {side:<12} wall/ideal {:.2} ({:.2}-{:.2})   CPU per model call {:.0} µs ({:.0}-{:.0})   KiB per live agent {:.1} ({:.1}-{:.1})   request {} B",
                wall.0, wall.1, wall.2, cpu.0, cpu.1, cpu.2, kib.0, kib.1, kib.2, runs[0].request,
            );
        }
    }
}

/// One side's figures, read back from the line [`Measured::print`] wrote.
struct Figures {
    wall: f64,
    cpu: f64,
    kib: f64,
    request: u64,
}

impl Figures {
    fn read(line: &str) -> Option<Self> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |word: &str| {
            let at = words.iter().position(|w| *w == word)?;
            words.get(at + 1)?.parse::<f64>().ok()
        };
        Some(Self {
            wall: after("wall/ideal")?,
            cpu: after("call")?,
            kib: after("agent")?,
            request: after("request")? as u64,
        })
    }
}

fn main() {
    if let Some(ms) = std::env::var("MOCK_LATENCY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
    {
        return serve_mock(Duration::from_millis(ms));
    }
    if std::env::var("SIDE").is_err() && std::env::var("PHASES").is_err() {
        return run_apart();
    }
    let mut shapes = match std::env::var("SHAPE").as_deref() {
        Ok("small") => vec![SMALL],
        Ok("burst") => vec![BURST],
        _ => vec![SMALL, BURST],
    };
    // `AGENTS=N` changes the number of agents (for longer profiles).
    if let Some(agents) = std::env::var("AGENTS").ok().and_then(|n| n.parse().ok()) {
        for shape in &mut shapes {
            shape.agents = agents;
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let workspace = tempfile::TempDir::new().expect("workspace");
        std::fs::write(workspace.path().join("notes.txt"), "hello\n").expect("seed");
        if let Some(n) = std::env::var("PHASES").ok().and_then(|n| n.parse().ok()) {
            let mock = MockProcess::start(Duration::ZERO);
            let url = mock.url.clone();
            phases(n, &url, workspace.path()).await;
            let one = Shape {
                name: "sequential",
                agents: n,
                parallel: 1,
                latency: Duration::ZERO,
            };
            let bare = bare(one, &url, workspace.path()).await;
            println!(
                "bare loop: {:.0} µs per agent (2 model calls), CPU {:.0} µs per agent",
                bare.wall.as_secs_f64() * 1e6 / n as f64,
                bare.cpu.as_secs_f64() * 1e6 / n as f64
            );
            return;
        }
        for shape in shapes {
            let mut mock = MockProcess::start(shape.latency);
            let url = mock.url.clone();
            println!(
                "{} (ideal {:.2} s):",
                shape.name,
                shape.ideal().as_secs_f64()
            );
            // Warm the path (connections, allocator, lazy statics).
            let warm = Shape {
                agents: 16,
                parallel: 16,
                ..shape
            };
            let side = std::env::var("SIDE").unwrap_or_default();
            if side == "bare" {
                bare(warm, &url, workspace.path()).await;
            } else {
                cadre_side(warm, &url, workspace.path()).await;
            }
            if side != "cadre" {
                mock.reset();
                let mut bare = bare(shape, &url, workspace.path()).await;
                bare.request_bytes = mock.request_bytes();
                bare.print("bare loop", &shape);
            }
            if side != "bare" {
                mock.reset();
                let mut cadre = cadre_side(shape, &url, workspace.path()).await;
                cadre.request_bytes = mock.request_bytes();
                cadre.print("cadre", &shape);
            }
        }
    });
}

/// `PHASES=N`: one agent at a time, no server latency, `N` times: the wall
/// time of each phase of a short-lived agent (start, its turn, stop).
pub async fn phases(n: usize, url: &str, workspace: &std::path::Path) {
    let data = tempfile::TempDir::new().expect("data");
    let host = Host::builder(data.path())
        .model(ModelChoice::Server {
            base_url: url.into(),
            model: "m".into(),
            api_key: None,
            stream: false,
            options: Default::default(),
        })
        .build()
        .await
        .expect("host");
    let (mut start, mut turn, mut stop) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let cpu = cpu_time();
    for _ in 0..n {
        let t0 = Instant::now();
        let mut options = SessionOptions::new(workspace);
        options.posture = Some(Posture::Bypass);
        options.interactive = false;
        let mut session = host.start(options).await.expect("session");
        let t1 = Instant::now();
        session
            .handle
            .submit(Op::user("What do the notes say?"))
            .expect("submit");
        let trace = std::env::var("TRACE").is_ok();
        while let Some(Envelope { event, .. }) = session.events.recv().await {
            if trace {
                let kind = serde_json::to_value(&event)
                    .ok()
                    .and_then(|v| v["type"].as_str().map(str::to_string))
                    .unwrap_or_default();
                println!("{:>6} µs {kind}", t1.elapsed().as_micros());
            }
            if matches!(event, Event::TurnCompleted { .. }) {
                break;
            }
        }
        let t2 = Instant::now();
        session.handle.submit(Op::Shutdown).expect("shutdown");
        while session.events.recv().await.is_some() {}
        session.handle.stopped().await;
        let t3 = Instant::now();
        start += t1 - t0;
        turn += t2 - t1;
        stop += t3 - t2;
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!(
        "phases over {n} agents: start {:.0} µs, turn (2 model calls, 1 tool call) {:.0} µs, stop {:.0} µs; CPU {:.0} µs per agent",
        per(start),
        per(turn),
        per(stop),
        per(cpu_time() - cpu)
    );
}
