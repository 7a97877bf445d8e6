//! MCP servers over stdio, through the same gates as the built-in tools:
//! the rmcp server in `examples/mcp_fixture.rs`, and the official Python
//! SDK's FastMCP server that `.ci/run` installs.

use std::path::PathBuf;
use std::time::Duration;

use cadre::runtime::Mode;
use cadre::runtime::mcp::{McpHub, McpServerConfig};
use cadre::runtime::permission::Posture;
use cadre::runtime::permission::rules::{RuleKind, RuleSet, Scope};
use cadre::runtime::protocol::Event;
use cadre::runtime::tool::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, contents, tool_results, turn_end};

/// The fixture server, built by cargo next to this test binary.
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = dir.join("examples").join("mcp_fixture");
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds it (or `cargo build --example mcp_fixture`)",
        path.display()
    );
    path
}

/// The fixture as a server named `name`.
fn server(name: &str, trusted: bool) -> McpServerConfig {
    let mut config = McpServerConfig::new(name, fixture().display().to_string());
    config.trusted = trusted;
    config
}

/// A session with `servers`, whose model makes `calls` one by one and then
/// answers; returns the events of that turn and the session.
pub(crate) async fn run(
    builder: SessionBuilder,
    mock: &MockServer,
    calls: &[(&str, Value)],
) -> (Vec<Event>, TestSession) {
    let mut session = builder.start().await;
    std::fs::write(session.workspace_path().join("note.txt"), "the note").expect("note");
    let mut replies: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| Reply::sse(&tool_call_chunks(&format!("c{i}"), name, args)))
        .collect();
    replies.push(Reply::sse(&text_chunks("done")));
    mock.push(replies);
    let events = session.turn("go").await;
    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    (events, session)
}

/// The names of the tools the first model request offered.
pub(crate) fn offered(mock: &MockServer) -> Vec<String> {
    mock.requests()[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .filter(|n| n.starts_with("mcp_"))
        .map(str::to_string)
        .collect()
}

fn results(events: &[Event]) -> Vec<(String, String)> {
    tool_results(events)
}

pub(crate) fn pair(name: &str, code: &str) -> (String, String) {
    (name.to_string(), code.to_string())
}

#[tokio::test]
async fn plan_offers_and_runs_only_a_trusted_servers_read_only_tools() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .mcp(vec![server("trusted", true), server("plain", false)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            ("mcp_trusted_read_file", json!({"path": "note.txt"})),
            ("mcp_plain_read_file", json!({"path": "note.txt"})),
        ],
    )
    .await;
    let mut shown = offered(&mock);
    shown.sort();
    // The untrusted server offers nothing in Plan; of the trusted one's,
    // only the tools that say they are read-only.
    assert_eq!(
        shown,
        [
            "mcp_trusted_add",
            "mcp_trusted_crash",
            "mcp_trusted_read_file",
            "mcp_trusted_sneaky_delete"
        ]
    );
    assert_eq!(
        results(&events),
        [
            pair("mcp_trusted_read_file", "ok"),
            pair("mcp_plain_read_file", "tool_not_allowed")
        ]
    );
    let seen = contents(&mock.requests()[1], "tool");
    assert_eq!(seen[0], "the note");
    session.shutdown().await;
}

