//! The store never lies: one process per session, resumes keep what was
//! stored, a busy or full store is an infrastructure failure, and
//! sub-agents' reports survive a kill.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cadre::runtime::store::store_path;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::cli::{cadre, dirs, events, of_type, s, spawn_cadre};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, contents, turn_end};

/// Waits until the mock has seen `n` requests.
async fn requests_reach(mock: &MockServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.requests().len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} requests arrived",
            mock.requests().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts `exec` against the mock with stream-json output and returns the
/// process and its session id (from `session.started`).
async fn start_exec(args: &[&str]) -> (tokio::process::Child, String) {
    let mut child = spawn_cadre(args);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let started: Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line"))
            .expect("json");
    let id = started["session_id"].as_str().expect("id").to_string();
    // Keep reading so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, id)
}

#[tokio::test]
async fn two_resumes_at_once_the_second_is_refused_and_nothing_runs_twice() {
    let mock = MockServer::start().await;
    mock.push([Reply::HangAfter {
        body: String::new(),
    }]);
    let (ws, data) = dirs();
    let base = [
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--data-dir",
        s(data.path()),
    ];
    let mut first_args = vec![
        "exec",
        "--workspace",
        s(ws.path()),
        "--output-format",
        "stream-json",
    ];
    first_args.extend(base);
    first_args.push("run the tests");
    let (mut first, id) = start_exec(&first_args).await;
    requests_reach(&mock, 1).await;

    // While the first process runs the session, a second resume is refused.
    let mut second = vec!["exec", "--resume", &id];
    second.extend(base);
    second.push("again");
    let out = cadre(&second).await;
    assert_eq!(out.code, 75, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("is being run by process") && out.stderr.contains(&id),
        "{}",
        out.stderr
    );
    assert_eq!(mock.requests().len(), 1, "the refused resume asked nothing");

    // Once the first is gone (killed), a resume takes over at once and the
    // interrupted turn continues exactly once.
    first.start_kill().expect("kill");
    first.wait().await.expect("wait");
    mock.respond_with(|_| Some(Reply::sse(&text_chunks("done"))));
    let mut third = vec!["exec", "--resume", &id, "--output-format", "stream-json"];
    third.extend(base);
    let out = cadre(&third).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(of_type(&events(&out), "turn.completed").len(), 1);
    let seen: Vec<Vec<String>> = mock
        .requests()
        .iter()
        .map(|r| contents(r, "user"))
        .collect();
    assert_eq!(
        seen,
        [
            vec!["run the tests".to_string()],
            vec!["run the tests".to_string()]
        ]
    );
}

