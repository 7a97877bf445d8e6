//! The `cadre` binary end to end, as a process: exit codes and stream-json
//! lines checked against the schema in `docs/stream-json.md`.

use cadre::runtime::store::{Store, store_path};
use serde_json::Value;

use std::path::Path;

use crate::support::cli::{HeldLease, Output, cadre, dirs, events, exec_json, of_type, s};
use crate::support::contents;
use crate::support::hermetic::Hermetic;
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

#[tokio::test]
async fn the_built_in_demo_in_plan_mode_refuses_a_write_writes_the_plan_and_exits_0() {
    let (ws, data) = dirs();
    let out = exec_json(
        None,
        (&ws, &data),
        &["--mode", "plan"],
        "Add a greeting module",
    )
    .await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let events = events(&out);

    let refused: Vec<_> = of_type(&events, "tool.result")
        .into_iter()
        .filter(|e| e["error_code"] == "tool_not_allowed")
        .collect();
    assert_eq!(refused.len(), 1, "{events:?}");
    assert_eq!(refused[0]["name"], "write_file");
    let session_id = events[0]["session_id"].as_str().expect("id");
    let plan = data
        .path()
        .join("sessions")
        .join(session_id)
        .join("artifacts")
        .join("plan.md");
    let text = std::fs::read_to_string(&plan).expect("the plan was written");
    assert!(text.starts_with("## Summary\n\n"), "{text}");
    assert_eq!(
        std::fs::read_dir(ws.path()).expect("ws").count(),
        0,
        "the workspace changed"
    );
    assert_eq!(of_type(&events, "turn.completed").len(), 1);
}

#[tokio::test]
async fn exec_against_a_server_prints_the_answer_on_stdout_and_exits_0() {
    let mock = MockServer::start().await;
    mock.push([
        Reply::sse(&tool_call_chunks("c1", "list_dir", &serde_json::json!({}))),
        Reply::sse(&text_chunks("The workspace is empty.")),
    ]);
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
        "What is here?",
    ])
    .await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "The workspace is empty.\n");
    assert!(out.stderr.contains("→ list_dir"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn exec_exits_1_when_the_agent_runs_out_of_iterations() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| {
        Some(Reply::sse(&tool_call_chunks(
            "loop",
            "list_dir",
            &serde_json::json!({}),
        )))
    });
    let (ws, data) = dirs();
    let out = exec_json(
        Some(&mock.url),
        (&ws, &data),
        &["--max-iterations", "2"],
        "loop forever",
    )
    .await;
    assert_eq!(out.code, 1, "stderr: {}", out.stderr);
    let events = events(&out);
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["category"], "agent");
    assert_eq!(failed[0]["iterations"], 2);
    assert!(
        failed[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit of 2 model requests"))
    );
}

#[tokio::test]
async fn exec_exits_75_when_the_server_keeps_failing_after_retries() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| Some(Reply::error(503, "overloaded")));
    let (ws, data) = dirs();
    let out = exec_json(
        Some(&mock.url),
        (&ws, &data),
        &["--max-retries", "2"],
        "hello",
    )
    .await;
    assert_eq!(out.code, 75, "stderr: {}", out.stderr);
    let events = events(&out);
    assert_eq!(of_type(&events, "model.retry").len(), 2);
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed[0]["category"], "infrastructure");
    assert_eq!(failed[0]["retryable"], true);
    assert_eq!(mock.requests().len(), 3, "1 request + 2 retries");
}

