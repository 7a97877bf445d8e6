//! Workflows at scale, against a built-in mock server with a fixed latency
//! per model request: a workflow of N independent steps (a fan-out), each
//! one tool call (`list_dir`) and one answer, so two model requests.
//!
//! Reported per scenario, next to a bare async-openai loop doing the same
//! requests (the same system prompt and tool schemas) with the same
//! concurrency in the same process (the mock server runs in a process of
//! its own, so only the client's CPU and memory count):
//! - wall / ideal, where ideal = ceil(N / parallel) × 2 × latency;
//! - CPU per model call (user + system time of the process / 2N);
//! - peak resident memory per live step (peak RSS growth / steps at once).
//!
//! Scenarios (targets on a 2-core machine): N=200 at max_parallel 64 with
//! 50 ms per request (within 1.10× of ideal); N=1000 all at once with 1 s
//! per request (within 1.15×, under 80 KiB per live step). The file store
//! stays on. Run with `cargo bench --bench workflows`; `SCENARIO=small`
//! runs only the first, `SCENARIO=burst` only the second, `SIDE=cadre` or `SIDE=bare` only one side.
//!
//! `SCENARIO=nodes` (also run by default, last) compares the same
//! workflow all in this process with its steps spread over two `cadre
//! node` processes on loopback (docs/cluster.md): the overhead per remote
//! step (100 steps one at a time, no model latency: the difference in wall
//! time per step) and the throughput (200 steps, 64 at once, 50 ms per
//! request).

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

#[path = "../tests/it/support/mock.rs"]
#[allow(dead_code)]
mod mock;

#[path = "workflows/nodes.rs"]
mod nodes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionStreamOptions, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, FunctionCall, FunctionObject,
};
use cadre::actors::EventSink;
use cadre::actors::host::{Host, ModelChoice, SessionOptions};
use cadre::runtime::Mode;
use cadre::runtime::permission::Posture;
use cadre::runtime::prompt::{PromptInput, system_prompt};
use cadre::runtime::store::RunStatus;
use cadre::runtime::tool::{ToolRegistry, definition_gate};
use cadre::workflows::diagnostic::Source;
use cadre::workflows::engine::{Launch, RunSettings, start_on};
use cadre::workflows::validate::{Options, validate};
use futures::StreamExt;
use mock::{MockServer, Reply, sse_body, text_chunks, tool_call_chunks};
use serde_json::{Value, json};

