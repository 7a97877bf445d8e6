//! A session's sub-agents on `cadre node` processes (D1): `cadre exec
//! --nodes` on loopback, the mock model server in this process.

use serde_json::{Value, json};
use tokio::process::Command;

use crate::cluster::{Node, SECRET, finish};
use crate::support::PATIENCE;
use crate::support::cli::{Output, dirs, events, s};
use crate::support::hermetic::Hermetic;
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::workflows::{answered, prompt_of};

/// `cadre exec --nodes` of `prompt` with `flags`, as a child process.
fn exec_on(
    dirs: &(tempfile::TempDir, tempfile::TempDir),
    mock: &MockServer,
    nodes: &[&str],
    flags: &[&str],
    prompt: &str,
) -> tokio::process::Child {
    let mut args = vec![
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(dirs.0.path()),
        "--data-dir",
        s(dirs.1.path()),
        "--output-format",
        "stream-json",
    ];
    let nodes = nodes.join(",");
    if !nodes.is_empty() {
        args.extend(["--nodes", &nodes]);
    }
    args.extend(flags);
    args.push(prompt);
    Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(&args)
        .env("CADRE_CLUSTER_SECRET", SECRET)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("CADRE_HOME")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre exec")
}

/// The parent: `delegate` spawns a child with `sub task`, then answers.
fn spawn_call() -> Reply {
    Reply::sse(&tool_call_chunks(
        "a1",
        "agent",
        &json!({"action": "spawn", "prompt": "sub task"}),
    ))
}

/// What the tool answered the parent's `agent` call `call_id`, as the
/// parent's next request carries it.
fn tool_result(mock: &MockServer, call_id: &str) -> String {
    mock.requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no result for {call_id}: {:#?}", mock.requests()))
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_runs_on_a_node_and_its_report_reaches_the_parent() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(match (prompt_of(request).as_str(), answered(request)) {
            ("delegate", 0) => spawn_call(),
            ("delegate", 1) => Reply::sse(&text_chunks("parent done")),
            ("delegate", 2) => Reply::sse(&tool_call_chunks(
                "a2",
                "agent",
                &json!({"action": "followup", "agent_id": "1", "prompt": "again"}),
            )),
            ("delegate", _) => Reply::sse(&text_chunks("parent done again")),
            ("sub task", 0) => Reply::sse(&text_chunks("child done on node")),
            ("sub task", _) => Reply::sse(&text_chunks("child again")),
            _ => return None,
        })
    });
    let dirs = dirs();
    let mut a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let out: Output = finish(exec_on(&dirs, &mock, &[&a.addr], &[], "delegate")).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = events(&out);
    // The node ran it: its count shows it.
    let session = events[0]["session_id"].as_str().expect("session id");
    a.wait_for(&format!("started agent {session}/1")).await;
    let completed = of(&events, "agent.completed");
    assert_eq!(completed.len(), 1, "{events:#?}");
    assert_eq!(completed[0]["agent_id"], "1");
    assert!(
        tool_result(&mock, "a1").contains("child done on node"),
        "the report reached the parent"
    );
    // The coordinator's store kept the child's conversation: a resumed
    // session's follow-up (here, without nodes) remembers it.
    let resumed = finish(exec_on(&dirs, &mock, &[], &["--resume", session], "follow")).await;
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stderr, resumed.stdout);
    assert!(tool_result(&mock, "a2").contains("child again"));
    let followed = mock
        .requests()
        .into_iter()
        .find(|r| prompt_of(r) == "sub task" && answered(r) == 1)
        .expect("the child's follow-up request");
    let said: Vec<String> = followed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        said.iter().any(|m| m == "child done on node") && said.iter().any(|m| m == "again"),
        "{said:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_sessions_remote_sub_agent_cannot_write() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(match (prompt_of(request).as_str(), answered(request)) {
            ("delegate", 0) => spawn_call(),
            ("delegate", _) => Reply::sse(&text_chunks("parent done")),
            ("sub task", 0) => Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "out.txt", "content": "written"}),
            )),
            ("sub task", _) => Reply::sse(&text_chunks("tried")),
            _ => return None,
        })
    });
    let dirs = dirs();
    let mut a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let run = exec_on(
        &dirs,
        &mock,
        &[&a.addr],
        &["--posture", "never"],
        "delegate",
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = events(&out);
    let session = events[0]["session_id"].as_str().expect("session id");
    a.wait_for(&format!("started agent {session}/1")).await;
    assert!(
        !dirs.0.path().join("out.txt").exists(),
        "the remote child wrote"
    );
    let denied: Vec<&Value> = of(&events, "permission.decision")
        .into_iter()
        .filter(|e| e["tool"] == "write_file" && e["agent_id"] == "1")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert_eq!(denied[0]["verdict"], "deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_sub_agents_node_fails_the_child_with_a_reason() {
    let mock = MockServer::start().await;
    let (_gate, closed) = tokio::sync::watch::channel(false);
    let (arrived, mut arrival) = tokio::sync::mpsc::unbounded_channel();
    mock.respond_with(move |request| {
        Some(match (prompt_of(request).as_str(), answered(request)) {
            ("delegate", 0) => spawn_call(),
            ("delegate", _) => Reply::sse(&text_chunks("parent done")),
            ("sub task", _) => {
                let _ = arrived.send(());
                // Held until the node is gone.
                Reply::Gate(closed.clone(), Box::new(Reply::sse(&text_chunks("late"))))
            }
            _ => return None,
        })
    });
    let dirs = dirs();
    let mut a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let run = exec_on(&dirs, &mock, &[&a.addr], &[], "delegate");
    tokio::time::timeout(PATIENCE, arrival.recv())
        .await
        .expect("the child asked its model in time")
        .expect("a request");
    a.child.start_kill().expect("SIGKILL node a");
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let result = tool_result(&mock, "a1");
    assert!(
        result.contains("node a was lost: its connection closed"),
        "{result}"
    );
    let events = events(&out);
    let completed = of(&events, "agent.completed");
    assert_eq!(completed.len(), 1, "{events:#?}");
    assert_eq!(completed[0]["status"], "failed");
}
