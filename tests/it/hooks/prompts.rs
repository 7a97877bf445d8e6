//! The hooks around a person's message and the conversation's life:
//! `session_start` and `user_prompt_submit` read their events and add
//! context to the message, a `user_prompt_submit` deny or failure refuses
//! the message before the model sees it, `pre_compact` runs before a
//! compaction it cannot stop, and a workflow step's `step_stop` keeps it
//! working.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cadre::runtime::context::SUMMARY_TAG;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::{call, config, exec_args, text};
use crate::cluster::{SECRET, coordinator, finish};
use crate::support::cli::{cadre, events, of_type, s, workflow_events};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::workflows::{answered, prompt_of};

fn recorded(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

/// A hook command that appends its event to `log`, then prints `answer`.
fn recording(log: &std::path::Path, answer: &str) -> String {
    let answer = answer.replace('"', "\\\"");
    format!(
        "cat >> '{}'; echo >> '{}'; echo '{answer}'",
        log.display(),
        log.display()
    )
}

fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn session_start_and_user_prompt_submit_hooks_read_their_events_and_add_context() {
    let (ws, data, hooks) = (
        TempDir::new().expect("ws"),
        TempDir::new().expect("data"),
        TempDir::new().expect("hooks"),
    );
    let root = ws.path().canonicalize().expect("canonical");
    // In the workspace: the hooks run under the session's sandbox (Work).
    let log = root.join("events.jsonl");
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.session_start]]\ncommand = \"{}\"\n\n[[hooks.user_prompt_submit]]\ncommand = \"{}\"\n",
            recording(&log, r#"{"additional_context": "branch: main"}"#),
            recording(
                &log,
                r#"{"decision": "allow", "additional_context": "ticket 12"}"#
            ),
        ),
    );
    let mock = MockServer::start().await;
    mock.push([text("on it")]);
    let mut args = exec_args(&mock, &root, data.path(), &cfg);
    args.push("fix the bug");
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let session_id = events(&out)[0]["session_id"]
        .as_str()
        .expect("id")
        .to_string();
    let base = |event: &str| {
        json!({
            "event": event,
            "session_id": session_id,
            "agent": "main",
            "role": "main",
            "step": null,
            "mode": "work",
            "posture": "suggest",
            "cwd": s(&root),
        })
    };
    let mut start = base("session_start");
    start["resumed"] = json!(false);
    let mut prompt = base("user_prompt_submit");
    prompt["prompt"] = json!("fix the bug");
    pretty_assertions::assert_eq!(recorded(&log), [start, prompt]);
    let requests = mock.requests();
    assert_eq!(
        user_messages(&requests[0]).last().map(String::as_str),
        Some(
            "fix the bug\n\n[session_start hook]\nbranch: main\n\n[user_prompt_submit hook]\nticket 12"
        )
    );
}

#[tokio::test]
async fn a_user_prompt_submit_deny_or_failure_refuses_the_message_before_the_model() {
    let cases = [
        (
            "echo 'no prompts about production' >&2; exit 2",
            "no prompts about production",
        ),
        (
            "echo '{\\\"decision\\\": \\\"deny\\\", \\\"reason\\\": \\\"ask in the ops channel\\\"}'",
            "ask in the ops channel",
        ),
        ("exit 1", "a user_prompt_submit hook fails closed"),
        ("sleep 600", "did not answer within 1 s"),
    ];
    for (command, reason) in cases {
        let hooks = TempDir::new().expect("hooks");
        let cfg = config(
            &hooks,
            &format!("[[hooks.user_prompt_submit]]\ncommand = \"{command}\"\ntimeout = 1\n"),
        );
        let mock = MockServer::start().await;
        mock.push([text("should not be asked")]);
        let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
        let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
        args.push("deploy to production");
        let out = cadre(&args).await;
        assert_ne!(out.code, 0, "{command}: the run succeeded");
        let events = events(&out);
        let rejected = of_type(&events, "op.rejected");
        let message = rejected
            .first()
            .and_then(|e| e["message"].as_str())
            .unwrap_or_default();
        assert!(
            message.contains("refused by the user_prompt_submit hook") && message.contains(reason),
            "{command}: {events:#?}"
        );
        assert!(
            mock.requests().is_empty(),
            "{command}: the model saw the prompt"
        );
        assert!(of_type(&events, "input.admitted").is_empty(), "{command}");
    }
}

