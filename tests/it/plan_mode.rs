//! Plan mode's two gates and its reminders, seen from the wire.

use cadre::runtime::Mode;
use cadre::runtime::protocol::{Event, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks, tool_calls_chunks};
use crate::support::{SessionBuilder, contents, tool_results, tree, turn_end};

fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn plan_offers_read_only_tools_the_plan_writers_and_read_only_bash_while_work_offers_all() {
    let mock = MockServer::start().await;
    mock.push([
        Reply::sse(&text_chunks("planned")),
        Reply::sse(&text_chunks("worked")),
    ]);

    let mut plan = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .start()
        .await;
    plan.turn("look around").await;
    let mut work = SessionBuilder::openai(&mock.url)
        .mode(Mode::Work)
        .start()
        .await;
    work.turn("do it").await;

    let requests = mock.requests();
    assert_eq!(
        offered_tools(&requests[0]),
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "write_file",
            "edit_file",
            "bash",
            // `list`, `output` and `wait` only read.
            "process",
            "exit_plan_mode",
            // The goal is the session's, not the workspace's: Plan keeps it.
            "create_goal",
            "get_goal",
            "update_goal"
        ]
    );
    let plan_file = plan.plan_file.display().to_string();
    for tool in requests[0]["tools"].as_array().expect("tools") {
        let name = tool["function"]["name"].as_str().expect("name");
        let description = tool["function"]["description"]
            .as_str()
            .expect("description");
        if name == "write_file" || name == "edit_file" {
            assert!(description.contains(&plan_file), "{name}: {description}");
            assert!(
                description.contains("limited to the canonical plan file"),
                "{description}"
            );
        }
        if name == "bash" {
            assert!(
                description.starts_with("Plan mode: read-only commands only"),
                "{description}"
            );
        }
    }
    assert_eq!(
        offered_tools(&requests[1]),
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "write_file",
            "edit_file",
            "bash",
            "process",
            "todo_write",
            "create_goal",
            "get_goal",
            "update_goal"
        ]
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    plan.shutdown().await;
    work.shutdown().await;
}

#[tokio::test]
async fn plan_forged_calls_execute_nothing_and_come_back_as_errors() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .start()
        .await;
    let ws = session.workspace_path();
    std::fs::write(ws.join("a.txt"), "hello\n").expect("seed");
    let before = tree(&ws);

    mock.push([
        Reply::sse(&tool_calls_chunks(&[
            (
                "c1",
                "write_file",
                json!({"path": "a.txt", "content": "overwritten"}),
            ),
            (
                "c2",
                "edit_file",
                json!({"path": "a.txt", "old_string": "hello", "new_string": "bye"}),
            ),
            ("c3", "bash", json!({"command": "touch forged"})),
            ("c4", "shell_exec", json!({"cmd": "rm -rf ."})),
            (
                "c5",
                "write_file",
                json!({"path": "new.txt", "content": "x"}),
            ),
            ("c6", "bash", json!({"command": "cat a.txt > b.txt"})),
            ("c7", "bash", json!({"command": "cat a.txt | wc -c && ls"})),
        ])),
        Reply::sse(&text_chunks("done")),
    ]);
    let events = session.turn("try everything").await;

    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    assert_eq!(tree(&ws), before, "Plan mode changed the workspace");
    assert_eq!(
        tool_results(&events),
        [
            ("write_file".to_string(), "tool_not_allowed".to_string()),
            ("edit_file".into(), "tool_not_allowed".into()),
            ("bash".into(), "tool_not_allowed".into()),
            ("shell_exec".into(), "not_found".into()),
            ("write_file".into(), "tool_not_allowed".into()),
            ("bash".into(), "tool_not_allowed".into()),
            ("bash".into(), "ok".into()),
        ]
    );
    let second = &mock.requests()[1];
    let observations = contents(second, "tool");
    assert_eq!(observations.len(), 7);
    assert!(
        observations[6].contains("exit code: 0\n6\na.txt\n"),
        "read-only bash in Plan: {}",
        observations[6]
    );
    for (observation, code) in observations.iter().zip([
        "tool_not_allowed",
        "tool_not_allowed",
        "tool_not_allowed",
        "not_found",
        "tool_not_allowed",
        "tool_not_allowed",
    ]) {
        assert!(
            observation.starts_with(&format!("error ({code})")),
            "{observation}"
        );
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}

