//! A run killed with SIGKILL mid-way resumes exactly: `cadre workflow
//! resume` runs only what was unfinished (counted per step at the mock).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::{Counter, answered, prompt_of};
use crate::support::PATIENCE;
use crate::support::cli::{cadre, dirs, of_type, s, spawn_cadre, workflow_events};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

const WORKFLOW: &str = r#"
[workflow]
name = "resumable"
max_parallel = 4

[[steps]]
name = "first"
prompt = "first step"

[[steps]]
name = "x"
needs = ["first"]
for_each = ["a", "b", "c", "d"]
prompt = "item {{item}}"

[[steps]]
name = "after"
needs = ["x"]
prompt = "after all items"
"#;

#[tokio::test]
async fn a_run_killed_mid_way_resumes_only_its_unfinished_steps() {
    let mock = MockServer::start().await;
    let conversations = Counter::default();
    let hang = Arc::new(AtomicBool::new(true));
    let (seen, hanging) = (conversations.clone(), hang.clone());
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        if answered(request) == 0 {
            *seen
                .lock()
                .expect("lock")
                .entry(prompt.clone())
                .or_default() += 1;
            return Some(Reply::sse(&tool_call_chunks(
                "c1",
                "list_dir",
                &serde_json::json!({"path": "."}),
            )));
        }
        // The first run stalls on item c, and is killed there.
        if prompt == "item c" && hanging.load(Ordering::SeqCst) {
            return Some(Reply::HangAfter {
                body: String::new(),
            });
        }
        Some(Reply::sse(&text_chunks(&format!("done: {prompt}"))))
    });
    let (ws, data) = dirs();
    let file = ws.path().join("wf.toml");
    std::fs::write(&file, WORKFLOW).expect("write");
    let common = [
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
    let mut args = vec!["workflow", "run", s(&file)];
    args.extend(common);
    let mut child = spawn_cadre(&args);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut run_id = String::new();
    let mut finished = 0;
    // Every instance but item c finishes (its state stored before the line
    // is written); then the process is killed.
    while finished < 4 {
        let line = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .expect("the run goes on");
        let event: Value = serde_json::from_str(&line).expect("json");
        match event["type"].as_str() {
            Some("workflow.started") => run_id = event["run_id"].as_str().expect("id").to_string(),
            Some("step.state") if event["state"] == "finalized" => finished += 1,
            _ => {}
        }
    }
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;
    // Its process is gone: the run is shown interrupted, not running.
    let listed = cadre(&["workflow", "list", "--data-dir", s(data.path())]).await;
    assert!(
        listed.stdout.contains(&format!("{run_id}  interrupted")),
        "{}",
        listed.stdout
    );
    let shown = cadre(&["workflow", "show", &run_id, "--data-dir", s(data.path())]).await;
    assert!(
        shown
            .stdout
            .contains(&format!("cadre workflow resume {run_id}")),
        "{}",
        shown.stdout
    );

    hang.store(false, Ordering::SeqCst);
    let mut args = vec!["workflow", "resume", &run_id];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = workflow_events(&out);
    let completed = of_type(&lines, "workflow.completed");
    assert_eq!(completed[0]["status"], "completed");
    let counts = conversations.lock().expect("lock").clone();
    let count = |p: &str| counts.get(p).copied().unwrap_or(0);
    assert_eq!(
        count("first step"),
        1,
        "a finished step ran again: {counts:?}"
    );
    for item in ["a", "b", "d"] {
        assert_eq!(
            count(&format!("item {item}")),
            1,
            "item {item} ran again: {counts:?}"
        );
    }
    assert_eq!(count("item c"), 2, "the interrupted item is restarted once");
    assert_eq!(count("after all items"), 1);
    let restored = of_type(&lines, "step.state")
        .into_iter()
        .filter(|e| e["reason"] == "restored from an earlier run")
        .count();
    assert_eq!(restored, 4);
    // `workflow show` shows what the restored steps answered.
    let shown = cadre(&["workflow", "show", &run_id, "--data-dir", s(data.path())]).await;
    assert!(
        shown.stdout.contains("(restored) done: "),
        "{}",
        shown.stdout
    );
}

/// Runs `cadre workflow` with `args` plus the mock and directories.
async fn workflow_cli(
    args: &[&str],
    mock: &MockServer,
    ws: &std::path::Path,
    data: &std::path::Path,
) -> crate::support::cli::Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws),
        "--data-dir",
        s(data),
        "--output-format",
        "stream-json",
    ]);
    cadre(&all).await
}