#[tokio::test]
async fn a_pre_compact_hook_reads_its_event_and_cannot_stop_the_compaction() {
    let (ws, data, hooks) = (
        TempDir::new().expect("ws"),
        TempDir::new().expect("data"),
        TempDir::new().expect("hooks"),
    );
    let log = ws.path().join("compact.jsonl");
    let cfg = config(
        &hooks,
        &format!(
            "[context]\nwindow = 8000\n\n[[hooks.pre_compact]]\ncommand = \"{}\"\n",
            recording(&log, r#"{"decision": "deny", "reason": "keep it all"}"#),
        ),
    );
    let big: String = (0..80)
        .map(|i| format!("line {i:04} of a file that fills the context window.\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), big).expect("big file");
    let asked = Arc::new(AtomicUsize::new(0));
    let mock = MockServer::start().await;
    mock.respond_with(move |request| {
        let summary = request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains(SUMMARY_TAG))
            });
        if summary {
            return Some(Reply::sse(&text_chunks("the agent read big.txt")));
        }
        let n = asked.fetch_add(1, Ordering::SeqCst);
        Some(if n < 12 {
            Reply::sse(&tool_call_chunks(
                &format!("r{n}"),
                "read_file",
                &json!({"path": "big.txt"}),
            ))
        } else {
            Reply::sse(&text_chunks("done"))
        })
    });
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.push("read big.txt again and again");
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    let compacted = of_type(&events, "context.compacted");
    assert!(!compacted.is_empty(), "never compacted: {events:#?}");
    let seen = recorded(&log);
    assert!(!seen.is_empty(), "the pre_compact hook never ran");
    for event in &seen {
        assert_eq!(
            (
                event["event"].as_str(),
                event["agent"].as_str(),
                event["window"].as_u64()
            ),
            (Some("pre_compact"), Some("main"), Some(8000)),
            "{event}"
        );
        assert!(event["tokens"].as_u64().is_some_and(|t| t > 0), "{event}");
    }
    // Each summary was preceded by its hook; the deny stopped none.
    assert!(seen.len() <= compacted.len(), "{seen:#?}");
}

#[tokio::test]
async fn a_step_stop_hook_reads_its_event_and_keeps_the_step_working() {
    let hooks = TempDir::new().expect("hooks");
    let dirs = crate::cluster::dirs();
    let log = hooks.path().join("steps.jsonl");
    // Keeps the step working until it wrote `done.txt`: a check as a hook.
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.step_stop]]\ncommand = \"cat >> '{}'; echo >> '{}'; test -f done.txt || echo '{{\\\"continue\\\": true, \\\"message\\\": \\\"done.txt is missing\\\"}}'\"\n",
            log.display(),
            log.display()
        ),
    );
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        (prompt_of(request) == "finish the task").then(|| match answered(request) {
            0 => Reply::sse(&text_chunks("finished, I think")),
            1 => Reply::sse(&tool_call_chunks(
                "w",
                "write_file",
                &json!({"path": "done.txt", "content": "ok"}),
            )),
            _ => Reply::sse(&text_chunks("now it is there")),
        })
    });
    let workflow = "[workflow]\nname = \"finish\"\n\n[[steps]]\nname = \"task\"\nprompt = \"finish the task\"\n";
    let run = coordinator(
        workflow,
        &dirs,
        &mock,
        &[],
        SECRET,
        &["--posture", "bypass", "--config", s(&cfg)],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(dirs.0.path().join("done.txt").exists());
    let events = workflow_events(&out);
    assert!(!of_type(&events, "step.state").is_empty());
    let seen: Vec<(String, String, String)> = recorded(&log)
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_string(),
                e["step"].as_str().unwrap_or_default().to_string(),
                e["answer"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let triple = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        seen,
        [
            triple("step_stop", "task", "finished, I think"),
            triple("step_stop", "task", "now it is there"),
        ]
    );
}

#[tokio::test]
async fn a_plan_sessions_hook_writes_nothing_and_a_work_sessions_writes_the_workspace() {
    for (mode, writes) in [("plan", false), ("work", true)] {
        let (ws, data, hooks) = (
            TempDir::new().expect("ws"),
            TempDir::new().expect("data"),
            TempDir::new().expect("hooks"),
        );
        let cfg = config(
            &hooks,
            "[[hooks.session_start]]\ncommand = \"touch hooked.txt; true\"\n\n\
             [[hooks.user_prompt_submit]]\ncommand = \"touch prompted.txt; true\"\n",
        );
        let mock = MockServer::start().await;
        mock.push([text("nothing to do")]);
        let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
        args.extend(["--mode", mode, "look around"]);
        let out = cadre(&args).await;
        assert_eq!(out.code, 0, "{mode}: {}", out.stderr);
        let walls = &events(&out)[0]["sandbox_walls"];
        let enforced = |name: &str| {
            walls.as_array().into_iter().flatten().any(|w| {
                w["wall"] == name && w["state"].as_str().is_some_and(|s| s != "unavailable")
            })
        };
        if !writes && !enforced("landlock") && !enforced("namespaces") {
            eprintln!("SKIPPED: no filesystem wall on this host: {walls}");
            continue;
        }
        for file in ["hooked.txt", "prompted.txt"] {
            assert_eq!(
                ws.path().join(file).exists(),
                writes,
                "{mode}: {file} (walls: {walls})"
            );
        }
    }
}