fn main() {
    if let Some(ms) = std::env::var("WORKFLOWS_MOCK_LATENCY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
    {
        return serve_mock(Duration::from_millis(ms));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let only = std::env::var("SCENARIO").unwrap_or_default();
    runtime.block_on(async {
        if only == "nodes" {
            return nodes::scenarios().await;
        }
        if only != "burst" {
            scenario(200, 64, Duration::from_millis(50)).await;
        }
        if only != "small" {
            scenario(1000, 1000, Duration::from_secs(1)).await;
        }
        if only.is_empty() {
            nodes::scenarios().await;
        }
    });
}

/// The mock server in a process of its own, so that only the client's CPU
/// and memory are counted; it stops when dropped.
struct MockProcess {
    url: String,
    child: std::process::Child,
}

impl MockProcess {
    fn start(latency: Duration) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
            .env("WORKFLOWS_MOCK_LATENCY_MS", latency.as_millis().to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the mock server");
        let mut answers = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut url = String::new();
        answers.read_line(&mut url).expect("the mock's url");
        Self {
            url: url.trim().to_string(),
            child,
        }
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
    use std::io::Read;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = runtime.block_on(mock(latency));
    println!("{}", server.url);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(server);
}

/// A mock whose every reply waits `latency`: the first request of a
/// conversation gets a `list_dir` call, the second the answer.
async fn mock(latency: Duration) -> MockServer {
    let server = MockServer::start().await;
    server.respond_with(move |request| {
        let answered = request["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        let chunks = if answered == 0 {
            tool_call_chunks("c1", "list_dir", &json!({"path": "."}))
        } else {
            text_chunks("done")
        };
        Some(Reply::Stream {
            body: sse_body(&chunks),
            piece: None,
            gap: latency,
        })
    });
    server
}

/// User plus system CPU time of this process, every thread, to the
/// nanosecond (/proc's ticks are 10 ms).
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    statm
        .split_whitespace()
        .nth(1)
        .expect("rss")
        .parse::<u64>()
        .expect("pages")
        * 4096
}

/// Samples the resident set until stopped; returns the peak.
struct Peak {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Peak {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = resident_bytes();
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(resident_bytes());
                std::thread::sleep(Duration::from_millis(5));
            }
            peak.max(resident_bytes())
        });
        Self { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}

struct Measured {
    wall: Duration,
    cpu: Duration,
    peak_growth: u64,
}

async fn scenario(n: usize, parallel: usize, latency: Duration) {
    let server = MockProcess::start(latency);
    let ideal = latency * 2 * n.div_ceil(parallel) as u32;
    // SIDE=cadre or SIDE=bare measures one side alone (a fresh process has
    // no memory the other side's allocations left behind).
    let side = std::env::var("SIDE").unwrap_or_default();
    let none = || Measured {
        wall: Duration::ZERO,
        cpu: Duration::ZERO,
        peak_growth: 0,
    };
    let bare = if side == "cadre" {
        none()
    } else {
        bare_loop(&server.url, n, parallel).await
    };
    let cadre = if side == "bare" {
        none()
    } else {
        cadre_run(&server.url, n, parallel).await
    };
    let calls = 2 * n as u32;
    println!(
        "workflow of {n} steps, max_parallel {parallel}, {} ms per model request; ideal {:.2} s",
        latency.as_millis(),
        ideal.as_secs_f64()
    );
    for (name, m) in [("cadre", &cadre), ("bare async-openai", &bare)] {
        println!(
            "  {name:<18} wall {:>7.2} s = {:.3}× ideal · CPU {:>6.0} µs per model call · peak RSS growth {:>7.1} MiB = {:>6.1} KiB per live step",
            m.wall.as_secs_f64(),
            m.wall.as_secs_f64() / ideal.as_secs_f64(),
            m.cpu.as_secs_f64() * 1e6 / f64::from(calls),
            m.peak_growth as f64 / (1024.0 * 1024.0),
            m.peak_growth as f64 / 1024.0 / parallel.min(n) as f64,
        );
    }
}

/// The workflow through a host with a store on disk.
async fn cadre_run(url: &str, n: usize, parallel: usize) -> Measured {
    let workspace = tempfile::tempdir().expect("workspace");
    cadre_run_on(url, n, parallel, workspace.path(), None).await
}

/// The workflow in `workspace`, its steps on `cluster`'s nodes when given.
async fn cadre_run_on(
    url: &str,
    n: usize,
    parallel: usize,
    workspace: &std::path::Path,
    cluster: Option<cadre::workflows::cluster::Cluster>,
) -> Measured {
    let data = tempfile::tempdir().expect("data");
    let host = Host::builder(data.path())
        .model(ModelChoice::Server {
            base_url: url.to_string(),
            model: "m".into(),
            api_key: None,
            stream: true,
            options: Default::default(),
        })
        .build()
        .await
        .expect("host");
    let items: Vec<String> = (0..n).map(|i| format!("\"{i}\"")).collect();
    let text = format!(
        "[workflow]\nname = \"bench\"\nmax_parallel = {parallel}\n[[steps]]\nname = \"step\"\nfor_each = [{}]\nprompt = \"task {{{{item}}}}\"\n",
        items.join(", ")
    );
    let source = Source::file("bench.toml", text);
    let workflow = validate(&source, &Options::default())
        .expect("valid")
        .workflow;
    let mut options = SessionOptions::new(workspace);
    options.mode = Some(Mode::Work);
    options.posture = Some(Posture::Bypass);
    options.interactive = false;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let caller = host
        .workflow_caller(&options, EventSink::new(tx))
        .expect("caller");
    let before = resident_bytes();
    let peak = Peak::start();
    let cpu = cpu_time();
    let start_at = Instant::now();
    let handle = start_on(
        caller,
        Launch {
            workflow,
            source,
            file: None,
            settings: RunSettings::default(),
            resume: None,
            retry_failed: false,
        },
        cluster,
    )
    .await
    .expect("started");
    let report = handle.done.await.expect("report");
    let wall = start_at.elapsed();
    let cpu = cpu_time() - cpu;
    let peak = peak.stop();
    assert_eq!(report.status, RunStatus::Completed, "{report:#?}");
    let _ = handle.join.await;
    host.close().await;
    let _ = drain.await;
    Measured {
        wall,
        cpu,
        peak_growth: peak.saturating_sub(before),
    }
}

/// The same requests with async-openai alone: per step, a request, the
/// directory listed, a second request; `parallel` steps at once.
async fn bare_loop(url: &str, n: usize, parallel: usize) -> Measured {
    let client = Arc::new(async_openai::Client::with_config(
        OpenAIConfig::new().with_api_base(url).with_api_key("k"),
    ));
    let slots = Arc::new(tokio::sync::Semaphore::new(parallel));
    let before = resident_bytes();
    let peak = Peak::start();
    let cpu = cpu_time();
    let start_at = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (client, slots) = (client.clone(), slots.clone());
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await.expect("slot");
                bare_step(&client, i).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let wall = start_at.elapsed();
    let cpu = cpu_time() - cpu;
    let peak = peak.stop();
    Measured {
        wall,
        cpu,
        peak_growth: peak.saturating_sub(before),
    }
}

/// The tools cadre offers a step in Work mode, so both sides send the
/// same bytes.
fn tool_spec() -> Vec<ChatCompletionTools> {
    let registry = ToolRegistry::with_builtins();
    definition_gate(&registry, Mode::Work, None, None)
        .into_iter()
        .map(|spec| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: spec.name,
                    description: Some(spec.description),
                    parameters: Some(spec.parameters),
                    strict: None,
                },
            })
        })
        .collect()
}

