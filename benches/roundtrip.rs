//! What orchestration costs beside the model.
//!
//! 1. One tool-call round trip (request → tool call → `list_dir` → request →
//!    final answer) against a local mock server: cadre (one turn of a fresh
//!    session: admission to the store, the turn actor, the gates, the tool
//!    runner) versus a bare async-openai loop doing the same requests and the
//!    same directory listing. Target: cadre within 1.5x. Starting and
//!    stopping the session is measured apart.
//! 2. Admission latency: one store transaction, and a message's way through
//!    the session actor and the store to `input.admitted`.
//! 3. Sub-agent fan-out: 200 sub-agents through the `agent` tool, at most 64
//!    at once, each taking the same time. Target: within 10% of the ideal.
//! 4. The memory of a live agent: the resident-set growth per idle session
//!    actor, over many. Target: under 80 KiB.
//!
//! Run with `cargo bench --bench roundtrip`; `ROUNDS=N` changes the sample size.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

#[path = "../tests/it/support/mock.rs"]
#[allow(dead_code)]
mod mock;

use std::collections::BTreeMap;
use std::sync::Arc;
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
use cadre::actors::store::StoreHandle;
use cadre::actors::{PermissionConfig, SessionConfig, SessionServices, Subagents, spawn_session};
use cadre::runtime::Mode;
use cadre::runtime::agent::SameModel;
use cadre::runtime::model::{
    OpenAiClient, OpenAiConfig, RetryPolicy, Retrying, Script, ScriptedModel,
};
use cadre::runtime::paths::DataDir;
use cadre::runtime::permission::Posture;
use cadre::runtime::prompt::{PromptInput, system_prompt};
use cadre::runtime::protocol::{Event, Op};
use cadre::runtime::store::{Admission, NewSession, Source, Store, store_path};
use cadre::runtime::tool::{ToolRegistry, ToolRunner, Workspace, definition_gate};
use futures::StreamExt;
use mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use serde_json::json;

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mock = MockServer::start().await;
        // The mock answers a conversation that ends with the user's message
        // with a tool call, and one that ends with a tool result with text.
        mock.respond_with(|request| {
            let last = request["messages"].as_array()?.last()?;
            Some(match last["role"].as_str()? {
                "tool" => Reply::sse(&text_chunks("The directory has three files.")),
                _ => Reply::sse(&tool_call_chunks(
                    "call_1",
                    "list_dir",
                    &json!({"path": "."}),
                )),
            })
        });
        let workspace = tempfile::TempDir::new().expect("workspace");
        for name in ["a.rs", "b.rs", "c.rs"] {
            std::fs::write(workspace.path().join(name), "fn main() {}\n").expect("seed");
        }
        let data = tempfile::TempDir::new().expect("data");

        // Both sides keep their client (and its connection pool) across
        // rounds, as a host would; cadre's registry is shared by its sessions.
        let client = async_openai::Client::with_config(
            OpenAIConfig::new()
                .with_api_base(&mock.url)
                .with_api_key(""),
        );
        let shared = services(&mock.url).await;
        // Warm up both paths (connections, allocator, lazy statics).
        for _ in 0..20 {
            bare_round(&client, workspace.path()).await;
            cadre_round(&shared, workspace.path(), data.path()).await;
        }
        // Interleave the two so machine noise hits both alike.
        let mut bare = Vec::with_capacity(rounds);
        let mut ours = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            bare.push(bare_round(&client, workspace.path()).await);
            ours.push(cadre_round(&shared, workspace.path(), data.path()).await);
        }
        let (bare_med, ours_med) = (percentile(&mut bare, 50), percentile(&mut ours, 50));
        println!("tool-call round trip ({rounds} rounds, 2 model requests + 1 tool call each):");
        println!(
            "  bare async-openai loop  median {:>8.1} µs   p90 {:>8.1} µs",
            us(bare_med),
            us(percentile(&mut bare, 90))
        );
        println!(
            "  cadre turn              median {:>8.1} µs   p90 {:>8.1} µs",
            us(ours_med),
            us(percentile(&mut ours, 90))
        );
        println!(
            "  ratio cadre / bare      {:.2}x   (target ≤ 1.50x)",
            ours_med.as_secs_f64() / bare_med.as_secs_f64()
        );

        // Where cadre's extra time goes.
        let mut spawn = Vec::with_capacity(rounds);
        let mut tool = Vec::with_capacity(rounds);
        let ctx = tool_context(workspace.path(), data.path());
        let call = cadre::runtime::ToolCall { id: "c".into(), name: "list_dir".into(), arguments: "{\"path\":\".\"}".into() };
        for _ in 0..rounds {
            let start = Instant::now();
            let (session, _events) = spawn_session(config(workspace.path(), data.path()), shared.clone()).await.expect("session");
            session.submit(Op::Shutdown).expect("shutdown");
            session.stopped().await;
            spawn.push(start.elapsed());
            let start = Instant::now();
            shared.tools.execute(&call, &ctx).await.expect("list_dir");
            tool.push(start.elapsed());
        }
        println!("  of which: session start + stop median {:>6.1} µs; list_dir through the runner median {:>6.1} µs",
            us(percentile(&mut spawn, 50)), us(percentile(&mut tool, 50)));

        let messages = 500;
        let (store_median, session_median) = admission_latency(messages, workspace.path()).await;
        println!("admission ({messages} messages, file store in WAL mode):");
        println!("  one admission transaction   median {:>8.1} µs", us(store_median));
        println!("  submit → input.admitted     median {:>8.1} µs   (through the session actor and the store)", us(session_median));

        let (agents, parallel, work) = (200, 64, Duration::from_millis(200));
        let (took, ideal) = fan_out(agents, parallel, work, workspace.path(), data.path()).await;
        println!("sub-agent fan-out ({agents} agents, at most {parallel} at once, each answering after {} ms):", work.as_millis());
        println!(
            "  wall time {:>7.1} ms   ideal {:>7.1} ms   overhead {:.1}%   (target ≤ 10%)",
            took.as_secs_f64() * 1e3,
            ideal.as_secs_f64() * 1e3,
            (took.as_secs_f64() / ideal.as_secs_f64() - 1.0) * 100.0
        );

        let agents = 1000;
        let per_agent = live_agent_memory(agents, workspace.path(), data.path()).await;
        println!("live agent memory ({agents} idle sessions):");
        println!(
            "  resident growth per agent {:.1} KiB   (target < 80 KiB)",
            per_agent / 1024.0
        );
    });
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentile(samples: &mut [Duration], p: usize) -> Duration {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}

