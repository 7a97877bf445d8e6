//! `cadre mcp serve`: another agent (rmcp's client) delegates to cadre
//! through its `run` and `workflow` tools, under a posture ceiling.

use std::path::Path;

use pretty_assertions::assert_eq;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::support::cli::{dirs, s};
use crate::support::hermetic::Hermetic;

/// `cadre mcp serve` with `flags`, and a client connected to it.
async fn serve(flags: &[&str]) -> (RunningService<RoleClient, ()>, tokio::process::Child) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(["mcp", "serve"])
        .args(flags)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre mcp serve");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let client = ().serve((stdout, stdin)).await.expect("the MCP handshake");
    (client, child)
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> (bool, Value) {
    let arguments = args.as_object().cloned().expect("an object");
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("the call is answered");
    let failed = result.is_error == Some(true);
    let value = result.structured_content.clone().unwrap_or_else(|| {
        json!(
            result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
        )
    });
    (failed, value)
}

fn script(dir: &Path) -> String {
    let path = dir.join("script.toml");
    std::fs::write(
        &path,
        r#"
[[response]]
iteration = 1
text = "writing"
[[response.tool_calls]]
name = "write_file"
arguments = { path = "out.txt", content = "out\n" }

[[response]]
iteration = 2
text = "all done"
"#,
    )
    .expect("script");
    path.display().to_string()
}

#[tokio::test]
async fn run_answers_with_the_session_and_its_changes_under_a_posture_never_wider_than_cadres() {
    let (ws, data) = dirs();
    let script = script(data.path());
    let flags = [
        "--script",
        &script,
        "--data-dir",
        s(data.path()),
        "--workspace",
        s(ws.path()),
    ];

    // Configured with bypass: the caller may narrow it, and nobody is asked.
    let mut bypass = flags.to_vec();
    bypass.extend(["--posture", "bypass"]);
    let (client, _child) = serve(&bypass).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["run", "workflow"]);

    let (failed, narrowed) = call(
        &client,
        "run",
        json!({"prompt": "write", "posture": "suggest"}),
    )
    .await;
    assert!(!failed, "{narrowed}");
    assert_eq!(narrowed["status"], "completed");
    assert_eq!(narrowed["answer"], "all done");
    let decision = narrowed["decisions"][0].as_str().unwrap_or_default();
    assert!(
        decision.contains("denied 'write_file'") && decision.contains("no one can answer"),
        "{narrowed}"
    );
    assert!(!ws.path().join("out.txt").exists(), "a narrowed call wrote");

    let (_, planned) = call(&client, "run", json!({"prompt": "write", "mode": "plan"})).await;
    assert_eq!(planned["changed"]["created"], json!([]), "{planned}");
    assert!(!ws.path().join("out.txt").exists(), "Plan wrote");

    let (failed, ran) = call(
        &client,
        "run",
        json!({"prompt": "write", "workspace": s(ws.path())}),
    )
    .await;
    assert!(!failed, "{ran}");
    assert_eq!(
        ran["changed"],
        json!({"created": ["out.txt"], "modified": [], "deleted": []})
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).expect("written"),
        "out\n"
    );
    // The session is stored, as any other.
    let id = ran["session_id"].as_str().expect("a session id");
    let shown =
        crate::support::cli::cadre(&["sessions", "show", id, "--data-dir", s(data.path())]).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    client.cancel().await.expect("close");
    std::fs::remove_file(ws.path().join("out.txt")).expect("clean");

    // Configured with suggest: asking for bypass gets suggest, and the
    // write that would need a person is denied with the reason.
    let mut suggest = flags.to_vec();
    suggest.extend(["--posture", "suggest"]);
    let (client, _child) = serve(&suggest).await;
    let (_, wider) = call(
        &client,
        "run",
        json!({"prompt": "write", "posture": "bypass"}),
    )
    .await;
    assert!(
        !ws.path().join("out.txt").exists(),
        "a caller widened the posture: {wider}"
    );
    assert!(
        wider["decisions"][0]
            .as_str()
            .unwrap_or_default()
            .contains("denied"),
        "{wider}"
    );
    let (failed, bad) = call(
        &client,
        "run",
        json!({"prompt": "write", "workspace": "relative"}),
    )
    .await;
    assert!(failed, "{bad}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn workflow_runs_the_operate_plan_and_answers_with_its_report() {
    let (ws, data) = dirs();
    let path = data.path().join("script.toml");
    std::fs::write(
        &path,
        "[[response]]\nrepeat = true\ntext = \"step answer\"\n",
    )
    .expect("script");
    let script = path.display().to_string();
    let (client, _child) = serve(&[
        "--script",
        &script,
        "--data-dir",
        s(data.path()),
        "--workspace",
        s(ws.path()),
    ])
    .await;
    let plan = json!({"workflow": {"name": "review"}, "steps": [
        {"name": "look", "prompt": "look around", "mode": "plan"},
        {"name": "sum", "prompt": "sum up {{steps.look.output}}", "needs": ["look"]},
    ]});
    let (failed, report) = call(&client, "workflow", plan).await;
    assert!(!failed, "{report}");
    let text = report["report"].as_str().expect("a report");
    assert!(
        text.contains("look") && text.contains("sum") && text.contains("step answer"),
        "{text}"
    );
    let (failed, invalid) = call(&client, "workflow", json!({"workflow": {"name": "x"}, "steps": [{"name": "a", "prompt": "p", "needs": ["missing"]}]})).await;
    assert!(failed, "an invalid plan ran: {invalid}");
    client.cancel().await.expect("close");
}
