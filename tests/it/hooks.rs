//! Hooks (H1) through the binary against the mock server: the JSON a hook
//! reads, a `pre_tool_use` deny at every hop (the session and its goal
//! continuations, a sub-agent, the verifier, a workflow step here and on a
//! loopback node), an "allow" that lifts nothing, a project's hooks
//! waiting for trust, and a hanging hook failing closed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::cluster::{Node, SECRET, coordinator, finish};
use crate::support::cli::{Output, cadre, events, of_type, s, workflow_events};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::workflows::{answered, prompt_of};

pub(super) fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(&tool_call_chunks(id, name, &args))
}

pub(super) fn text(text: &str) -> Reply {
    Reply::sse(&text_chunks(text))
}

/// A config file with `toml` in a directory of its own.
pub(super) fn config(dir: &TempDir, toml: &str) -> PathBuf {
    let path = dir.path().join("hooks.toml");
    std::fs::write(&path, toml).expect("config");
    path
}

/// Refuses edits under `migrations/` (exit 2), and the secret's reading
/// (a JSON deny).
const GUARDS: &str = r#"
[[hooks.pre_tool_use]]
matcher = "write_file(migrations/**)"
command = "echo 'edits under migrations/ are refused' >&2; exit 2"

[[hooks.pre_tool_use]]
matcher = "read_file(secret.txt)"
command = "echo '{\"decision\": \"deny\", \"reason\": \"the secret stays unread\"}'"
"#;

/// The tool messages of every request the mock received, once per call,
/// with the call's id.
fn tool_messages(mock: &MockServer) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for request in mock.requests() {
        for m in request["messages"].as_array().into_iter().flatten() {
            let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
            if m["role"] == "tool" && !seen.iter().any(|(i, _)| *i == id) {
                let text = m["content"].as_str().unwrap_or_default().to_string();
                seen.push((id, text));
            }
        }
    }
    seen
}

pub(super) fn exec_args<'a>(
    mock: &'a MockServer,
    ws: &'a Path,
    data: &'a Path,
    config: &'a Path,
) -> Vec<&'a str> {
    vec![
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--max-retries",
        "0",
        "--workspace",
        s(ws),
        "--data-dir",
        s(data),
        "--config",
        s(config),
        "--output-format",
        "stream-json",
    ]
}