/// The tools cadre offers in Work mode, so both sides send the same bytes.
fn tool_spec() -> Vec<ChatCompletionTools> {
    let registry = ToolRegistry::with_builtins();
    definition_gate(
        &registry,
        Mode::Work,
        None,
        Some(std::path::Path::new("/plan.md")),
    )
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

/// The same round trip with async-openai alone: stream, assemble the call by
/// index, list the directory, send the result, read the answer.
async fn bare_round(
    client: &async_openai::Client<OpenAIConfig>,
    workspace: &std::path::Path,
) -> Duration {
    let start = Instant::now();
    let tools = tool_spec();
    let mut messages = vec![
        ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(system_prompt(
                &PromptInput::bare(Mode::Work, workspace),
            )),
            name: None,
        }),
        ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text("what is here?".into()),
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
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.expect("chunk");
            for choice in chunk.choices {
                if let Some(t) = choice.delta.content {
                    text.push_str(&t);
                }
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
            assert!(!text.is_empty());
            return start.elapsed();
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
            let args: serde_json::Value = serde_json::from_str(args).expect("args");
            let dir = workspace.join(args["path"].as_str().unwrap_or("."));
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            messages.push(ChatCompletionRequestMessage::Tool(
                ChatCompletionRequestToolMessage {
                    content: ChatCompletionRequestToolMessageContent::Text(names.join("\n")),
                    tool_call_id: id.clone(),
                },
            ));
        }
    }
}

/// The services a host shares between its sessions: the model client, the
/// tool registry, and one store (here in memory).
async fn services(url: &str) -> SessionServices {
    let client = OpenAiClient::new(OpenAiConfig::new(url, "m")).expect("client");
    SessionServices {
        model: Arc::new(Retrying::new(Arc::new(client), RetryPolicy::default())),
        tools: ToolRunner::new(
            Arc::new(ToolRegistry::with_builtins()),
            Duration::from_secs(30),
        ),
        store: Some(StoreHandle::in_memory().await.expect("store")),
        summarizer: None,
        subagents: None,
    }
}