async fn bare_step(client: &async_openai::Client<OpenAIConfig>, i: usize) {
    let tools = tool_spec();
    let mut messages = vec![
        ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(system_prompt(
                &PromptInput::bare(Mode::Work, std::path::Path::new(".")),
            )),
            name: None,
        }),
        ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(format!("task {i}")),
            name: None,
        }),
    ];
    loop {
        let request = CreateChatCompletionRequest {
            model: "m".into(),
            messages: messages.clone(),
            tools: Some(tools.clone()),
            stream: Some(true),
            stream_options: Some(ChatCompletionStreamOptions {
                include_usage: Some(true),
                include_obfuscation: None,
            }),
            ..Default::default()
        };
        let mut stream = client.chat().create_stream(request).await.expect("stream");
        let mut calls: BTreeMap<u32, (String, String, String)> = BTreeMap::new();
        while let Some(chunk) = stream.next().await {
            for choice in chunk.expect("chunk").choices {
                for tc in choice.delta.tool_calls.unwrap_or_default() {
                    let entry = calls.entry(tc.index).or_default();
                    if let Some(id) = tc.id {
                        entry.0 = id;
                    }
                    if let Some(f) = tc.function {
                        entry.1.push_str(&f.name.unwrap_or_default());
                        entry.2.push_str(&f.arguments.unwrap_or_default());
                    }
                }
            }
        }
        if calls.is_empty() {
            return;
        }
        messages.push(ChatCompletionRequestMessage::Assistant(
            ChatCompletionRequestAssistantMessage {
                tool_calls: Some(
                    calls
                        .values()
                        .map(|(id, name, args)| {
                            ChatCompletionMessageToolCalls::Function(
                                ChatCompletionMessageToolCall {
                                    id: id.clone(),
                                    function: FunctionCall {
                                        name: name.clone(),
                                        arguments: args.clone(),
                                    },
                                },
                            )
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        ));
        for (id, _, args) in calls.values() {
            let _: Value = serde_json::from_str(args).expect("args");
            let names: Vec<String> = std::fs::read_dir(".")
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            messages.push(ChatCompletionRequestMessage::Tool(
                ChatCompletionRequestToolMessage {
                    content: ChatCompletionRequestToolMessageContent::Text(names.join("\n")),
                    tool_call_id: id.clone(),
                },
            ));
        }
    }
}