#[tokio::test]
async fn a_pre_tool_use_hook_reads_the_documented_event() {
    let hooks = TempDir::new().expect("hooks dir");
    let log = hooks.path().join("events.jsonl");
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.pre_tool_use]]\nmatcher = \"write_file\"\ncommand = \"cat >> '{}'\"\n",
            log.display()
        ),
    );
    let mock = MockServer::start().await;
    mock.push([
        call(
            "w",
            "write_file",
            json!({"path": "src/../notes.txt", "content": "hi"}),
        ),
        call("r", "read_file", json!({"path": "notes.txt"})),
        text("done"),
    ]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let root = ws.path().canonicalize().expect("canonical");
    let mut args = exec_args(&mock, &root, data.path(), &cfg);
    args.extend(["--posture", "bypass", "write the notes"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    let session_id = events[0]["session_id"].as_str().expect("id");
    let recorded: Vec<Value> = std::fs::read_to_string(&log)
        .expect("the hook ran")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    // Only the matching call; the read ran no hook.
    pretty_assertions::assert_eq!(
        recorded,
        [json!({
            "event": "pre_tool_use",
            "session_id": session_id,
            "agent": "main",
            "role": "main",
            "step": null,
            "mode": "work",
            "posture": "bypass",
            "cwd": s(&root),
            "tool": "write_file",
            "arguments": {"path": "src/../notes.txt", "content": "hi"},
            "paths": [{"written": "src/../notes.txt", "path": format!("{}/notes.txt", s(&root))}],
        })]
    );
    assert!(
        root.join("notes.txt").exists(),
        "no objection: the write ran"
    );
}

#[tokio::test]
async fn a_deny_holds_for_the_session_a_sub_agent_and_the_verifier() {
    let hooks = TempDir::new().expect("hooks dir");
    let cfg = config(&hooks, GUARDS);
    let mock = MockServer::start().await;
    mock.push([
        // The goal's first continuation.
        call(
            "s1",
            "write_file",
            json!({"path": "migrations/1.sql", "content": "x"}),
        ),
        call(
            "s2",
            "agent",
            json!({"action": "spawn", "prompt": "write migrations/2.sql"}),
        ),
        // The sub-agent.
        call(
            "a1",
            "write_file",
            json!({"path": "./migrations/2.sql", "content": "x"}),
        ),
        text("refused"),
        // The session claims.
        call(
            "g",
            "update_goal",
            json!({"status": "complete", "claim": "nothing to write"}),
        ),
        // The verifier.
        call("v1", "read_file", json!({"path": "secret.txt"})),
        text("VERDICT: PASS"),
    ]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    std::fs::write(ws.path().join("secret.txt"), "s3cret").expect("secret");
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "--goal", "write the migrations"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let denials: Vec<(String, String)> = tool_messages(&mock)
        .into_iter()
        .filter(|(_, t)| t.contains("pre_tool_use hook"))
        .collect();
    // The session's call, the sub-agent's and the verifier's.
    let ids: Vec<&str> = denials.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["s1", "a1", "v1"], "{denials:#?}");
    assert!(
        denials[0].1.contains("edits under migrations/ are refused"),
        "{denials:?}"
    );
    assert!(
        denials[1].1.contains("edits under migrations/ are refused"),
        "{denials:?}"
    );
    assert!(
        denials[2].1.contains("the secret stays unread"),
        "{denials:?}"
    );
    assert!(
        !ws.path().join("migrations").exists(),
        "a migration was written"
    );
    let session_events = events(&out);
    let hook_decisions: Vec<&Value> = of_type(&session_events, "permission.decision")
        .into_iter()
        .filter(|e| e["layer"] == "hook")
        .collect();
    assert!(
        !hook_decisions.is_empty(),
        "the session's deny is a hook decision"
    );
    assert!(hook_decisions.iter().all(|e| e["verdict"] == "deny"));
}

/// A one-step workflow writing a migration, answered by the mock.
fn migration_step(mock: &MockServer) -> &'static str {
    mock.respond_with(|request| {
        (prompt_of(request) == "write the migration").then(|| {
            if answered(request) == 0 {
                Reply::sse(&tool_call_chunks(
                    "w",
                    "write_file",
                    &json!({"path": "migrations/3.sql", "content": "x"}),
                ))
            } else {
                Reply::sse(&text_chunks("refused"))
            }
        })
    });
    "[workflow]\nname = \"mig\"\n\n[[steps]]\nname = \"write\"\nprompt = \"write the migration\"\n"
}

fn hook_denials(events: &[Value]) -> Vec<(String, String)> {
    of_type(events, "permission.decision")
        .into_iter()
        .filter(|e| e["tool"] == "write_file")
        .map(|e| {
            (
                e["verdict"].as_str().unwrap_or_default().to_string(),
                e["layer"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_holds_for_a_workflow_step_here_and_on_a_loopback_node() {
    for on_node in [false, true] {
        let hooks = TempDir::new().expect("hooks dir");
        let cfg = config(&hooks, GUARDS);
        let mock = MockServer::start().await;
        let workflow = migration_step(&mock);
        let dirs = crate::cluster::dirs();
        let node = match on_node {
            true => Some(Node::start("a", dirs.0.path(), 1, &mock, SECRET).await),
            false => None,
        };
        let nodes: Vec<&Node> = node.iter().collect();
        let run = coordinator(
            workflow,
            &dirs,
            &mock,
            &nodes,
            SECRET,
            &["--posture", "bypass", "--config", s(&cfg)],
        );
        let out: Output = finish(run).await;
        let events = workflow_events(&out);
        assert_eq!(
            hook_denials(&events),
            [("deny".to_string(), "hook".to_string())],
            "on a node: {on_node}\n{}",
            out.stderr
        );
        let ran_on: Vec<&str> = of_type(&events, "step.state")
            .into_iter()
            .filter_map(|e| e["node"].as_str())
            .collect();
        assert_eq!(!ran_on.is_empty(), on_node, "{events:#?}");
        assert!(
            !dirs.0.path().join("migrations").exists(),
            "on a node: {on_node}"
        );
    }
}

#[tokio::test]
async fn a_hook_allow_lifts_neither_plan_nor_a_deny_rule_nor_the_floor() {
    let hooks = TempDir::new().expect("hooks dir");
    let cfg = config(
        &hooks,
        "[[hooks.pre_tool_use]]\ncommand = \"echo '{\\\"decision\\\": \\\"allow\\\", \\\"reason\\\": \\\"all fine\\\"}'\"\n",
    );
    // Plan: a write is refused by the mode.
    let mock = MockServer::start().await;
    mock.push([
        call("w", "write_file", json!({"path": "a.txt", "content": "x"})),
        text("refused"),
    ]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--mode", "plan", "write a"]);
    let plan = events(&cadre(&args).await);
    let results: Vec<&str> = of_type(&plan, "tool.result")
        .into_iter()
        .map(|e| e["error_code"].as_str().unwrap_or("ok"))
        .collect();
    assert_eq!(results, ["tool_not_allowed"]);
    assert!(!ws.path().join("a.txt").exists());
    // Full Access: a deny rule, a protected path and the floor still refuse.
    let mock = MockServer::start().await;
    mock.push([
        call("d", "bash", json!({"command": "touch denied.txt"})),
        call(
            "p",
            "write_file",
            json!({"path": ".git/config", "content": "x"}),
        ),
        call("f", "bash", json!({"command": "git push origin main"})),
        call("o", "bash", json!({"command": "touch ok.txt"})),
        text("done"),
    ]);
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend([
        "--posture",
        "bypass",
        "--deny",
        "bash(touch denied.txt)",
        "go",
    ]);
    let bypass = events(&cadre(&args).await);
    let decisions: Vec<(String, String)> = of_type(&bypass, "permission.decision")
        .into_iter()
        .map(|e| {
            (
                e["verdict"].as_str().unwrap_or_default().to_string(),
                e["layer"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let pair = |v: &str, l: &str| (v.to_string(), l.to_string());
    assert_eq!(
        decisions,
        [
            pair("deny", "rule"),
            pair("deny", "floor"),
            pair("deny", "floor"),
            pair("allow", "posture"),
        ]
    );
    assert!(!ws.path().join("denied.txt").exists());
    assert!(ws.path().join("ok.txt").exists());
}

#[tokio::test]
async fn a_hanging_hook_fails_closed_within_its_timeout() {
    let hooks = TempDir::new().expect("hooks dir");
    let cfg = config(
        &hooks,
        "[[hooks.pre_tool_use]]\nmatcher = \"bash\"\ncommand = \"sleep 600\"\ntimeout = 1\n",
    );
    let mock = MockServer::start().await;
    mock.push([
        call("b", "bash", json!({"command": "touch ran.txt"})),
        text("refused"),
    ]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "touch it"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    let decision = of_type(&events, "permission.decision")
        .pop()
        .cloned()
        .expect("a decision");
    assert_eq!(
        (decision["verdict"].as_str(), decision["layer"].as_str()),
        (Some("deny"), Some("hook"))
    );
    let reason = decision["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not answer within 1 s"), "{reason}");
    assert!(!ws.path().join("ran.txt").exists());
}

#[tokio::test]
async fn a_projects_hooks_run_only_once_the_workspace_is_trusted() {
    let (ws, data, config_dir) = (
        TempDir::new().expect("ws"),
        TempDir::new().expect("data"),
        TempDir::new().expect("config"),
    );
    let project = ws.path().join(".cadre");
    std::fs::create_dir_all(&project).expect("dir");
    std::fs::write(
        project.join("config.toml"),
        "[[hooks.pre_tool_use]]\ncommand = \"echo 'the project says no' >&2; exit 2\"\n",
    )
    .expect("project config");
    let run = |mock: &MockServer| {
        mock.push([
            call("w", "write_file", json!({"path": "a.txt", "content": "x"})),
            text("done"),
        ]);
        vec![
            "exec".to_string(),
            "--base-url".into(),
            mock.url.clone(),
            "--model".into(),
            "m".into(),
            "--workspace".into(),
            s(ws.path()).into(),
            "--data-dir".into(),
            s(data.path()).into(),
            "--config-dir".into(),
            s(config_dir.path()).into(),
            "--posture".into(),
            "bypass".into(),
            "--output-format".into(),
            "stream-json".into(),
            "write a".into(),
        ]
    };
    let mock = MockServer::start().await;
    let args = run(&mock);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("hooks.pre_tool_use"),
        "the notice names it: {}",
        out.stderr
    );
    assert!(
        ws.path().join("a.txt").exists(),
        "an untrusted project's hook ran"
    );
    std::fs::remove_file(ws.path().join("a.txt")).expect("remove");
    let trusted = cadre(&[
        "trust",
        "yes",
        "--workspace",
        s(ws.path()),
        "--config-dir",
        s(config_dir.path()),
    ])
    .await;
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let mock = MockServer::start().await;
    let args = run(&mock);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let events = events(&out);
    let denied: Vec<&Value> = of_type(&events, "permission.decision")
        .into_iter()
        .filter(|e| e["layer"] == "hook")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert!(
        !ws.path().join("a.txt").exists(),
        "the trusted project's hook did not hold"
    );
}

mod turns;
