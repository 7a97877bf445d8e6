//! The hooks a turn runs itself: a stop hook keeping the agent working
//! (bounded), a `subagent_stop` hook, and `post_tool_use` context.

use std::path::PathBuf;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::{call, config, exec_args, text};
use crate::support::cli::{cadre, events};
use crate::support::mock::MockServer;

fn recorded(log: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

fn last_user_message(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_stop_hooks_continue_is_bounded_by_the_breaker() {
    let hooks = TempDir::new().expect("hooks dir");
    let log = hooks.path().join("stop.jsonl");
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.stop]]\ncommand = \"cat >> '{}'; echo; echo '{{\\\"continue\\\": true, \\\"message\\\": \\\"not yet: run the tests\\\"}}'\"\n",
            log.display()
        ),
    );
    let mock = MockServer::start().await;
    mock.push((0..12).map(|n| text(&format!("done {n}"))));
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "finish it"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    assert_eq!(events.last().expect("end")["status"], "success");
    let requests = mock.requests();
    // The answer, then one more request per continuation, at most 8.
    assert_eq!(requests.len(), 9);
    assert_eq!(last_user_message(&requests[8]), "not yet: run the tests");
    let stops = recorded(&log);
    assert_eq!(stops.len(), 8);
    assert_eq!(
        (
            stops[0]["event"].as_str(),
            stops[0]["agent"].as_str(),
            stops[0]["answer"].as_str()
        ),
        (Some("stop"), Some("main"), Some("done 0"))
    );
}

#[tokio::test]
async fn a_stop_hook_keeps_the_agent_working_until_its_check_passes() {
    let hooks = TempDir::new().expect("hooks dir");
    let cfg = config(
        &hooks,
        "[[hooks.stop]]\ncommand = \"test -f done.txt || echo '{\\\"continue\\\": true, \\\"message\\\": \\\"done.txt is missing\\\"}'\"\n",
    );
    let mock = MockServer::start().await;
    mock.push([
        text("finished, I think"),
        call(
            "w",
            "write_file",
            json!({"path": "done.txt", "content": "ok"}),
        ),
        text("now it is there"),
    ]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "finish it"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(last_user_message(&requests[1]), "done.txt is missing");
    assert!(ws.path().join("done.txt").exists());
}

#[tokio::test]
async fn post_tool_use_and_subagent_stop_hooks_read_their_events() {
    let hooks = TempDir::new().expect("hooks dir");
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    // In the workspace: a sub-agent's hook runs under its sandbox.
    let log = ws.path().join("events.jsonl");
    let record = format!("cat >> '{}'; echo >> '{}'", log.display(), log.display());
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.post_tool_use]]\nmatcher = \"write_file\"\ncommand = \"{record}; echo '{{\\\"additional_context\\\": \\\"formatted a.txt\\\"}}'\"\n\n\
             [[hooks.subagent_stop]]\ncommand = \"{record}\"\n"
        ),
    );
    let mock = MockServer::start().await;
    mock.push([
        call("w", "write_file", json!({"path": "a.txt", "content": "x"})),
        call("a", "agent", json!({"action": "spawn", "prompt": "say hi"})),
        // The sub-agent.
        text("hi"),
        text("done"),
    ]);
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "write a"]);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let requests = mock.requests();
    let answer = requests[1]["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        answer.ends_with("\n[post_tool_use hook]\nformatted a.txt"),
        "{answer}"
    );
    let seen: Vec<(String, String)> = recorded(&log)
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_string(),
                e["agent"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        seen,
        [pair("post_tool_use", "main"), pair("subagent_stop", "1")]
    );
    let post = &recorded(&log)[0];
    assert_eq!(post["tool_result"]["ok"], true);
    assert_eq!(post["arguments"]["path"], "a.txt");
    assert_eq!(recorded(&log)[1]["answer"], "hi");
}
