//! Managed background processes (PR1) through the binary: a goal that
//! runs a dev server, checks it and stops it; Plan's refusal; the floor on
//! a start's command line; and what a kill -9 of cadre leaves, cleaned up
//! by the next start.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use cadre::runtime::store::{Store, store_path};

use crate::support::cli::{cadre, dirs, events, of_type, s, spawn_cadre};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(&tool_call_chunks(id, name, &args))
}

fn text(text: &str) -> Reply {
    Reply::sse(&text_chunks(text))
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The pid a `start` answered with (`started p1 (pid N): …`).
fn started_pid(output: &str) -> u32 {
    output
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {output:?}"))
}

/// A TCP port free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The tool results of a stream-json run: (name, error code or "ok", output).
fn results(events: &[Value]) -> Vec<(String, String, String)> {
    of_type(events, "tool.result")
        .into_iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                e["error_code"].as_str().unwrap_or("ok").to_string(),
                e["output"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_goal_starts_a_server_waits_for_it_checks_it_with_curl_stops_it_and_leaves_nothing() {
    let port = free_port();
    let mock = MockServer::start().await;
    mock.push([
        call(
            "s",
            "process",
            json!({
                "action": "start",
                "command": format!("exec python3 -u -m http.server {port} --bind 127.0.0.1"),
                "ready": "Serving HTTP on",
                "timeout_secs": 60
            }),
        ),
        call(
            "c",
            "bash",
            json!({"command": format!("curl -sS -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/")}),
        ),
        call("o", "process", json!({"action": "wait", "id": "p1", "until": "GET / HTTP", "timeout_secs": 30})),
        call("x", "process", json!({"action": "stop", "id": "p1"})),
        call(
            "g",
            "update_goal",
            json!({"status": "complete", "claim": "the server answered 200 and is stopped"}),
        ),
        // The verifier reads the server's log without write authority.
        call("v", "process", json!({"action": "output", "id": "p1"})),
        text("The log shows the GET answered 200.\nVERDICT: PASS"),
    ]);
    let (ws, data) = dirs();
    let out = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--max-retries",
        "0",
        "--posture",
        "bypass",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "--goal",
        "serve the workspace over HTTP and check it answers",
    ])
    .await;
    assert_eq!(
        out.code, 0,
        "stderr: {}\nstdout: {}",
        out.stderr, out.stdout
    );
    let events = events(&out);
    let results = results(&events);
    let summary: Vec<(&str, &str)> = results
        .iter()
        .map(|(name, code, _)| (name.as_str(), code.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("process", "ok"),
            ("bash", "ok"),
            ("process", "ok"),
            ("process", "ok"),
            ("update_goal", "ok"),
        ]
    );
    let pid = started_pid(&results[0].2);
    assert!(results[0].2.contains("ready:"), "{}", results[0].2);
    assert!(results[1].2.contains("200"), "curl: {}", results[1].2);
    assert!(results[3].2.starts_with("p1: stopped"), "{}", results[3].2);
    // The verifier's last request carries what it read of the log.
    let requests = mock.requests();
    let verifier_read = requests
        .last()
        .and_then(|r| r["messages"].as_array())
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        verifier_read.contains("\"GET / HTTP/1.1\" 200"),
        "the verifier read the log: {verifier_read}"
    );
    let goal = of_type(&events, "goal.updated")
        .pop()
        .cloned()
        .expect("goal");
    assert_eq!(goal["status"], "complete");
    assert!(!running(pid), "the server (pid {pid}) is gone");
}

#[tokio::test]
async fn plan_refuses_start_and_the_floor_refuses_a_detaching_command_line() {
    let mock = MockServer::start().await;
    mock.push([
        call(
            "p",
            "process",
            json!({"action": "start", "command": "sleep 100"}),
        ),
        text("refused"),
    ]);
    let (ws, data) = dirs();
    let out = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--mode",
        "plan",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "start it",
    ])
    .await;
    let plan_events = events(&out);
    assert_eq!(
        results(&plan_events)
            .iter()
            .map(|(n, c, _)| (n.as_str(), c.as_str()))
            .collect::<Vec<_>>(),
        [("process", "tool_not_allowed")]
    );
    // Under Full Access the floor still blocks what escapes the group.
    let mock = MockServer::start().await;
    mock.push([
        call(
            "a",
            "process",
            json!({"action": "start", "command": "setsid sleep 100"}),
        ),
        call(
            "b",
            "process",
            json!({"action": "start", "command": "nohup sleep 100"}),
        ),
        call("c", "bash", json!({"command": "sleep 100 &"})),
        call("l", "process", json!({"action": "list"})),
        text("blocked"),
    ]);
    let out = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--posture",
        "bypass",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "start it",
    ])
    .await;
    let bypass_events = events(&out);
    let results = results(&bypass_events);
    assert_eq!(
        results
            .iter()
            .map(|(n, c, _)| (n.as_str(), c.as_str()))
            .collect::<Vec<_>>(),
        [
            ("process", "permission_denied"),
            ("process", "permission_denied"),
            ("bash", "permission_denied"),
            ("process", "ok"),
        ]
    );
    assert_eq!(results[3].2, "no processes\n");
}

#[tokio::test]
async fn a_kill_9_of_cadre_leaves_nothing_running_after_the_next_start() {
    let mock = MockServer::start().await;
    mock.push([
        call(
            "s",
            "process",
            json!({"action": "start", "command": "exec sleep 1000"}),
        ),
        // The next request never gets its answer: cadre is killed meanwhile.
        Reply::HangAfter {
            body: String::new(),
        },
    ]);
    let (ws, data) = dirs();
    let mut child = spawn_cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--posture",
        "bypass",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "start a sleeper",
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.requests().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = &mock.requests()[1];
    let answer = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .expect("the start's answer")
        .to_string();
    let pid = started_pid(&answer);
    assert!(running(pid));
    child.start_kill().expect("kill -9");
    child.wait().await.expect("reaped");
    let store = Store::open(&store_path(data.path())).expect("store");
    assert_eq!(
        store
            .processes()
            .expect("rows")
            .iter()
            .map(|r| r.pid)
            .collect::<Vec<_>>(),
        [pid],
        "the start was recorded before it was answered"
    );
    drop(store);
    // The next cadre opening the store ends what the killed one left.
    let mock = MockServer::start().await;
    mock.push([text("hello")]);
    let out = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "hello",
    ])
    .await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(!running(pid), "the sleeper (pid {pid}) was left running");
}