#[tokio::test]
async fn plan_writes_the_canonical_plan_file_and_refuses_lookalikes() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .start()
        .await;
    let ws = session.workspace_path();
    let plan = session.plan_file.clone();
    let plan_str = plan.display().to_string();
    let sessions = session
        .session_dir
        .parent()
        .expect("sessions dir")
        .to_path_buf();
    let other = sessions
        .join("other-session")
        .join("artifacts")
        .join("plan.md");
    std::fs::create_dir_all(other.parent().expect("parent")).expect("other session");
    // The session directory appears on first write; the lookalikes below
    // need it to exist already.
    std::fs::create_dir_all(plan.parent().expect("artifacts")).expect("artifacts");
    std::os::unix::fs::symlink(&plan, ws.join("plan-link.md")).expect("symlink");
    let dotdot = format!(
        "{}/artifacts/../artifacts/plan.md",
        session.session_dir.display()
    );
    let relative = pathdiff(&ws, &plan);

    let attempts = [
        (
            "p1",
            json!({"path": plan_str, "content": "## Summary\n\nThe real plan.\n"}),
        ),
        (
            "p2",
            json!({"path": other.display().to_string(), "content": "## Summary\nother\n"}),
        ),
        (
            "p3",
            json!({"path": format!("{plan_str}.bak"), "content": "## Summary\nbak\n"}),
        ),
        (
            "p4",
            json!({"path": dotdot, "content": "## Summary\ndotdot\n"}),
        ),
        (
            "p5",
            json!({"path": relative, "content": "## Summary\nrelative\n"}),
        ),
        (
            "p6",
            json!({"path": "plan-link.md", "content": "## Summary\nlink\n"}),
        ),
        (
            "p7",
            json!({"path": "plan.md", "content": "## Summary\nworkspace\n"}),
        ),
    ];
    let calls: Vec<(&str, &str, Value)> = attempts
        .iter()
        .map(|(id, args)| (*id, "write_file", args.clone()))
        .collect();
    mock.push([
        Reply::sse(&tool_calls_chunks(&calls)),
        Reply::sse(&tool_call_chunks(
            "e1",
            "edit_file",
            &json!({"path": plan_str, "old_string": "The real plan.", "new_string": "The edited plan."}),
        )),
        Reply::sse(&text_chunks("planned")),
    ]);
    let events = session.turn("plan it").await;

    let results = tool_results(&events);
    let codes: Vec<&str> = results.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(
        codes,
        [
            "ok",
            "tool_not_allowed",
            "tool_not_allowed",
            "tool_not_allowed",
            "tool_not_allowed",
            "tool_not_allowed",
            "tool_not_allowed",
            "ok"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&plan).expect("plan"),
        "## Summary\n\nThe edited plan.\n"
    );
    assert!(!other.exists(), "another session's plan file was written");
    assert!(!plan.with_extension("md.bak").exists());
    assert!(!ws.join("plan.md").exists());
    session.shutdown().await;
}

/// A relative path from `from` to `to`, through `..`.
fn pathdiff(from: &std::path::Path, to: &std::path::Path) -> String {
    let from = from.canonicalize().expect("from");
    let to_dir = to.parent().expect("parent").canonicalize().expect("to");
    let to = to_dir.join(to.file_name().expect("name"));
    let depth = from.components().count() - 1;
    let mut rel = "../".repeat(depth);
    rel.push_str(
        to.strip_prefix("/")
            .expect("absolute")
            .to_str()
            .expect("utf8"),
    );
    rel
}

#[tokio::test]
async fn plan_reminder_is_full_on_iterations_1_5_9_short_between_and_never_stored() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .start()
        .await;
    std::fs::write(session.workspace_path().join("a.txt"), "x").expect("seed");
    for n in 1..=8 {
        mock.push([Reply::sse(&tool_call_chunks(
            &format!("r{n}"),
            "list_dir",
            &json!({"path": "."}),
        ))]);
    }
    mock.push([Reply::sse(&text_chunks("nine"))]);
    let events = session.turn("investigate").await;
    assert!(
        matches!(
            turn_end(&events),
            Event::TurnCompleted { iterations: 9, .. }
        ),
        "{:?}",
        turn_end(&events)
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 9);
    for (i, request) in requests.iter().enumerate() {
        let iteration = i + 1;
        let messages = request["messages"].as_array().expect("messages");
        let last = messages.last().expect("last");
        assert_eq!(last["role"], "user", "iteration {iteration}");
        let text = last["content"].as_str().expect("text");
        assert!(
            text.starts_with("<plan-mode-reminder>"),
            "iteration {iteration}: {text}"
        );
        let full = text.contains("sole mutation exception");
        assert_eq!(
            full,
            [1, 5, 9].contains(&iteration),
            "iteration {iteration}"
        );
        let reminders = messages
            .iter()
            .filter(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("<plan-mode-reminder>"))
            })
            .count();
        assert_eq!(reminders, 1, "iteration {iteration}: reminders accumulate");
    }

    let snapshot = session.handle().snapshot().await.expect("snapshot");
    for message in &snapshot.conversation {
        let text = serde_json::to_string(message.as_ref()).expect("json");
        assert!(!text.contains("plan-mode-reminder"), "stored: {text}");
    }

    session.submit(Op::SetMode { mode: Mode::Work });
    mock.push([Reply::sse(&text_chunks("working"))]);
    session.turn("now implement").await;
    let next = mock.requests().pop().expect("request");
    assert!(
        !next.to_string().contains("plan-mode-reminder"),
        "the next turn replays a reminder"
    );
    session.shutdown().await;
}
