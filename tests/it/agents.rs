//! Sub-agents against the concurrent mock: parallel workers following their
//! own scripts, approvals routed to the right worker, limits, and authority
//! that never widens.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cadre::runtime::config::RoleConfig;
use cadre::runtime::permission::{Layer, Posture, Verdict};
use cadre::runtime::protocol::{AgentStatus, ApprovalDecision, Event, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks, tool_calls_chunks};
use crate::support::{SessionBuilder, TestSession, contents, is_turn_end, turn_end};

/// The last user message of a request: whose conversation it is.
fn asker(request: &Value) -> String {
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

/// Which model request of its turn this is (1-based).
fn iteration(request: &Value) -> usize {
    let messages = request["messages"].as_array().expect("messages");
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
        + 1
}

fn spawn(id: &str, prompt: &str) -> (String, &'static str, Value) {
    (
        id.into(),
        "agent",
        json!({"action": "spawn", "prompt": prompt, "background": true}),
    )
}

fn reply_calls(calls: &[(String, &'static str, Value)]) -> Reply {
    let refs: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(i, n, a)| (i.as_str(), *n, a.clone()))
        .collect();
    Reply::sse(&tool_calls_chunks(&refs))
}

/// The tool-message contents of the requests `who` made.
fn observations_of(mock: &MockServer, who: &str) -> Vec<String> {
    mock.requests()
        .iter()
        .filter(|r| asker(r) == who)
        .flat_map(|r| contents(r, "tool"))
        .collect()
}

/// Every event the test has read, so a wait never loses one it skipped.
#[derive(Default)]
struct Log(Vec<Event>);

impl Log {
    /// Reads events until at least `count` in the whole log satisfy `pick`;
    /// returns what `pick` made of them, sorted.
    async fn until<T: Ord>(
        &mut self,
        session: &mut TestSession,
        count: usize,
        pick: impl Fn(&Event) -> Option<T>,
    ) -> Vec<T> {
        loop {
            let mut found: Vec<T> = self.0.iter().filter_map(&pick).collect();
            if found.len() >= count {
                found.sort();
                return found;
            }
            self.0.push(session.next_event().await);
        }
    }
}

fn approval(event: &Event) -> Option<(String, String)> {
    match event {
        Event::ApprovalRequested { id, agent_id, .. } => Some((id.clone(), agent_id.clone())),
        _ => None,
    }
}

fn completion(event: &Event) -> Option<(String, String)> {
    match event {
        Event::AgentCompleted {
            agent_id, status, ..
        } => Some((agent_id.clone(), status.clone())),
        _ => None,
    }
}

#[tokio::test]
async fn eight_parallel_workers_follow_their_scripts_and_approvals_reach_the_right_one() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let who = asker(request);
        let n = iteration(request);
        Some(match (who.as_str(), n) {
            ("PARENT spawn", 1) => reply_calls(
                &(1..=8)
                    .map(|i| spawn(&format!("s{i}"), &format!("task-{i}")))
                    .collect::<Vec<_>>(),
            ),
            ("PARENT spawn", _) => Reply::sse(&text_chunks("all spawned")),
            ("PARENT second", 1) => reply_calls(&[
                spawn("s9", "task-9"),
                spawn("s10", "task-10"),
                (
                    "pw".into(),
                    "write_file",
                    json!({"path": "parent.txt", "content": "p"}),
                ),
            ]),
            ("PARENT second", _) => Reply::sse(&text_chunks("second done")),
            (task, 1) if ["task-3", "task-6", "task-9", "task-10"].contains(&task) => {
                let i = &task[5..];
                Reply::sse(&tool_call_chunks(
                    &format!("c{i}"),
                    "write_file",
                    &json!({"path": format!("out-{i}.txt"), "content": i}),
                ))
            }
            (task, 1) if task.starts_with("task-") => {
                Reply::sse(&tool_call_chunks("look", "list_dir", &json!({})))
            }
            (task, _) => Reply::sse(&text_chunks(&format!("done {task}"))),
        })
    });
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(true)
        .subagents(BTreeMap::new(), 10)
        .start()
        .await;
    let ws = session.workspace_path();

    // Phase 1: the parent spawns eight workers in the background and goes idle.
    let mut log = Log::default();
    let first = session.turn("PARENT spawn").await;
    log.0.extend(first.iter().cloned());
    assert!(
        matches!(turn_end(&first), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&first)
    );
    let spawned: Vec<String> = first
        .iter()
        .filter_map(|e| match e {
            Event::AgentSpawned {
                agent_id,
                posture,
                depth,
                ..
            } => {
                assert_eq!((*posture, *depth), (Posture::Suggest, 1));
                Some(agent_id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(spawned, (1..=8).map(|i| i.to_string()).collect::<Vec<_>>());
    // Workers 3 and 6 ask at the same time; the parent is idle.
    let asked = log.until(&mut session, 2, approval).await;
    assert_eq!(
        asked,
        [
            ("agent:3:approval:1".to_string(), "3".to_string()),
            ("agent:6:approval:1".into(), "6".into())
        ]
    );
    session.submit(Op::Approve {
        id: "agent:6:approval:1".into(),
        decision: ApprovalDecision::Deny,
        reason: None,
    });
    session.submit(Op::Approve {
        id: "agent:3:approval:1".into(),
        decision: ApprovalDecision::AllowOnce,
        reason: None,
    });
    let done = log.until(&mut session, 8, completion).await;
    assert!(
        done.iter().all(|(_, status)| status == "completed"),
        "{done:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out-3.txt")).expect("worker 3 wrote"),
        "3"
    );
    assert!(!ws.join("out-6.txt").exists(), "worker 6 was denied");
    assert!(
        observations_of(&mock, "task-6")
            .iter()
            .any(|o| o.contains("denied by the user"))
    );
    let waiting = log
        .until(&mut session, 2, |e| match e {
            Event::AgentStatusChanged {
                agent_id,
                status: AgentStatus::WaitingForUser,
            } => Some(agent_id.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        waiting,
        ["3", "6"],
        "the workers that asked showed `waiting for user`"
    );
    assert!(
        observations_of(&mock, "task-3")
            .iter()
            .any(|o| o.starts_with("wrote"))
    );
    for i in [1, 2, 4, 5, 7, 8] {
        let seen = observations_of(&mock, &format!("task-{i}"));
        assert_eq!(
            seen.len(),
            1,
            "worker {i} followed its own script: {seen:?}"
        );
    }

    // Phase 2: the parent itself waits on a prompt while two new workers ask.
    session.submit(Op::user("PARENT second"));
    let asked = log.until(&mut session, 5, approval).await;
    let asked: Vec<_> = asked
        .into_iter()
        .filter(|(id, _)| !id.starts_with("agent:3:") && !id.starts_with("agent:6:"))
        .collect();
    assert_eq!(
        asked,
        [
            ("agent:10:approval:1".to_string(), "10".to_string()),
            ("agent:9:approval:1".into(), "9".into()),
            ("approval:1".into(), "main".into()),
        ]
    );
    session.submit(Op::Approve {
        id: "agent:10:approval:1".into(),
        decision: ApprovalDecision::AllowOnce,
        reason: None,
    });
    session.submit(Op::Approve {
        id: "agent:9:approval:1".into(),
        decision: ApprovalDecision::Deny,
        reason: None,
    });
    log.until(&mut session, 10, completion).await;
    assert!(ws.join("out-10.txt").exists() && !ws.join("out-9.txt").exists());
    assert!(
        !ws.join("parent.txt").exists(),
        "the parent is still waiting"
    );
    session.submit(Op::Approve {
        id: "approval:1".into(),
        decision: ApprovalDecision::AllowOnce,
        reason: None,
    });
    let ends = log
        .until(&mut session, 2, |e| {
            is_turn_end(e).then(|| format!("{e:?}"))
        })
        .await;
    assert!(
        ends.iter()
            .any(|e| e.starts_with("TurnCompleted { turn_id: 2")),
        "{ends:?}"
    );
    assert!(ws.join("parent.txt").exists());
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    session.shutdown().await;
}

#[tokio::test]
async fn a_full_access_worker_cannot_start_detached_work() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let who = asker(request);
        Some(match (who.as_str(), iteration(request)) {
            ("boss", 1) => Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "prompt": "daemonize"}),
            )),
            ("boss", _) => Reply::sse(&text_chunks("reported")),
            (_, 1) => Reply::sse(&tool_call_chunks(
                "n1",
                "bash",
                &json!({"command": "nohup python3 -m http.server &"}),
            )),
            _ => Reply::sse(&text_chunks("## Blockers\n- the floor refused nohup")),
        })
    });
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(BTreeMap::new(), 4)
        .start()
        .await;
    let events = session.turn("boss").await;
    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    let worker_decisions: Vec<(Verdict, Layer)> = events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionDecision {
                agent_id,
                tool,
                decision,
                ..
            } if agent_id == "1" && tool == "bash" => Some((decision.verdict, decision.layer)),
            _ => None,
        })
        .collect();
    assert_eq!(worker_decisions, [(Verdict::Deny, Layer::Floor)]);
    let report = observations_of(&mock, "boss").join("\n");
    assert!(
        report.contains("`nohup python3 -m http.server &` → did not run"),
        "{report}"
    );
    assert!(report.contains("the floor refused nohup"), "{report}");
    session.shutdown().await;
}