fn config(workspace: &std::path::Path, data: &std::path::Path) -> SessionConfig {
    let session_id = uuid::Uuid::new_v4().to_string();
    let paths = DataDir::new(data).session(&session_id);
    let mut config = SessionConfig::new(
        session_id,
        Workspace::new(workspace).expect("workspace"),
        paths,
    );
    config.max_iterations = 10;
    // What the bare loop does, cadre allows: the comparison is of
    // orchestration, not of prompts.
    config.permissions = PermissionConfig {
        posture: Posture::Bypass,
        ..PermissionConfig::default()
    };
    config
}

/// One round trip through cadre: in a new session (started before the
/// clock starts, so both sides begin from an empty conversation), from the
/// user's message to the turn's completion, which includes admitting the
/// message to the store and recording the turn.
async fn cadre_round(
    services: &SessionServices,
    workspace: &std::path::Path,
    data: &std::path::Path,
) -> Duration {
    let (session, mut events) = spawn_session(config(workspace, data), services.clone())
        .await
        .expect("session");
    let start = Instant::now();
    session.submit(Op::user("what is here?")).expect("submit");
    while let Some(cadre::runtime::protocol::Envelope { event, .. }) = events.recv().await {
        match event {
            Event::TurnCompleted { .. } => break,
            Event::TurnFailed { message, .. } => panic!("turn failed: {message}"),
            _ => {}
        }
    }
    let elapsed = start.elapsed();
    session.submit(Op::Shutdown).expect("shutdown");
    session.stopped().await;
    elapsed
}

fn tool_context(
    workspace: &std::path::Path,
    data: &std::path::Path,
) -> cadre::runtime::tool::ToolContext {
    let paths = DataDir::new(data).session("bench");
    cadre::runtime::tool::ToolContext {
        workspace: Workspace::new(workspace).expect("workspace"),
        authority: cadre::runtime::agent::LiveAuthority::root(
            Mode::Work,
            cadre::runtime::permission::Posture::Bypass,
        ),
        sandbox: Default::default(),
        session_dir: paths.dir.clone(),
        plan_file: Some(paths.plan_file()),
        allowed_tools: None,
        authorizer: None,
        file_scopes: Vec::new(),
        agents: None,
        plans: None,
        workflows: None,
        goals: None,
        rules: None,
        snapshots: None,
        processes: None,
        hooks: None,
    }
}

/// Admission latency: the store transaction alone, and end to end through a
/// session whose turn is busy (so each message is admitted and queued).
async fn admission_latency(n: usize, workspace: &std::path::Path) -> (Duration, Duration) {
    let dir = tempfile::TempDir::new().expect("dir");
    let mut store = Store::open(&store_path(dir.path())).expect("store");
    store
        .create_session(&NewSession {
            id: "bench",
            workspace,
            mode: Mode::Work,
            posture: Posture::Bypass,
        })
        .expect("session");
    let mut direct = Vec::with_capacity(n);
    for i in 0..n {
        let key = format!("k{i}");
        let start = Instant::now();
        store
            .admit(&Admission {
                session_id: "bench",
                content: "a message of ordinary length, as a user would type it",
                source: Source::User,
                intent: None,
                idempotency_key: &key,
                front: false,
                plan_sha256: None,
            })
            .expect("admit");
        direct.push(start.elapsed());
    }
    drop(store);

    // A session whose first turn never ends: every later message is
    // admitted and queued behind it.
    let script = Script::from_toml(
        "[[response]]\nrepeat = true\ndelay_ms = 3600000\ntext = \"never\"\n",
        "bench",
    )
    .expect("script");
    let dir = tempfile::TempDir::new().expect("dir");
    let (store, store_task) =
        StoreHandle::start(Store::open(&store_path(dir.path())).expect("store"))
            .await
            .expect("store");
    let services = SessionServices {
        model: Arc::new(ScriptedModel::new(script, "busy")),
        tools: ToolRunner::new(
            Arc::new(ToolRegistry::with_builtins()),
            Duration::from_secs(30),
        ),
        store: Some(store.clone()),
        summarizer: None,
        subagents: None,
    };
    let (session, mut events) = spawn_session(config(workspace, dir.path()), services)
        .await
        .expect("session");
    session
        .submit(Op::user("the turn that keeps the session busy"))
        .expect("submit");
    while let Some(cadre::runtime::protocol::Envelope { event, .. }) = events.recv().await {
        if matches!(event, Event::TurnStarted { .. }) {
            break;
        }
    }
    let mut through = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        session
            .submit(Op::user(format!("message {i}")))
            .expect("submit");
        while let Some(cadre::runtime::protocol::Envelope { event, .. }) = events.recv().await {
            if matches!(event, Event::InputAdmitted { .. }) {
                break;
            }
        }
        through.push(start.elapsed());
    }
    session.submit(Op::Shutdown).expect("shutdown");
    session.stopped().await;
    store.close(store_task).await;
    (percentile(&mut direct, 50), percentile(&mut through, 50))
}

