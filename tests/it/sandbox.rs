//! The sandbox end to end: `session.started` says what confines `bash`, and
//! nothing a call started outlives it, whether it is cancelled or times out.
//!
//! The floor refuses a background `&` before anything runs, so the orphan
//! tests call the real `bash` tool through the `ToolRunner` with no
//! permission layer, as a host without one would, under Full Access.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cadre::runtime::Mode;
use cadre::runtime::message::ToolCall;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::runtime::sandbox::sandbox_status;
use cadre::runtime::tool::{ErrorCode, ToolContext, ToolRegistry, ToolRunner, Workspace};
use pretty_assertions::assert_eq;
use serde_json::json;
use tempfile::TempDir;

use crate::support::SessionBuilder;
use crate::support::hermetic::Hermetic;
use crate::support::mock::MockServer;

mod walls;

/// A background writer that touches `late` after about `delay` seconds,
/// behind a command that keeps the call busy; its `sleep` carries a tag
/// (its fraction of a second) that finds it among the host's processes,
/// where its pid inside the sandbox's PID namespace means nothing.
fn writer(delay: u32, tag: u32) -> String {
    format!("(echo started > writer.pid; sleep {delay}.{tag}; touch late) & sleep 60")
}

/// Waits (polling, bounded) until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether a live host process runs `sleep <delay>.<tag>`.
fn alive(delay: u32, tag: u32) -> bool {
    let wanted = format!("sleep\0{delay}.{tag}\0");
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        cmdline == wanted.as_bytes() && !stat.contains(") Z ")
    })
}

/// A workspace, a data directory and a Full Access context with no
/// permission layer.
struct Host {
    ws: TempDir,
    _data: TempDir,
    ctx: Arc<ToolContext>,
}

impl Host {
    fn new() -> Self {
        let ws = TempDir::new().unwrap();
        let data = TempDir::new().unwrap();
        let session = data.path().join("sessions").join("s");
        let ctx = ToolContext {
            workspace: Workspace::new(ws.path()).unwrap(),
            authority: cadre::runtime::agent::LiveAuthority::root(Mode::Work, Posture::Bypass),
            sandbox: Arc::default(),
            rules: None,
            plan_file: Some(session.join("artifacts").join("plan.md")),
            session_dir: session,
            allowed_tools: None,
            authorizer: None,
            file_scopes: Vec::new(),
            agents: None,
            plans: None,
            snapshots: None,
            processes: None,
            hooks: None,
            workflows: None,
            goals: None,
        };
        Self {
            ws,
            _data: data,
            ctx: Arc::new(ctx),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }

    /// Starts the writer through the runner in its own task, like a turn's
    /// tool task, and waits until it runs; returns the task.
    async fn start(
        &self,
        (delay, tag): (u32, u32),
        timeout: Duration,
    ) -> tokio::task::JoinHandle<Result<String, ErrorCode>> {
        let command = writer(delay, tag);
        let runner = ToolRunner::new(Arc::new(ToolRegistry::with_builtins()), timeout);
        let call = ToolCall {
            id: "w".into(),
            name: "bash".into(),
            arguments: json!({ "command": command }).to_string(),
        };
        let ctx = self.ctx.clone();
        let task =
            tokio::spawn(async move { runner.execute(&call, &ctx).await.map_err(|e| e.code) });
        let pid_file = self.path("writer.pid");
        eventually("the writer to start", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
        })
        .await;
        eventually("the writer's sleep to show", || alive(delay, tag)).await;
        task
    }
}

/// Once the writer is dead it can never write: `late` must not exist then.
async fn assert_died_silently((delay, tag): (u32, u32), workspace: &Path) {
    eventually("the writer to die", || !alive(delay, tag)).await;
    assert!(
        !workspace.join("late").exists(),
        "the background writer wrote after its call ended"
    );
}

#[tokio::test]
async fn regression_a_background_writer_wrote_after_its_call_was_cancelled() {
    let host = Host::new();
    let writer = (2, std::process::id() * 10 + 1);
    let task = host.start(writer, Duration::from_secs(60)).await;
    // What cancelling a turn does to its tool task.
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    assert_died_silently(writer, host.ws.path()).await;
}

#[tokio::test]
async fn a_background_writer_dies_with_its_timed_out_call() {
    let host = Host::new();
    let writer = (4, std::process::id() * 10 + 2);
    let task = host.start(writer, Duration::from_secs(2)).await;
    assert_eq!(task.await.unwrap(), Err(ErrorCode::Timeout));
    assert_died_silently(writer, host.ws.path()).await;
}

#[tokio::test]
async fn session_started_names_the_sandbox_in_force() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).start().await;
    let first = session.next_event().await;
    let Event::SessionStarted { sandbox, .. } = first else {
        panic!("expected session.started first, got {first:?}");
    };
    assert_eq!(sandbox, sandbox_status().to_string());
    session.shutdown().await;
}

/// The binary fills the sandbox from its environment and `[sandbox]`: a
/// command sees `HOME` and the configured extra variable, never the API key.
#[tokio::test]
async fn exec_passes_commands_only_allow_listed_and_configured_variables() {
    let (ws, data) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "bash"
arguments = { command = "printenv HOME CADRE_EXTRA OPENAI_API_KEY CADRE_OTHER" }

[[response]]
iteration = 2
text = "done"
"#,
    )
    .unwrap();
    let config = data.path().join("config.toml");
    std::fs::write(&config, "[sandbox]\nenv = [\"CADRE_EXTRA\"]\n").unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(["exec", "--script", path(&script), "--config", path(&config)])
        .args([
            "--workspace",
            path(ws.path()),
            "--data-dir",
            path(data.path()),
        ])
        .args([
            "--posture",
            "bypass",
            "--output-format",
            "stream-json",
            "go",
        ])
        .env("HOME", "/home/someone")
        .env("OPENAI_API_KEY", "sk-secret")
        .env("CADRE_EXTRA", "extra-value")
        .env("CADRE_OTHER", "other-value")
        .env_remove("CADRE_HOME")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: serde_json::Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .find(|event: &serde_json::Value| event["type"] == "tool.result")
        .unwrap_or_else(|| panic!("no tool.result in {stdout}"));
    // printenv exits 1 because two of the four are missing.
    assert_eq!(
        result["output"], "exit code: 1\n/home/someone\nextra-value\n",
        "{stdout}"
    );
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The text header says once when commands run without a kernel sandbox,
/// and says nothing more when one is enforced.
#[test]
fn the_text_header_says_when_there_is_no_sandbox() {
    fn check(sandbox: &str, expected_last_line: &str) {
        let event = Event::SessionStarted {
            version: 1,
            session_id: "s".into(),
            mode: Mode::Work,
            posture: Posture::Suggest,
            workspace: "/ws".into(),
            model: "m".into(),
            sandbox: sandbox.into(),
            sandbox_walls: Vec::new(),
            mode_source: None,
            model_source: None,
            instructions: None,
        };
        let piece = cadre::cli::render::TextView::default()
            .event(&event)
            .expect("a header");
        assert_eq!(
            piece.text.trim_end().lines().last(),
            Some(expected_last_line),
            "{sandbox}"
        );
    }
    check("landlock-abi-7", "  workspace /ws");
    check(
        "landlock-abi-3 (partial)",
        "  sandbox landlock-abi-3 (partial): this kernel enforces only part of it",
    );
    check(
        "unavailable: this kernel has no Landlock",
        "  bash commands run under the reader's checks alone",
    );
}
