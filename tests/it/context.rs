//! Context windows on the real path (CX1–CX4): a turn whose tool outputs
//! would overflow the window compacts and completes; a server's
//! context-length error compacts and retries once; a failing summary falls
//! back; a request that never fits is the task's failure (exit 1), not a
//! retryable one (75). The mock enforces the window like a real server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cadre::runtime::context::SUMMARY_TAG;
use cadre::runtime::protocol::Event;
use serde_json::{Value, json};

use crate::support::cli::{cadre, dirs, events, exec_json, of_type, s};
use crate::support::mock::{MockServer, Overflow, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, turn_end};

mod agents;
mod crash;
mod goal;
mod history;

/// The size of the file the agent keeps reading.
const FILE_BYTES: usize = 5_000;

/// Whether a request is a compaction's summary request.
fn is_summary(request: &Value) -> bool {
    request.get("tools").is_none()
        && request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains(SUMMARY_TAG))
            })
}

/// The agent reads `big.txt` `reads` times, then answers "done"; a
/// summary request gets `summary`.
fn reader(mock: &MockServer, reads: usize, summary: Reply) {
    let asked = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| {
        if is_summary(request) {
            return Some(summary.clone());
        }
        let n = asked.fetch_add(1, Ordering::SeqCst);
        Some(if n < reads {
            Reply::sse(&tool_call_chunks(
                &format!("r{n}"),
                "read_file",
                &json!({"path": "big.txt"}),
            ))
        } else {
            Reply::sse(&text_chunks("done"))
        })
    });
}

async fn session(mock: &MockServer, window: Option<u64>) -> TestSession {
    let builder = SessionBuilder::openai(&mock.url);
    let builder = match window {
        Some(w) => builder.context_window(w),
        None => builder,
    };
    let session = builder.start().await;
    let text: String = (0..FILE_BYTES / 50)
        .map(|i| format!("line {i:04} of a file that fills the context window.\n"))
        .collect();
    std::fs::write(
        session.workspace_path().join("big.txt"),
        &text[..FILE_BYTES],
    )
    .expect("file");
    session
}

fn compactions(events: &[Event]) -> Vec<(&'static str, u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCompacted {
                kind,
                tokens_before,
                tokens_after,
                ..
            } => Some((kind.as_str(), *tokens_before, *tokens_after)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_turn_whose_reads_would_overflow_an_8k_window_compacts_and_completes() {
    let mock = MockServer::start().await;
    // 8k tokens as the mock counts them (bytes / 4).
    mock.enforce_window(32_000, Overflow::OpenAi);
    reader(
        &mock,
        10,
        Reply::sse(&text_chunks("Read big.txt again and again.")),
    );
    let mut session = session(&mock, Some(8_000)).await;
    let events = session.turn("read big.txt ten times").await;
    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    let done = compactions(&events);
    assert!(!done.is_empty(), "never compacted");
    assert!(
        done.iter()
            .all(|(kind, before, after)| *kind == "model" && after < before)
    );
    // The threshold came first: the window never refused a request, and
    // every request paired its calls and results.
    assert_eq!(mock.overflows(), 0);
    assert_eq!(mock.violations(), Vec::<String>::new());
    let Event::TurnCompleted { context, .. } = turn_end(&events) else {
        unreachable!()
    };
    let context = context.expect("the context");
    assert_eq!(context.window, 8_000);
    assert!(context.used < 8_000, "{context:?}");
    // The full history is stored; the compacted form is what is sent.
    let last = mock.requests().last().cloned().expect("a request");
    let sent = last["messages"].to_string();
    assert!(sent.contains("[cadre: context compacted]"));
    assert!(
        sent.contains("read big.txt ten times"),
        "the user's request survives"
    );
    session.shutdown().await;
}

async fn overflow_then_retry(shape: Overflow) {
    let mock = MockServer::start().await;
    // The configured window (the default, 128k) is wrong: the server's is
    // about 9k tokens, and it says so only by refusing.
    mock.enforce_window(36_000, shape);
    reader(&mock, 6, Reply::sse(&text_chunks("unused")));
    let mut session = session(&mock, None).await;
    let events = session.turn("read big.txt six times").await;
    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{shape:?}: {:?}",
        turn_end(&events)
    );
    assert!(mock.overflows() >= 1, "{shape:?}: the window never refused");
    let kinds: Vec<_> = compactions(&events).into_iter().map(|c| c.0).collect();
    assert!(kinds.contains(&"fallback"), "{shape:?}: {kinds:?}");
    assert_eq!(mock.violations(), Vec::<String>::new());
    session.shutdown().await;
}

#[tokio::test]
async fn a_context_length_error_compacts_and_retries_once_for_every_server_shape() {
    for shape in [Overflow::OpenAi, Overflow::Vllm, Overflow::LlamaCpp] {
        overflow_then_retry(shape).await;
    }
}