#[tokio::test]
async fn depth_and_concurrency_limits_refuse_with_clear_messages() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let who = asker(request);
        Some(match (who.as_str(), iteration(request)) {
            ("boss", 1) => reply_calls(&[
                spawn("b1", "nested"),
                spawn("b2", "second"),
                ("b3".into(), "agent", json!({"action": "roster"})),
            ]),
            ("boss", _) => Reply::sse(&text_chunks("ok")),
            ("nested", 1) => Reply::sse(&tool_call_chunks(
                "d1",
                "agent",
                &json!({"action": "spawn", "prompt": "deeper", "role": "leaf"}),
            )),
            (_, _) => Reply::sse(&text_chunks("done")),
        })
    });
    let mut roles = BTreeMap::new();
    roles.insert(
        "leaf".to_string(),
        RoleConfig {
            max_depth: Some(0),
            posture: Some(Posture::Never),
            description: Some("does not delegate".into()),
            ..RoleConfig::default()
        },
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(roles, 1)
        .start()
        .await;
    let events = session.turn("boss").await;
    assert!(matches!(turn_end(&events), Event::TurnCompleted { .. }));
    let boss = observations_of(&mock, "boss");
    assert!(boss[0].starts_with("started agent 1"), "{boss:?}");
    assert!(
        boss[1].contains("the sub-agent limit is reached: 1 already running (--max-subagents)"),
        "{boss:?}"
    );
    assert!(
        boss[2].contains("- leaf: model mock-model, posture ≤ never"),
        "{boss:?}"
    );

    // The limit holds across the whole tree: the running worker cannot
    // start one of its own either.
    let deadline = Instant::now() + Duration::from_secs(10);
    while observations_of(&mock, "nested").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the nested worker never got its answer"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let nested = observations_of(&mock, "nested");
    assert!(
        nested[0].contains("the sub-agent limit is reached"),
        "{nested:?}"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_leaf_role_cannot_delegate_and_never_widens_to_its_parents_posture() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let who = asker(request);
        Some(match (who.as_str(), iteration(request)) {
            ("boss", 1) => Reply::sse(&tool_call_chunks(
                "l1",
                "agent",
                &json!({"action": "spawn", "prompt": "leaf work", "role": "leaf"}),
            )),
            ("boss", _) => Reply::sse(&text_chunks("ok")),
            ("leaf work", 1) => reply_calls(&[
                (
                    "x1".into(),
                    "agent",
                    json!({"action": "spawn", "prompt": "too deep"}),
                ),
                (
                    "x2".into(),
                    "write_file",
                    json!({"path": "leaf.txt", "content": "x"}),
                ),
            ]),
            (_, _) => Reply::sse(&text_chunks("done")),
        })
    });
    let mut roles = BTreeMap::new();
    roles.insert(
        "leaf".to_string(),
        RoleConfig {
            max_depth: Some(0),
            posture: Some(Posture::Never),
            ..RoleConfig::default()
        },
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(roles, 4)
        .start()
        .await;
    let events = session.turn("boss").await;
    assert!(events.iter().any(|e| matches!(e, Event::AgentSpawned { agent_id, posture: Posture::Never, .. } if agent_id == "1")));
    let leaf = observations_of(&mock, "leaf work");
    assert!(
        leaf[0].contains(
            "the sub-agent depth limit (1) is reached: an agent at depth 1 cannot start another"
        ),
        "{leaf:?}"
    );
    assert!(leaf[1].contains("the posture is never"), "{leaf:?}");
    assert!(!session.workspace_path().join("leaf.txt").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn a_worker_asks_its_roles_model_else_the_model_its_parent_was_switched_to() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let who = asker(request);
        Some(match (who.as_str(), iteration(request)) {
            // Both in the foreground: the turn ends after both reports.
            ("boss", 1) => reply_calls(&[
                (
                    "s1".into(),
                    "agent",
                    json!({"action": "spawn", "prompt": "plain work"}),
                ),
                (
                    "s2".into(),
                    "agent",
                    json!({"action": "spawn", "prompt": "fast work", "role": "fast"}),
                ),
            ]),
            (_, _) => Reply::sse(&text_chunks("done")),
        })
    });
    let mut roles = BTreeMap::new();
    roles.insert(
        "fast".to_string(),
        RoleConfig {
            model: Some("fast-model".into()),
            ..RoleConfig::default()
        },
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .subagents(roles, 4)
        .start()
        .await;
    session.submit(Op::SetModel {
        model: "parent-model".into(),
    });
    let events = session.turn("boss").await;

    let mut spawned: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::AgentSpawned { role, model, .. } => Some((role.clone(), model.clone())),
            _ => None,
        })
        .collect();
    spawned.sort();
    assert_eq!(
        spawned,
        [
            ("fast".to_string(), "fast-model".to_string()),
            ("worker".into(), "parent-model".into())
        ]
    );
    let mut asked: Vec<(String, String)> = mock
        .requests()
        .iter()
        .map(|r| {
            (
                asker(r),
                r["model"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    asked.sort();
    asked.dedup();
    assert_eq!(
        asked,
        [
            ("boss".to_string(), "parent-model".to_string()),
            ("fast work".into(), "fast-model".into()),
            ("plain work".into(), "parent-model".into())
        ]
    );
    session.shutdown().await;
}
