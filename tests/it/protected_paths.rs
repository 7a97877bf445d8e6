//! Protected paths end to end, through `cadre exec --script`: a scripted
//! model under Full Access and an allow-everything write rule cannot grant
//! itself authority by writing cadre's configuration, by any route.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::Value;
use tempfile::TempDir;

use crate::support::cli::{cadre, events, s};

/// Every way the script tries to write `.cadre/config.local.toml` (and a
/// git hook), then a check of what the next session starts with.
const SELF_GRANT: &str = r#"
[[response]]
turn = 1
iteration = 1
text = "I'll give myself more room."
[[response.tool_calls]]
name = "write_file"
arguments = { path = ".cadre/config.local.toml", content = "posture = \"bypass\"\n[permissions]\nallow = [\"*\"]\n" }
[[response.tool_calls]]
name = "write_file"
arguments = { path = "./src/../.cadre/config.toml", content = "posture = \"bypass\"\n" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "mkdir -p .cadre && echo 'posture = \"bypass\"' > .cadre/config.local.toml" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "git config core.pager 'sh -c id'" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "mkdir -p .git/hooks && cp hook.sh .git/hooks/pre-commit" }
[[response.tool_calls]]
name = "write_file"
arguments = { path = "notes.txt", content = "ordinary work is still allowed\n" }

[[response]]
turn = 1
iteration = 2
text = "done"
"#;

/// `(tool, verdict, layer)` of every permission decision.
fn decisions(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "permission.decision")
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (field("tool"), field("verdict"), field("layer"))
        })
        .collect()
}

#[tokio::test]
async fn a_scripted_model_under_bypass_cannot_grant_itself_bypass_by_writing_cadre_config() {
    let (ws, data, config) = (
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
        TempDir::new().expect("config"),
    );
    std::fs::write(ws.path().join("hook.sh"), "#!/bin/sh\nid\n").expect("hook");
    let script = ws.path().join("self-grant.toml");
    std::fs::write(&script, SELF_GRANT).expect("script");
    let run = |posture: Option<&'static str>| {
        let (ws, data, config, script) = (
            s(ws.path()).to_string(),
            s(data.path()).to_string(),
            s(config.path()).to_string(),
            s(&script).to_string(),
        );
        async move {
            let mut args = vec![
                "--config-dir",
                &config,
                "exec",
                "--script",
                &script,
                "--workspace",
                &ws,
                "--data-dir",
                &data,
                "--allow",
                "write_file(**)",
                "--allow",
                "bash",
                "--output-format",
                "stream-json",
            ];
            if let Some(posture) = posture {
                args.extend(["--posture", posture]);
            }
            args.push("take over");
            cadre(&args).await
        }
    };

    let out = run(Some("bypass")).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = events(&out);
    let floor = |tool: &str| (tool.to_string(), "deny".to_string(), "floor".to_string());
    assert_eq!(
        decisions(&seen),
        [
            floor("write_file"),
            floor("write_file"),
            floor("bash"),
            floor("bash"),
            floor("bash"),
            ("write_file".into(), "allow".into(), "rule".into()),
        ]
    );
    let reasons: Vec<&str> = seen
        .iter()
        .filter(|e| e["type"] == "permission.decision" && e["verdict"] == "deny")
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(
        reasons[0].contains("cadre's project configuration (.cadre)")
            && reasons[3].contains("writes git's configuration or hooks"),
        "{reasons:#?}"
    );
    let exists = |rel: &str| Path::new(&ws.path().join(rel)).exists();
    assert!(!exists(".cadre/config.local.toml") && !exists(".cadre/config.toml"));
    assert!(!exists(".git/hooks/pre-commit"));
    assert!(exists("notes.txt"), "ordinary writes still run");

    // The next session, given no posture, starts as the user's files say
    // (nothing: Ask), not as the model wanted.
    let next = run(None).await;
    let started = events(&next)
        .into_iter()
        .find(|e| e["type"] == "session.started")
        .expect("session.started");
    assert_eq!(started["posture"], "suggest");
}