#[tokio::test]
async fn a_goals_objective_passes_the_user_prompt_submit_hooks_too() {
    let hooks = TempDir::new().expect("hooks");
    let log = hooks.path().join("prompts.jsonl");
    let cfg = config(
        &hooks,
        &format!(
            "[[hooks.user_prompt_submit]]\ncommand = \"cat >> '{}'; echo >> '{}'; grep -q production '{}' && {{ echo 'not in production' >&2; exit 2; }}; true\"\n",
            log.display(),
            log.display(),
            log.display()
        ),
    );
    let mock = MockServer::start().await;
    mock.push([text("should not be asked")]);
    let (ws, data) = (TempDir::new().expect("ws"), TempDir::new().expect("data"));
    let mut args = exec_args(&mock, ws.path(), data.path(), &cfg);
    args.extend(["--posture", "bypass", "--goal", "deploy to production"]);
    let out = cadre(&args).await;
    assert_ne!(out.code, 0, "the goal ran: {}", out.stderr);
    let events = events(&out);
    let rejected: Vec<(&str, &str)> = of_type(&events, "op.rejected")
        .into_iter()
        .map(|e| {
            (
                e["op"].as_str().unwrap_or_default(),
                e["message"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        rejected
            .iter()
            .any(|(op, m)| *op == "goal" && m.contains("not in production")),
        "{events:#?}"
    );
    assert!(mock.requests().is_empty(), "the model saw the goal");
    assert!(of_type(&events, "goal.updated").is_empty(), "{events:#?}");
    let seen = recorded(&log);
    assert_eq!(
        (
            seen.len(),
            seen[0]["event"].as_str(),
            seen[0]["prompt"].as_str()
        ),
        (1, Some("user_prompt_submit"), Some("deploy to production"))
    );
}

/// A mode, posture or goal change sent while a message's
/// `user_prompt_submit` hooks still run waits behind it: the message runs
/// in the mode it was sent in (Plan: nothing written), and the change is
/// then taken as it would be with no hook.
#[tokio::test]
async fn a_mode_change_sent_behind_a_checked_message_never_overtakes_it() {
    use cadre::runtime::hooks::{HookSet, HookSpec};
    use cadre::runtime::protocol::{Event, Op};
    use cadre::runtime::{Mode, permission::Posture};

    use crate::support::{SessionBuilder, is_turn_end};

    let mock = MockServer::start().await;
    mock.push([
        call(
            "c1",
            "write_file",
            json!({"path": "leak.txt", "content": "written"}),
        ),
        text("done"),
    ]);
    let hooks = HookSet {
        user_prompt_submit: vec![HookSpec {
            matcher: None,
            command: "sleep 1; echo '{\"decision\": \"allow\"}'".into(),
            timeout: Some(10),
        }],
        ..HookSet::default()
    };
    let mut session = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .posture(Posture::Bypass)
        .hooks(hooks)
        .start()
        .await;
    session.submit(Op::user("write leak.txt"));
    // Sent at once, while the hook sleeps.
    session.submit(Op::SetMode { mode: Mode::Work });
    let events = session.events_until(is_turn_end).await;
    let started: Vec<Mode> = events
        .iter()
        .filter_map(|e| match e {
            Event::TurnStarted { mode, .. } => Some(*mode),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![Mode::Plan], "{events:#?}");
    assert!(
        !session.workspace_path().join("leak.txt").exists(),
        "a message sent in Plan wrote a file"
    );
    // It is taken after the message, as it would be with no hook: the
    // message's turn is running, so it is refused, saying why.
    let refused = events.iter().any(|e| {
        matches!(e, Event::OpRejected { op, message, .. }
            if op == "set_mode" && message.contains("a turn is running"))
    });
    assert!(refused, "{events:#?}");
    let mode = session.handle().snapshot().await.expect("snapshot").mode;
    assert_eq!(mode, Mode::Plan);
    session.shutdown().await;
}