#[tokio::test]
async fn a_write_tool_is_refused_in_plan_whatever_the_server_says() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url)
        .mode(Mode::Plan)
        .mcp(vec![server("trusted", true), server("plain", false)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            (
                "mcp_trusted_write_file",
                json!({"path": "note.txt", "text": "gone"}),
            ),
            // It claims to be read-only; the server is not trusted.
            ("mcp_plain_sneaky_delete", json!({"path": "note.txt"})),
        ],
    )
    .await;
    assert_eq!(
        results(&events),
        [
            pair("mcp_trusted_write_file", "tool_not_allowed"),
            pair("mcp_plain_sneaky_delete", "tool_not_allowed")
        ]
    );
    assert_eq!(
        std::fs::read_to_string(session.workspace_path().join("note.txt")).expect("note"),
        "the note"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn an_untrusted_servers_tools_all_need_work_and_a_person_or_a_rule() {
    // In Work, under suggest with no one to ask, even its read tool is a
    // call that can change things: denied, unless a rule allows it.
    let mock = MockServer::start().await;
    let mut rules = RuleSet::new();
    rules
        .add(RuleKind::Allow, Scope::User, "mcp_plain_write_file(src/**)")
        .expect("rule");
    let builder = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(false)
        .rules(rules)
        .mcp(vec![server("plain", false)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            ("mcp_plain_read_file", json!({"path": "note.txt"})),
            (
                "mcp_plain_write_file",
                json!({"path": "top.txt", "text": "x"}),
            ),
            (
                "mcp_plain_write_file",
                json!({"path": "note.txt", "text": "x"}),
            ),
        ],
    )
    .await;
    assert_eq!(
        results(&events),
        [
            pair("mcp_plain_read_file", "permission_denied"),
            pair("mcp_plain_write_file", "permission_denied"),
            pair("mcp_plain_write_file", "permission_denied"),
        ]
    );
    assert!(offered(&mock).contains(&"mcp_plain_read_file".to_string()));
    session.shutdown().await;

    // The path rule allows writes under src/ only.
    let mock = MockServer::start().await;
    let mut rules = RuleSet::new();
    rules
        .add(RuleKind::Allow, Scope::User, "mcp_plain_write_file(src/**)")
        .expect("rule");
    let builder = SessionBuilder::openai(&mock.url)
        .posture(Posture::Suggest)
        .interactive(false)
        .rules(rules)
        .mcp(vec![server("plain", false)]);
    let mut session = builder.start().await;
    std::fs::create_dir(session.workspace_path().join("src")).expect("src");
    mock.push([
        Reply::sse(&tool_call_chunks(
            "w1",
            "mcp_plain_write_file",
            &json!({"path": "src/a.txt", "text": "inside"}),
        )),
        Reply::sse(&tool_call_chunks(
            "w2",
            "mcp_plain_write_file",
            &json!({"path": "b.txt", "text": "outside"}),
        )),
        Reply::sse(&text_chunks("done")),
    ]);
    let events = session.turn("write").await;
    assert_eq!(
        results(&events),
        [
            pair("mcp_plain_write_file", "ok"),
            pair("mcp_plain_write_file", "permission_denied")
        ]
    );
    let ws = session.workspace_path();
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).expect("a"),
        "inside"
    );
    assert!(!ws.join("b.txt").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn the_floor_blocks_an_mcp_write_into_git_even_under_full_access() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .mcp(vec![server("fx", true)]);
    let (events, session) = run(
        builder,
        &mock,
        &[(
            "mcp_fx_write_file",
            json!({"path": ".git/hooks/pre-commit", "text": "evil"}),
        )],
    )
    .await;
    assert_eq!(
        results(&events),
        [pair("mcp_fx_write_file", "permission_denied")]
    );
    assert!(!session.workspace_path().join(".git").exists());
    session.shutdown().await;
}

#[tokio::test]
async fn arguments_that_violate_a_tools_schema_never_reach_the_server() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url).mcp(vec![server("fx", true)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            ("mcp_fx_add", json!({"a": "one", "b": 2})),
            ("mcp_fx_add", json!({"a": 1, "b": 2})),
        ],
    )
    .await;
    assert_eq!(
        results(&events),
        [
            pair("mcp_fx_add", "invalid_arguments"),
            pair("mcp_fx_add", "ok")
        ]
    );
    let seen = contents(&mock.requests()[1], "tool");
    assert!(seen[0].contains("at '/a'"), "{}", seen[0]);
    let seen = contents(&mock.requests()[2], "tool");
    assert_eq!(seen[1], "3");
    session.shutdown().await;
}

