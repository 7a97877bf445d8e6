//! `cadre exec --goal` through the binary: every exit code, and a kill -9
//! during a continuation followed by a resume.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::{call, claim, text, write};
use cadre::runtime::goal::{Goal, GoalStatus};
use cadre::runtime::store::{Store, store_path};

use crate::support::cli::{HeldLease, cadre, dirs, events, of_type, s, spawn_cadre};
use crate::support::mock::{MockServer, Reply};

/// `cadre exec --goal OBJECTIVE` against the mock, stream-json, in fresh
/// directories, with `flags` after the goal.
async fn exec_goal(mock: &MockServer, flags: &[&str]) -> (i32, Vec<Value>) {
    let (ws, data) = dirs();
    let mut args = vec![
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--max-retries",
        "0",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "--goal",
        "write the files",
    ];
    args.extend(flags);
    let out = cadre(&args).await;
    assert!(
        out.code == 2 || !out.stdout.is_empty(),
        "stderr: {}",
        out.stderr
    );
    let lines = if out.code == 2 {
        Vec::new()
    } else {
        events(&out)
    };
    (out.code, lines)
}

fn last_goal(events: &[Value]) -> String {
    let last = of_type(events, "goal.updated")
        .pop()
        .cloned()
        .expect("a goal.updated");
    format!(
        "{}({})",
        last["status"].as_str().unwrap_or_default(),
        last["reason"].as_str().unwrap_or_default()
    )
}

fn completed(events: &[Value]) -> (String, i64) {
    let last = events.last().expect("events");
    (
        last["status"].as_str().unwrap_or_default().to_string(),
        last["exit_code"].as_i64().unwrap_or(-1),
    )
}

/// One row: the model's replies, extra flags, and the exit code, final
/// goal and `session.completed` status they lead to.
async fn check(replies: Vec<Reply>, flags: &[&str], expected: (i32, &str, &str)) {
    let mock = MockServer::start().await;
    mock.push(replies);
    let (code, events) = exec_goal(&mock, flags).await;
    let goal = if events.is_empty() {
        String::new()
    } else {
        last_goal(&events)
    };
    let status = if events.is_empty() {
        String::new()
    } else {
        completed(&events).0
    };
    assert_eq!(
        (code, goal.as_str(), status.as_str()),
        expected,
        "{flags:?}"
    );
}

#[tokio::test]
async fn every_exit_code_of_exec_goal() {
    // 0: verified complete.
    check(
        vec![claim("c1"), text("VERDICT: PASS")],
        &[],
        (0, "complete(verifier_met)", "success"),
    )
    .await;
    // 1: the worker reports it is blocked.
    check(
        vec![call(
            "b1",
            "update_goal",
            json!({"status": "blocked", "reason": "no access"}),
        )],
        &[],
        (1, "blocked(worker_reported)", "failed"),
    )
    .await;
    // 3: paused for no progress, resumable.
    check(
        vec![text("hm"), text("hm"), text("hm")],
        &[],
        (3, "paused(no_progress)", "unfinished"),
    )
    .await;
    // 3: a budget is spent, resumable; the summary turn ran.
    check(
        vec![
            write("w1", "a.txt"),
            text("wrote a"),
            text("summary: a done"),
        ],
        &["--goal-turns", "1"],
        (3, "budget_limited(main_turns)", "unfinished"),
    )
    .await;
    // 75: the provider keeps failing.
    check(
        vec![Reply::error(503, "overloaded")],
        &[],
        (75, "usage_limited(provider_failure)", "error"),
    )
    .await;
    // 0 without a verifier: the claim is accepted.
    check(
        vec![claim("c1")],
        &["--verify", "none"],
        (0, "complete(worker_proposal)", "success"),
    )
    .await;
    // 2: bad usage.
    check(vec![], &["--verify", "command"], (2, "", "")).await;
}

#[tokio::test]
async fn the_text_output_shows_the_goals_progress_after_every_turn() {
    let mock = MockServer::start().await;
    mock.push([claim("c1"), text("VERDICT: PASS")]);
    let (ws, data) = dirs();
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
        "--goal",
        "anything",
        "--goal-tokens",
        "50K",
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("goal active(created): tokens 27/50000, turns 1, time 0s"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("goal complete(verifier_met): tokens 42/50000")
    );
    assert!(out.stderr.contains("⊨ verifier: pass"));
    // The objective is named once, when the goal is new, not after every
    // turn.
    assert_eq!(
        out.stderr.matches("goal: anything\n").count(),
        1,
        "{}",
        out.stderr
    );
}

/// Waits until the mock has seen `n` requests.
async fn requests_reach(mock: &MockServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.requests().len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} requests",
            mock.requests().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_continuation_killed_mid_turn_runs_once_on_resume_and_the_goal_completes() {
    let mock = MockServer::start().await;
    mock.push([
        write("w1", "a.txt"),
        text("wrote a"),
        // The second continuation's request hangs: the process is killed there.
        Reply::HangAfter {
            body: String::new(),
        },
    ]);
    let (ws, data) = dirs();
    let common = [
        "--posture",
        "bypass",
        "--base-url",
        mock.url.as_str(),
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
    ];
    let mut args = vec!["exec", "--goal", "write a.txt then b.txt"];
    args.extend(common);
    let mut child = spawn_cadre(&args);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let started: Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line"))
            .expect("json");
    let id = started["session_id"].as_str().expect("id").to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    requests_reach(&mock, 3).await;
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;

    // The resume continues the interrupted continuation's turn: no new
    // continuation is admitted for it, and its text is in the conversation once.
    mock.push([write("w2", "b.txt"), claim("c1"), text("VERDICT: PASS")]);
    let mut args = vec!["exec", "--resume", &id];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    assert!(of_type(&events, "goal.continuation").is_empty());
    let requests = mock.requests();
    let resumed = &requests[3];
    let second: Vec<&Value> = resumed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["content"].as_str().is_some_and(|c| c.contains("n=\"2\"")))
        .collect();
    assert_eq!(second.len(), 1, "the continuation runs once");
    assert!(ws.path().join("a.txt").exists() && ws.path().join("b.txt").exists());
}