#[tokio::test]
async fn an_edited_workflow_reruns_only_the_changed_step_and_what_builds_on_it() {
    let mock = MockServer::start().await;
    let conversations = Counter::default();
    let seen = conversations.clone();
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        if answered(request) == 0 {
            *seen
                .lock()
                .expect("lock")
                .entry(prompt.clone())
                .or_default() += 1;
        }
        Some(Reply::sse(&text_chunks(&format!("out of {prompt}"))))
    });
    let (ws, data) = dirs();
    let file = ws.path().join("wf.toml");
    let text = "[workflow]\nname = \"edit\"\n[[steps]]\nname = \"a\"\nprompt = \"A\"\n[[steps]]\nname = \"b\"\nprompt = \"B\"\n[[steps]]\nname = \"c\"\nneeds = [\"b\"]\nprompt = \"C after {{steps.b.output}}\"\n";
    std::fs::write(&file, text).expect("write");
    let out = workflow_cli(
        &["workflow", "run", s(&file)],
        &mock,
        ws.path(),
        data.path(),
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::write(
        &file,
        text.replace("prompt = \"B\"", "prompt = \"B, edited\""),
    )
    .expect("edit");
    let out = workflow_cli(
        &["workflow", "resume", "latest"],
        &mock,
        ws.path(),
        data.path(),
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    workflow_events(&out);
    let counts = conversations.lock().expect("lock").clone();
    assert_eq!(counts.get("A"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("B, edited"), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get("C after out of B, edited"),
        Some(&1),
        "{counts:?}"
    );
}

#[tokio::test]
async fn retry_failed_runs_again_only_what_failed_and_what_it_blocked() {
    let mock = MockServer::start().await;
    let conversations = Counter::default();
    let fail = Arc::new(AtomicBool::new(true));
    let (seen, failing) = (conversations.clone(), fail.clone());
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        *seen
            .lock()
            .expect("lock")
            .entry(prompt.clone())
            .or_default() += 1;
        Some(if prompt == "B" && failing.load(Ordering::SeqCst) {
            Reply::error(400, "not now")
        } else {
            Reply::sse(&text_chunks("fine"))
        })
    });
    let (ws, data) = dirs();
    let file = ws.path().join("wf.toml");
    std::fs::write(
        &file,
        "[workflow]\nname = \"retry\"\n[[steps]]\nname = \"a\"\nprompt = \"A\"\n[[steps]]\nname = \"b\"\nprompt = \"B\"\n[[steps]]\nname = \"c\"\nneeds = [\"b\"]\nprompt = \"C\"\n",
    )
    .expect("write");
    let out = workflow_cli(
        &["workflow", "run", s(&file)],
        &mock,
        ws.path(),
        data.path(),
    )
    .await;
    assert_eq!(out.code, 1, "b failed and c is blocked: {}", out.stderr);
    // A plain resume keeps the failure.
    let out = workflow_cli(
        &["workflow", "resume", "latest"],
        &mock,
        ws.path(),
        data.path(),
    )
    .await;
    assert_eq!(out.code, 1);
    fail.store(false, Ordering::SeqCst);
    let out = workflow_cli(
        &["workflow", "resume", "latest", "--retry-failed"],
        &mock,
        ws.path(),
        data.path(),
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let counts = conversations.lock().expect("lock").clone();
    assert_eq!(counts.get("A"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("B"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("C"), Some(&1), "{counts:?}");
}

#[tokio::test]
async fn cancel_from_another_process_stops_one_item_while_its_siblings_finish() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(if prompt_of(request) == "item b" {
            Reply::HangAfter {
                body: String::new(),
            }
        } else {
            Reply::sse(&text_chunks("done"))
        })
    });
    let (ws, data) = dirs();
    let file = ws.path().join("wf.toml");
    std::fs::write(
        &file,
        "[workflow]\nname = \"steer\"\n[[steps]]\nname = \"x\"\nfor_each = [\"a\", \"b\", \"c\"]\nprompt = \"item {{item}}\"\nmin_success = 2\n",
    )
    .expect("write");
    let mut args = vec!["workflow", "run", s(&file)];
    args.extend([
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
    ]);
    let mut child = spawn_cadre(&args);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut run_id = String::new();
    let mut seen = Vec::new();
    let mut asked = false;
    loop {
        let Some(line) = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
        else {
            break;
        };
        let event: Value = serde_json::from_str(&line).expect("json");
        if event["type"] == "workflow.started" {
            run_id = event["run_id"].as_str().expect("id").to_string();
        }
        let finished = event["type"] == "step.state" && event["state"] == "finalized";
        seen.push(event);
        if finished && !asked && seen.iter().filter(|e| e["state"] == "finalized").count() == 2 {
            asked = true;
            let out = cadre(&[
                "workflow",
                "cancel",
                &run_id,
                "x[1]",
                "--data-dir",
                s(data.path()),
            ])
            .await;
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert!(out.stdout.contains("to cancel x[1]"), "{}", out.stdout);
        }
    }
    let status = child.wait().await.expect("exit");
    assert_eq!(status.code(), Some(0));
    let cancelled: Vec<&Value> = seen
        .iter()
        .filter(|e| e["type"] == "step.state" && e["state"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["index"], 1);
    assert_eq!(seen.last().expect("events")["status"], "completed");
}