#[tokio::test]
async fn a_crashing_server_fails_its_call_and_is_started_again_at_the_next() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url).mcp(vec![server("fx", true)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            ("mcp_fx_crash", json!({})),
            ("mcp_fx_add", json!({"a": 40, "b": 2})),
        ],
    )
    .await;
    assert_eq!(
        results(&events),
        [pair("mcp_fx_crash", "failed"), pair("mcp_fx_add", "ok")]
    );
    let seen = contents(&mock.requests()[2], "tool");
    assert!(
        seen[0].contains("stopped during this call") && seen[0].contains("crashing on purpose"),
        "{}",
        seen[0]
    );
    assert_eq!(seen[1], "42");
    let reports = session.mcp.reports().await;
    assert_eq!(reports[0].state, "running");
    session.shutdown().await;
}

#[tokio::test]
async fn servers_that_do_not_start_are_reported_and_the_rest_go_on() {
    let mut hang = server("hang", true);
    hang.args = vec!["--hang".into()];
    hang.startup_timeout = Duration::from_millis(500);
    let mut fail = server("fail", true);
    fail.args = vec!["--fail".into()];
    let dir = tempfile::tempdir().expect("dir");
    let mut registry = ToolRegistry::new();
    let hub = McpHub::start(
        vec![hang, fail, server("ok", false)],
        dir.path(),
        &mut registry,
    )
    .await;
    let failures = hub.failures();
    let names: Vec<&str> = failures.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["hang", "fail"]);
    let (hang, fail) = (&failures[0].1, &failures[1].1);
    assert!(
        hang.message.contains("did not answer `initialize`"),
        "{hang}"
    );
    assert!(hang.stderr.contains("not answering"), "{hang}");
    assert!(fail.to_string().contains("missing API token"), "{fail}");
    let tools: Vec<&str> = registry.definitions().map(|d| d.name.as_str()).collect();
    assert!(tools.iter().all(|t| t.starts_with("mcp_ok_")), "{tools:?}");
    assert_eq!(tools.len(), 5);
    hub.shutdown().await;
}

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

#[tokio::test]
async fn sub_agents_get_mcp_tools_only_through_their_authority() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        // Whether a call of this turn was answered already.
        let answered = request["messages"].as_array().is_some_and(|m| {
            m.iter()
                .rev()
                .take_while(|m| m["role"] != "user")
                .any(|m| m["role"] == "tool")
        });
        Some(match (asker(request).as_str(), answered) {
            ("boss", false) => Reply::sse(&tool_call_chunks(
                "s1",
                "agent",
                &json!({"action": "spawn", "prompt": "helper work", "role": "helper"}),
            )),
            ("helper work", false) => Reply::sse(&tool_call_chunks(
                "h1",
                "mcp_fx_add",
                &json!({"a": 1, "b": 2}),
            )),
            ("reader work", false) => Reply::sse(&tool_call_chunks(
                "r1",
                "mcp_fx_add",
                &json!({"a": 1, "b": 2}),
            )),
            ("boss2", false) => Reply::sse(&tool_call_chunks(
                "s2",
                "agent",
                &json!({"action": "spawn", "prompt": "reader work", "role": "reader"}),
            )),
            (_, _) => Reply::sse(&text_chunks("done")),
        })
    });
    let mut roles = std::collections::BTreeMap::new();
    roles.insert(
        "helper".to_string(),
        cadre::runtime::config::RoleConfig::default(),
    );
    roles.insert(
        "reader".to_string(),
        cadre::runtime::config::RoleConfig {
            allowed_tools: Some(vec!["read_file".into()]),
            ..Default::default()
        },
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .subagents(roles, 2)
        .mcp(vec![server("fx", true)])
        .start()
        .await;
    session.turn("boss").await;
    session.turn("boss2").await;
    let seen = |who: &str| -> Vec<String> {
        mock.requests()
            .iter()
            .filter(|r| asker(r) == who)
            .flat_map(|r| contents(r, "tool"))
            .collect()
    };
    // A role without an allow-list inherits the session's MCP tools; one
    // with an allow-list gets only what it names.
    assert_eq!(seen("helper work"), ["3"]);
    let reader = seen("reader work");
    assert!(
        reader[0].contains("'mcp_fx_add' is not among this agent's allowed tools"),
        "{reader:?}"
    );
    session.shutdown().await;
}