#[tokio::test]
async fn a_resume_keeps_the_stored_posture_and_mode_unless_a_flag_changes_them() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| Some(Reply::sse(&text_chunks("ok"))));
    let (ws, data) = dirs();
    let run = |extra: &[&str]| {
        let mut args = vec![
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
        ];
        args.extend(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let started = |out: &crate::support::cli::Output| -> (String, String) {
        let events = events(out);
        (
            events[0]["mode"].as_str().unwrap_or_default().to_string(),
            events[0]["posture"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    let args = run(&["--posture", "never", "--mode", "plan", "look around"]);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(started(&out), ("plan".into(), "never".into()));
    let id = events(&out)[0]["session_id"]
        .as_str()
        .expect("id")
        .to_string();

    let args = run(&["--resume", &id, "more"]);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        started(&out),
        ("plan".into(), "never".into()),
        "kept as stored"
    );

    let args = run(&[
        "--resume",
        &id,
        "--posture",
        "bypass",
        "--mode",
        "work",
        "more",
    ]);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        started(&out),
        ("work".into(), "bypass".into()),
        "the flags change them"
    );
}

#[tokio::test]
async fn a_store_locked_by_another_process_exits_75_with_a_clear_message() {
    let (ws, data) = dirs();
    // Create the store, then hold its write lock from another connection.
    let out = cadre(&[
        "exec",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "hello",
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let holder = rusqlite_connection(&store_path(data.path()));
    let out = cadre(&[
        "exec",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "again",
    ])
    .await;
    drop(holder);
    assert_eq!(out.code, 75, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("locked by another process"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// Another connection holding the store's write lock until dropped.
fn rusqlite_connection(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    conn
}

#[tokio::test]
async fn a_store_that_cannot_write_fails_the_turn_as_infrastructure() {
    let mock = MockServer::start().await;
    // A tool result far larger than the store may still grow.
    let big = "x".repeat(64 * 1024);
    mock.push([
        Reply::sse(&tool_call_chunks(
            "b1",
            "bash",
            &json!({"command": format!("printf '%s' {big}")}),
        )),
        Reply::sse(&text_chunks("all done")),
    ]);
    let mut session = SessionBuilder::openai(&mock.url)
        .store_limit(96 * 1024)
        .start()
        .await;
    let events = session.turn("fill the disk").await;
    match turn_end(&events) {
        cadre::runtime::protocol::Event::TurnFailed {
            category,
            retryable,
            message,
            ..
        } => {
            assert_eq!(
                *category,
                cadre::runtime::protocol::FailureCategory::Infrastructure
            );
            assert!(*retryable);
            assert!(message.contains("could not be stored"), "{message}");
        }
        other => panic!("a turn whose work was not stored was reported {other:?}"),
    }
    session.shutdown().await;
}

/// The tool results after the last user message: this turn's.
fn tools_since_last_user(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let from = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[from..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_sub_agents_report_survives_a_kill_9_and_the_resumed_session_reads_it() {
    let mock = MockServer::start().await;
    let first_life = Arc::new(AtomicBool::new(true));
    let alive = first_life.clone();
    mock.respond_with(move |request| {
        let users = contents(request, "user");
        let who = users.last().cloned().unwrap_or_default();
        let tools = tools_since_last_user(request);
        Some(match who.as_str() {
            "delegate" if tools.is_empty() => Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "prompt": "inspect the build"}),
            )),
            // The parent's next request hangs in the first life: the
            // process is killed right there, after the child reported.
            "delegate" if alive.load(Ordering::SeqCst) => Reply::HangAfter {
                body: String::new(),
            },
            "delegate" => Reply::sse(&text_chunks("delegated")),
            "inspect the build" => Reply::sse(&text_chunks("the build is green; 3 crates")),
            "what did agent 1 find" if tools.is_empty() => Reply::sse(&tool_call_chunks(
                "w1",
                "agent",
                &json!({"action": "wait", "agent_id": "1"}),
            )),
            _ => Reply::sse(&text_chunks("it found a green build")),
        })
    });
    let (ws, data) = dirs();
    let base = [
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--data-dir",
        s(data.path()),
        "--posture",
        "bypass",
    ];
    let mut args = vec![
        "exec",
        "--workspace",
        s(ws.path()),
        "--output-format",
        "stream-json",
    ];
    args.extend(base);
    args.push("delegate");
    let (mut first, id) = start_exec(&args).await;
    requests_reach(&mock, 3).await;
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("wait");

    first_life.store(false, Ordering::SeqCst);
    let mut resume = vec!["exec", "--resume", &id, "--output-format", "stream-json"];
    resume.extend(base);
    resume.push("what did agent 1 find");
    let out = cadre(&resume).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let read = mock
        .requests()
        .iter()
        .filter(|r| contents(r, "user").last().map(String::as_str) == Some("what did agent 1 find"))
        .flat_map(tools_since_last_user)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        read.contains("agent 1 (role worker) completed")
            && read.contains("the build is green; 3 crates"),
        "the stored report was not read back: {read}"
    );
    let asked_child = mock
        .requests()
        .iter()
        .filter(|r| contents(r, "user").last().map(String::as_str) == Some("inspect the build"))
        .count();
    assert_eq!(asked_child, 1, "the child's finished run was not run again");
}