#[tokio::test]
async fn a_failing_summary_request_falls_back_to_stubs_and_the_turn_completes() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    reader(&mock, 8, Reply::error(400, "summaries are not served here"));
    let mut session = session(&mock, Some(8_000)).await;
    let events = session.turn("read big.txt eight times").await;
    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    let kinds: Vec<_> = compactions(&events).into_iter().map(|c| c.0).collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == "fallback"),
        "{kinds:?}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    let last = mock.requests().last().cloned().expect("a request");
    assert!(
        last["messages"]
            .to_string()
            .contains("removed by compaction"),
        "old outputs are stubs"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn exec_exits_1_not_75_when_the_conversation_never_fits() {
    let mock = MockServer::start().await;
    // Whatever is sent is too long.
    mock.enforce_window(100, Overflow::OpenAi);
    let (ws, data) = dirs();
    let out = exec_json(Some(&mock.url), (&ws, &data), &[], "hello").await;
    assert_eq!(out.code, 1, "stderr: {}", out.stderr);
    let events = events(&out);
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed[0]["category"], "agent");
    assert_eq!(failed[0]["retryable"], false);
    assert!(
        failed[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not fit the model's context window")),
        "{:?}",
        failed[0]
    );
    // The server stated its window (25 tokens): nothing can fit, so the
    // turn ends at once, without a retry that could not succeed.
    assert_eq!(mock.overflows(), 1);
    assert!(
        failed[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("window of 25 tokens")),
        "{:?}",
        failed[0]
    );
}

/// `cadre exec` compacts under `[context] window`, says so in stream-json
/// and in text, and a resume sends the compacted form, not the history.
#[tokio::test]
async fn exec_compacts_under_the_configured_window_and_a_resume_sends_the_compacted_form() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    reader(
        &mock,
        10,
        Reply::sse(&text_chunks("Read big.txt ten times.")),
    );
    let (ws, data) = dirs();
    let text: String = (0..FILE_BYTES / 50)
        .map(|i| format!("line {i:04} of a file that fills the context window.\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), &text[..FILE_BYTES]).expect("file");
    let config = data.path().join("cfg.toml");
    std::fs::write(&config, "[context]\nwindow = 8000\n").expect("config");
    let config = s(&config).to_string();
    let flags = ["--config", config.as_str(), "--posture", "bypass"];
    let out = exec_json(
        Some(&mock.url),
        (&ws, &data),
        &flags,
        "read big.txt ten times",
    )
    .await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let events = events(&out);
    let compacted = of_type(&events, "context.compacted");
    assert!(!compacted.is_empty(), "never compacted");
    assert_eq!(compacted[0]["agent"], "main");
    assert_eq!(compacted[0]["kind"], "model");
    let completed = of_type(&events, "turn.completed");
    assert_eq!(completed[0]["context"]["window"], 8000);
    assert_eq!(mock.overflows(), 0);

    // `sessions show` lists the conversation with the compaction's marker
    // and one line for what it replaced; `--full` lists that too.
    let show = |full: bool| {
        let mut args = vec!["sessions", "show", "latest", "--data-dir", s(data.path())];
        if full {
            args.push("--full");
        }
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cadre(&args).await
        }
    };
    let shown = show(false).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("── compaction (model, about "),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains("replaced by a compaction, still stored (--full lists them)"),
        "{}",
        shown.stdout
    );
    assert!(!shown.stdout.contains("(replaced)"), "{}", shown.stdout);
    let full = show(true).await;
    assert!(full.stdout.contains("(replaced)"), "{}", full.stdout);
    assert!(
        full.stdout.lines().count() > shown.stdout.lines().count(),
        "{}",
        full.stdout
    );

    let before = mock.requests().len();
    let resumed = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--config",
        &config,
        "--resume",
        "latest",
        "and now?",
    ])
    .await;
    assert_eq!(resumed.code, 0, "stderr: {}", resumed.stderr);
    // Text output: how full the context is on the turn's last line.
    assert!(
        resumed.stderr.contains("% of 8000"),
        "stderr: {}",
        resumed.stderr
    );
    let first = &mock.requests()[before];
    let messages = first["messages"].as_array().expect("messages");
    assert!(
        messages[1]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("[cadre: context compacted]")),
        "{:?}",
        messages[1]
    );
    let reads = messages.iter().filter(|m| m["role"] == "tool").count();
    assert!(
        reads < 10,
        "the resume sent the whole history: {reads} reads"
    );
}

#[tokio::test]
async fn compact_on_demand_compacts_before_the_next_turn_and_a_script_keeps_its_place() {
    use cadre::runtime::model::{Script, ScriptedModel};
    use cadre::runtime::protocol::Op;
    let script = Script::from_toml(
        "[[response]]\nturn = 1\ntext = \"first answer\"\n\n[[response]]\nturn = 2\ntext = \"second answer\"\n",
        "compact.toml",
    )
    .expect("script");
    let model = Arc::new(ScriptedModel::new(script, "compact"));
    let mut session = SessionBuilder::model(model).start().await;
    session.turn("one").await;
    // Idle: the next turn compacts before its first request.
    session.submit(Op::Compact);
    let events = session.turn("two").await;
    assert_eq!(
        compactions(&events)
            .into_iter()
            .map(|c| c.0)
            .collect::<Vec<_>>(),
        ["model"]
    );
    let answers: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["second answer"]);
    session.shutdown().await;
}