#[tokio::test]
async fn the_offline_goal_example_runs_to_a_verified_end() {
    let (ws, data) = dirs();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/scripts/goal-notes.toml"
    );
    let out = cadre(&[
        "exec",
        "--script",
        script,
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--posture",
        "bypass",
        "--output-format",
        "stream-json",
        "--goal",
        "notes.txt lists three facts about cadre",
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    assert_eq!(last_goal(&events), "complete(verifier_met)");
    assert_eq!(of_type(&events, "goal.continuation").len(), 3);
    let notes = std::fs::read_to_string(ws.path().join("notes.txt")).expect("notes.txt");
    assert_eq!(notes.lines().filter(|l| l.starts_with("- ")).count(), 3);
}

/// A goal changed offline while another process runs the session would be
/// overwritten by that session's own copy: every change waits for the
/// session's lease, so while another process holds it each exits 75, names
/// the session and leaves the stored goal as it was.
#[tokio::test]
async fn goal_changes_while_another_process_runs_the_session_exit_75_and_change_nothing() {
    let (ws, data) = dirs();
    // One main turn spends the budget; the second reply is the summary turn's.
    let script = ws.path().join("model.toml");
    std::fs::write(
        &script,
        "[[response]]\nrole = \"main\"\ntext = \"working\"\n\n\
         [[response]]\nrole = \"main\"\ntext = \"summary: started\"\n",
    )
    .expect("the script");
    let ran = cadre(&[
        "exec",
        "--script",
        s(&script),
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--goal",
        "anything",
        "--goal-turns",
        "1",
    ])
    .await;
    assert_eq!(ran.code, 3, "stderr: {}", ran.stderr);
    let store = Store::open(&store_path(data.path())).expect("the store");
    let id = store.resolve("latest", None).expect("the session").id;
    let goal = |store: &Store| -> Goal { store.goal(&id).expect("read").expect("a goal") };
    let before = goal(&store);
    assert_eq!(before.status, GoalStatus::BudgetLimited);
    let dir = s(data.path());
    let goal_cmd =
        |action: &[&'static str]| [&["goal"][..], action, &[&id, "--data-dir", dir]].concat();

    let held = HeldLease::take(data.path(), &id);
    for action in [
        &["pause"][..],
        &["resume"],
        &["clear"],
        &["budget", "--turns", "clear"],
    ] {
        let refused = cadre(&goal_cmd(action)).await;
        assert_eq!(refused.code, 75, "{action:?}: {}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains(&format!("session {id} is running in another process")),
            "{action:?}: {}",
            refused.stderr
        );
        assert_eq!(goal(&store), before, "{action:?} changed nothing");
    }
    // Reading needs no lease.
    let shown = cadre(&goal_cmd(&["show"])).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("budget_limited(main_turns)"),
        "{}",
        shown.stdout
    );
    drop(held);

    let raised = cadre(&goal_cmd(&["budget", "--turns", "clear"])).await;
    assert_eq!(raised.code, 0, "{}", raised.stderr);
    assert_eq!(goal(&store).status, GoalStatus::Active);
    let paused = cadre(&goal_cmd(&["pause"])).await;
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    assert!(
        paused.stdout.contains("paused(user_requested)"),
        "{}",
        paused.stdout
    );
    assert_eq!(goal(&store).status, GoalStatus::Paused);
}

/// The verifier's calls reach the person watching, in stream-json and in
/// the text output, under its own id: what it checked is not hidden in the
/// audit log.
#[tokio::test]
async fn the_verifiers_calls_show_in_stream_json_and_in_the_text_output() {
    let replies = || {
        vec![
            write("w1", "a.txt"),
            claim("c1"),
            call("v1", "read_file", json!({"path": "a.txt"})),
            text("a.txt is there.\nVERDICT: PASS"),
        ]
    };
    let mock = MockServer::start().await;
    mock.push(replies());
    let (code, events) = exec_goal(&mock, &["--posture", "bypass"]).await;
    assert_eq!(code, 0);
    let calls = of_type(&events, "agent.tool_call");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["agent_id"], "1");
    assert_eq!(calls[0]["name"], "read_file");
    assert_eq!(calls[0]["arguments"]["path"], "a.txt");
    let results = of_type(&events, "agent.tool_result");
    assert_eq!(results[0]["agent_id"], "1");
    assert_eq!(results[0]["status"], "ok");
    // The worker's own call is still a `tool.call`, the verifier's is not.
    let own: Vec<&str> = of_type(&events, "tool.call")
        .iter()
        .filter_map(|c| c["call_id"].as_str())
        .collect();
    assert_eq!(own, ["w1", "c1"]);

    let mock = MockServer::start().await;
    mock.push(replies());
    let (ws, data) = dirs();
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
        "--posture",
        "bypass",
        "--goal",
        "write a.txt",
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("    [1] → read_file {\"path\":\"a.txt\"}"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("      [1] ✓ "), "{}", out.stderr);
    assert!(!out.stdout.contains("read_file"), "{}", out.stdout);
}
