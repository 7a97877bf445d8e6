//! A hostile MCP server (`tests/data/mcp/hostile_server.py`, JSON-RPC by
//! hand): a schema that lies about `path`, thousands of tools, a schema
//! that reaches for a local file, escape sequences in names, replies that
//! are huge, oversized or not JSON. Each is bounded or refused.

use std::time::Duration;

use cadre::runtime::mcp::McpServerConfig;
use cadre::runtime::permission::Posture;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::mcp::{offered, pair, run};
use crate::support::mock::MockServer;
use crate::support::{SessionBuilder, contents, tool_results};

/// The hostile server as `h`, untrusted, listing `tools` more filler tools.
fn hostile(tools: usize) -> McpServerConfig {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/mcp/hostile_server.py"
    );
    let mut config = McpServerConfig::new("h", "python3");
    config.args = vec![script.into()];
    config.env.insert("HOSTILE_TOOLS".into(), tools.to_string());
    config.tool_timeout = Duration::from_secs(3);
    config
}

#[tokio::test]
async fn a_server_whose_schema_leaves_path_untyped_writes_into_git_unseen() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .mcp(vec![hostile(0)]);
    // Untrusted, its tools' `readOnlyHint: true` is not believed; full
    // access runs them, but the floor reads their `path` as a string.
    let (events, session) = run(
        builder,
        &mock,
        &[
            (
                "mcp_h_write_untyped",
                json!({"path": ".git/hooks/pre-commit", "text": "evil"}),
            ),
            (
                "mcp_h_write_anyof",
                json!({"path": [".git/hooks/post-commit"], "text": "evil"}),
            ),
            (
                "mcp_h_write_anyof",
                json!({"path": ".cadre/config.toml", "text": "evil"}),
            ),
            (
                "mcp_h_write_untyped",
                json!({"path": "ok.txt", "text": "fine"}),
            ),
        ],
    )
    .await;
    assert_eq!(
        tool_results(&events),
        [
            pair("mcp_h_write_untyped", "permission_denied"),
            pair("mcp_h_write_anyof", "invalid_arguments"),
            pair("mcp_h_write_anyof", "permission_denied"),
            pair("mcp_h_write_untyped", "ok"),
        ]
    );
    let ws = session.workspace_path();
    assert!(!ws.join(".git").exists() && !ws.join(".cadre").exists());
    assert_eq!(std::fs::read_to_string(ws.join("ok.txt")).unwrap(), "fine");
    session.shutdown().await;
}

#[tokio::test]
async fn a_server_listing_hundreds_of_tools_floods_every_model_request() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url).mcp(vec![hostile(500)]);
    let (_, session) = run(builder, &mock, &[]).await;
    let shown = offered(&mock);
    assert_eq!(shown.len(), cadre::runtime::mcp::tools::MAX_TOOLS);
    let reports = session.mcp.reports().await;
    let report = &reports[0];
    assert_eq!(report.tools.len(), shown.len());
    let over: Vec<&str> = report
        .skipped
        .iter()
        .filter(|(_, why)| why.contains("more than 100 tools"))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!((over.len(), over[0]), (406, "filler_94"));
    // A schema that refers to a local file is not followed, and not offered.
    let (_, why) = report
        .skipped
        .iter()
        .find(|(name, _)| name == "remote_ref")
        .expect("remote_ref is reported");
    assert!(why.contains("invalid input schema"), "{why}");
    // Escape sequences in a tool's name never reach the model's tool list.
    assert!(
        shown.contains(&"mcp_h_title__0_owned__".to_string()),
        "{shown:?}"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn huge_oversized_and_malformed_replies_are_bounded_and_the_server_goes_on() {
    let mock = MockServer::start().await;
    let builder = SessionBuilder::openai(&mock.url)
        .posture(Posture::Bypass)
        .mcp(vec![hostile(0)]);
    let (events, session) = run(
        builder,
        &mock,
        &[
            ("mcp_h_huge", json!({})),
            ("mcp_h_oversized", json!({})),
            ("mcp_h_noisy", json!({})),
        ],
    )
    .await;
    // The oversized line is dropped unread; its call ends at the tool's
    // timeout and the next call is answered.
    assert_eq!(
        tool_results(&events),
        [
            pair("mcp_h_huge", "ok"),
            pair("mcp_h_oversized", "timeout"),
            pair("mcp_h_noisy", "ok")
        ]
    );
    let seen = contents(&mock.requests()[3], "tool");
    assert!(seen[0].len() < 70 * 1024, "{}", seen[0].len());
    assert!(seen[0].contains("bytes omitted"));
    assert_eq!(seen[2], "answered after noise");
    session.shutdown().await;
}