#[tokio::test]
async fn exec_exits_2_on_bad_usage_config_or_script_and_says_where() {
    let (ws, data) = dirs();
    let script = ws.path().join("broken.toml");
    std::fs::write(&script, "[[response]]\ntext = \"hi\"\ntool_calls = 3\n").expect("script");
    let empty_script = ws.path().join("empty.toml");
    std::fs::write(&empty_script, "# nothing\n").expect("script");
    // A missing workspace is created; a file is not a workspace.
    let not_a_dir = ws.path().join("a-file");
    std::fs::write(&not_a_dir, "").expect("a file");
    let (w, d) = (s(ws.path()), s(data.path()));
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec![
                "exec",
                "--mode",
                "drive",
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec!["--mode", "unknown mode 'drive'"],
        ),
        (
            vec![
                "exec",
                "--script",
                s(&script),
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec![s(&script), "line 3"],
        ),
        (
            vec![
                "exec",
                "--script",
                s(&empty_script),
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec![s(&empty_script), "no [[response]]"],
        ),
        (
            vec![
                "exec",
                "--script",
                "/nonexistent/script.toml",
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec!["/nonexistent/script.toml", "cannot read"],
        ),
        (
            vec![
                "exec",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec!["--model"],
        ),
        (
            vec![
                "exec",
                "--base-url",
                "localhost:8080",
                "--model",
                "m",
                "--workspace",
                w,
                "--data-dir",
                d,
                "x",
            ],
            vec!["http://"],
        ),
        (
            vec!["exec", "--workspace", s(&not_a_dir), "--data-dir", d, "x"],
            vec!["--workspace", "a-file", "is not a directory"],
        ),
        (vec!["exec", "--no-such-flag", "x"], vec!["--no-such-flag"]),
        (vec!["exec"], vec!["PROMPT"]),
    ];
    let mut wrong = Vec::new();
    for (args, expected) in &cases {
        let out = cadre(args).await;
        let says_where = expected.iter().all(|e| out.stderr.contains(e));
        if out.code != 2 || !says_where {
            wrong.push(format!(
                "{args:?}: exit {} (want 2), stderr {:?} (want {expected:?})",
                out.code, out.stderr
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn config_layers_and_flags_decide_the_posture_and_rules_and_a_broken_file_says_where() {
    let (ws, data) = dirs();
    std::fs::create_dir_all(ws.path().join(".cadre")).expect("config dir");
    std::fs::write(
        ws.path().join(".cadre/config.toml"),
        "posture = \"never\"\n[permissions]\ndeny = [\"write_file(secret.txt)\"]\n",
    )
    .expect("project config");
    let script = ws.path().join("writes.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "notes.txt", content = "n" }
[[response.tool_calls]]
name = "write_file"
arguments = { path = "secret.txt", content = "s" }

[[response]]
iteration = 2
text = "done"
"#,
    )
    .expect("script");
    let run = |posture: Option<&'static str>| {
        let mut args = vec![
            "exec".to_string(),
            "--script".into(),
            s(&script).into(),
            "--workspace".into(),
            s(ws.path()).into(),
            "--data-dir".into(),
            s(data.path()).into(),
            "--output-format".into(),
            "stream-json".into(),
        ];
        if let Some(p) = posture {
            args.extend(["--posture".to_string(), p.to_string()]);
        }
        args.push("write".into());
        args
    };
    let decided = |out: &Output| -> Vec<(String, String, String)> {
        events(out)
            .iter()
            .filter(|e| e["type"] == "permission.decision" && e["tool"] == "write_file")
            .map(|e| {
                (
                    e["verdict"].as_str().unwrap_or_default().to_string(),
                    e["layer"].as_str().unwrap_or_default().to_string(),
                    e["scope"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };

    // The project file says never: nothing is written.
    let args = run(None);
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        decided(&out),
        [
            ("deny".to_string(), "posture".to_string(), String::new()),
            ("deny".into(), "rule".into(), "project".into())
        ]
    );
    assert!(!ws.path().join("notes.txt").exists());

    // The flag beats the file; the file's deny rule still holds.
    let args = run(Some("full-access"));
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(
        decided(&out),
        [
            ("allow".to_string(), "posture".to_string(), String::new()),
            ("deny".into(), "rule".into(), "project".into())
        ]
    );
    assert!(ws.path().join("notes.txt").exists() && !ws.path().join("secret.txt").exists());
    let store = Store::open(&store_path(data.path())).expect("the store");
    let audit: usize = store
        .list(10)
        .expect("sessions")
        .iter()
        .map(|s| store.audit(&s.id).expect("audit").len())
        .sum();
    assert_eq!(
        audit, 4,
        "one audit record per automatic decision, over both runs"
    );

    // A broken file stops cadre before anything runs, naming file and line.
    std::fs::write(
        ws.path().join(".cadre/config.local.toml"),
        "posture = \"auto\"\nmodle = \"x\"\n",
    )
    .expect("local");
    let out = cadre(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("config.local.toml") && out.stderr.contains("line 2"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_killed_exec_resumes_with_every_admitted_message_once_and_in_order() {
    use tokio::io::AsyncBufReadExt;

    let mock = MockServer::start().await;
    // The first model request never gets its answer: the process dies mid-turn.
    mock.push([Reply::HangAfter {
        body: String::new(),
    }]);
    let (ws, data) = dirs();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args([
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
            "first message",
        ])
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("CADRE_HOME")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let started: Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line"))
            .expect("json");
    let session_id = started["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while mock.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first request never arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    child.start_kill().expect("SIGKILL");
    let status = child.wait().await.expect("wait");
    assert_eq!(status.code(), None, "killed by a signal");

    mock.respond_with(|request| {
        let n = contents(request, "user").len();
        Some(Reply::sse(&text_chunks(&format!("answer to message {n}"))))
    });
    let out = cadre(&[
        "exec",
        "--resume",
        &session_id[..8],
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--data-dir",
        s(data.path()),
        "--output-format",
        "stream-json",
        "second message",
    ])
    .await;
    assert_eq!(
        out.code, 0,
        "stderr: {}\nstdout: {}",
        out.stderr, out.stdout
    );
    let events = events(&out);
    assert_eq!(
        events[0]["session_id"],
        session_id.as_str(),
        "the same session"
    );
    assert_eq!(of_type(&events, "turn.completed").len(), 2);

    let requests = mock.requests();
    let seen: Vec<Vec<String>> = requests.iter().map(|r| contents(r, "user")).collect();
    assert_eq!(
        seen,
        [
            vec!["first message".to_string()],
            vec!["first message".to_string()],
            vec!["first message".to_string(), "second message".to_string()],
        ],
        "the interrupted message continues once, then the new one; nothing twice"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let store = Store::open(&store_path(data.path())).expect("store");
    let admitted: Vec<String> = store
        .admitted(&session_id)
        .expect("admitted")
        .into_iter()
        .map(|(_, state, content)| format!("{state}: {content}"))
        .collect();
    assert_eq!(admitted, ["done: first message", "done: second message"]);
}

#[tokio::test]
async fn headless_plan_only_then_plan_approve_then_resume_implements_the_approved_snapshot() {
    const PLAN: &str = "## Summary\n\nAdd greet().\n";
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let text = request.to_string();
        let assistants = request["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        if text.contains("<plan-mode-reminder>") {
            // The plan file's path is in the write_file description.
            let tools = request["tools"].as_array()?;
            let description = tools
                .iter()
                .find(|t| t["function"]["name"] == "write_file")?["function"]["description"]
                .as_str()?;
            let path = description
                .split("exactly ")
                .nth(1)?
                .split(';')
                .next()?
                .to_string();
            return Some(match assistants {
                0 => Reply::sse(&tool_call_chunks(
                    "w",
                    "write_file",
                    &serde_json::json!({"path": path, "content": PLAN}),
                )),
                _ => Reply::sse(&tool_call_chunks(
                    "x",
                    "exit_plan_mode",
                    &serde_json::json!({}),
                )),
            });
        }
        let last = contents(request, "user").pop()?;
        Some(Reply::sse(&text_chunks(
            if last.starts_with("Implement the approved plan below.") {
                "implemented the approved plan"
            } else {
                "unexpected"
            },
        )))
    });
    let (ws, data) = dirs();
    let common = [
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
    ];

    let planned = cadre(
        &[
            &["exec", "--mode", "plan", "--plan-only"][..],
            &common,
            &["plan a greeting"],
        ]
        .concat(),
    )
    .await;
    assert_eq!(planned.code, 0, "stderr: {}", planned.stderr);
    let mut lines = planned
        .stdout
        .lines()
        .filter(|l| l.starts_with("plan: ") || l.starts_with("approval: "));
    let plan_path = lines.next().expect("plan line")["plan: ".len()..].to_string();
    let approval = lines.next().expect("approval line")["approval: ".len()..].to_string();
    assert_eq!(std::fs::read_to_string(&plan_path).expect("the plan"), PLAN);
    // An edit after the plan was frozen never reaches the implementation.
    std::fs::write(&plan_path, "## Summary\n\nEDITED LATER\n").expect("edit");

    let approved = cadre(&["plan", "approve", "latest", "--data-dir", s(data.path())]).await;
    assert_eq!(approved.code, 0, "stderr: {}", approved.stderr);
    assert!(
        approved.stdout.starts_with(&format!("{approval} approved")),
        "{}",
        approved.stdout
    );
    let again = cadre(&["plan", "approve", "latest", "--data-dir", s(data.path())]).await;
    assert_eq!(again.code, 2, "nothing waits any more: {}", again.stderr);

    let implemented = cadre(
        &[
            &["exec", "--resume", "latest"][..],
            &common[..4],
            &common[6..],
        ]
        .concat(),
    )
    .await;
    assert_eq!(implemented.code, 0, "stderr: {}", implemented.stderr);
    assert_eq!(implemented.stdout, "implemented the approved plan\n");
    let requests = mock.requests();
    let implementation = requests.last().expect("the implementation request");
    let last = contents(implementation, "user")
        .pop()
        .expect("a user message");
    assert!(last.ends_with(&format!("Approved plan:\n{PLAN}")), "{last}");
    assert!(!implementation.to_string().contains("EDITED LATER"));
    assert!(
        !implementation.to_string().contains("<plan-mode-reminder>"),
        "it runs in Work mode"
    );
}

/// An offline answer to a plan that a running session may answer too: it
/// waits for the session's lease, so while another process holds it every
/// verdict exits 75, names the session and answers nothing.
#[tokio::test]
async fn plan_answers_while_another_process_runs_the_session_exit_75_and_answer_nothing() {
    let (ws, data) = dirs();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scripts/plan-and-implement.toml");
    let planned = cadre(&[
        "exec",
        "--mode",
        "plan",
        "--plan-only",
        "--script",
        s(&script),
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "Add a greeting module",
    ])
    .await;
    assert_eq!(planned.code, 0, "stderr: {}", planned.stderr);
    let store = Store::open(&store_path(data.path())).expect("the store");
    let id = store.resolve("latest", None).expect("the session").id;
    let waiting = store
        .pending_questionnaire(&id)
        .expect("read")
        .expect("a plan waits");

    let held = HeldLease::take(data.path(), &id);
    for verdict in [
        &["approve"][..],
        &["revise", "--feedback", "smaller"],
        &["withdraw"],
        &["defer"],
    ] {
        let args = [&["plan"][..], verdict, &[&id, "--data-dir", s(data.path())]].concat();
        let refused = cadre(&args).await;
        assert_eq!(refused.code, 75, "{verdict:?}: {}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains(&format!("session {id} is running in another process")),
            "{verdict:?}: {}",
            refused.stderr
        );
        assert_eq!(
            store.pending_questionnaire(&id).expect("read").as_ref(),
            Some(&waiting),
            "{verdict:?} answered nothing"
        );
    }
    // Reading needs no lease.
    let shown = cadre(&["sessions", "show", &id, "--data-dir", s(data.path())]).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains(&waiting.id), "{}", shown.stdout);
    drop(held);

    let approved = cadre(&["plan", "approve", &id, "--data-dir", s(data.path())]).await;
    assert_eq!(approved.code, 0, "stderr: {}", approved.stderr);
    assert!(
        approved
            .stdout
            .starts_with(&format!("{} approved", waiting.id)),
        "{}",
        approved.stdout
    );
    assert_eq!(store.pending_questionnaire(&id).expect("read"), None);
}

#[tokio::test]
async fn approve_plan_runs_the_example_script_from_plan_to_implementation_in_one_go() {
    let (ws, data) = dirs();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scripts/plan-and-implement.toml");
    let out = exec_json(
        None,
        (&ws, &data),
        &[
            "--mode",
            "plan",
            "--approve-plan",
            "--posture",
            "bypass",
            "--script",
            s(&script),
        ],
        "Add a greeting module",
    )
    .await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let events = events(&out);

    let opened = of_type(&events, "questionnaire.opened");
    assert_eq!(opened.len(), 1, "{events:?}");
    assert_eq!(opened[0]["kind"], "plan_approval");
    let answered = of_type(&events, "questionnaire.answered");
    assert_eq!(answered.len(), 1, "{events:?}");
    assert_eq!(answered[0]["id"], opened[0]["id"]);
    assert_eq!(answered[0]["answer"]["answer"], "approve");
    assert_eq!(answered[0]["mode"], "work");

    // Planning wrote nothing in the workspace; the implementation did.
    let turns = of_type(&events, "turn.started");
    assert_eq!(turns.len(), 2, "{events:?}");
    assert_eq!(turns[0]["mode"], "plan");
    assert_eq!(turns[1]["mode"], "work");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("greeting.txt")).expect("implemented"),
        "hello\n"
    );
    let checked = of_type(&events, "tool.result")
        .into_iter()
        .find(|e| e["name"] == "bash")
        .expect("the check ran");
    assert_eq!(checked["status"], "ok", "{checked}");
    assert_eq!(of_type(&events, "turn.completed").len(), 2);
}