/// `agents` sub-agents through the `agent` tool, at most `parallel` at once,
/// each answering after `work`: the parent (a scripted model that answers
/// at once) spawns a wave in the background, waits for it, and spawns the
/// next. With equal work the ideal is one `work` per wave. Returns the wall
/// time from the parent's message to its turn's end, and the ideal.
async fn fan_out(
    agents: usize,
    parallel: usize,
    work: Duration,
    workspace: &std::path::Path,
    data: &std::path::Path,
) -> (Duration, Duration) {
    let mut script = format!(
        "[[response]]\nrole = \"worker\"\nrepeat = true\ndelay_ms = {}\ntext = \"done\"\n",
        work.as_millis()
    );
    let ids: Vec<usize> = (1..=agents).collect();
    let waves: Vec<&[usize]> = ids.chunks(parallel).collect();
    let mut iteration = 0;
    let mut entry = |calls: Vec<String>| {
        iteration += 1;
        script.push_str(&format!(
            "[[response]]\nrole = \"main\"\niteration = {iteration}\n"
        ));
        for call in calls {
            script.push_str(&format!(
                "[[response.tool_calls]]\nname = \"agent\"\narguments = {call}\n"
            ));
        }
    };
    for wave in &waves {
        entry(
            wave.iter()
                .map(|n| {
                    format!("{{ action = \"spawn\", prompt = \"task {n}\", background = true }}")
                })
                .collect(),
        );
        entry(
            wave.iter()
                .map(|n| format!("{{ action = \"wait\", agent_id = \"{n}\" }}"))
                .collect(),
        );
    }
    script.push_str(&format!(
        "[[response]]\nrole = \"main\"\niteration = {}\ntext = \"all {agents} done\"\n",
        iteration + 1
    ));
    let model: Arc<dyn cadre::runtime::model::ModelClient> = Arc::new(ScriptedModel::new(
        Script::from_toml(&script, "fan-out").expect("script"),
        "fan-out",
    ));
    let services = SessionServices {
        model: model.clone(),
        tools: ToolRunner::new(
            Arc::new(ToolRegistry::with_builtins()),
            Duration::from_secs(30),
        ),
        store: Some(StoreHandle::in_memory().await.expect("store")),
        summarizer: None,
        subagents: Some(Arc::new(Subagents::new(
            BTreeMap::new(),
            Arc::new(SameModel(model)),
            parallel as u32,
        ))),
    };
    let mut config = config(workspace, data);
    config.max_iterations = 2 * waves.len() as u32 + 1;
    let (session, mut events) = spawn_session(config, services).await.expect("session");
    let start = Instant::now();
    session.submit(Op::user("fan out")).expect("submit");
    let mut completed = 0;
    while let Some(cadre::runtime::protocol::Envelope { event, .. }) = events.recv().await {
        match event {
            Event::AgentCompleted { .. } => completed += 1,
            Event::TurnCompleted { .. } => break,
            Event::TurnFailed { message, .. } => panic!("fan-out failed: {message}"),
            _ => {}
        }
    }
    let took = start.elapsed();
    assert_eq!(completed, agents, "every sub-agent reported");
    session.submit(Op::Shutdown).expect("shutdown");
    session.stopped().await;
    (took, work * waves.len() as u32)
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

/// Resident-set growth per idle session actor (with its event channel and
/// session directory), averaged over `n`.
async fn live_agent_memory(n: usize, workspace: &std::path::Path, data: &std::path::Path) -> f64 {
    let shared = services("http://127.0.0.1:9/v1").await;
    let before = resident_bytes();
    let mut live = Vec::with_capacity(n);
    for _ in 0..n {
        live.push(
            spawn_session(config(workspace, data), shared.clone())
                .await
                .expect("session"),
        );
    }
    for (session, _) in &live {
        session.snapshot().await.expect("alive");
    }
    let after = resident_bytes();
    for (session, _) in live {
        session.submit(Op::Shutdown).expect("shutdown");
        session.stopped().await;
    }
    (after - before) / n as f64
}
