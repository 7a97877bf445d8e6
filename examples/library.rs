//! Embedding cadre as a library: start a session on a scripted model, send
//! one message, and print the events as they arrive.
//!
//! Run with `cargo run --example library`.

use std::sync::Arc;
use std::time::Duration;

use cadre::actors::{PermissionConfig, SessionConfig, SessionServices, spawn_session};
use cadre::runtime::model::{Script, ScriptedModel};
use cadre::runtime::paths::DataDir;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{Event, Op};
use cadre::runtime::tool::{ToolRegistry, ToolRunner, Workspace};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = std::env::temp_dir().join("cadre-library-example");
    std::fs::create_dir_all(&workspace)?;
    let script = Script::from_toml(
        include_str!("scripts/write-and-check.toml"),
        "write-and-check.toml",
    )?;
    let services = SessionServices {
        model: Arc::new(ScriptedModel::new(script, "example script")),
        tools: ToolRunner::new(
            Arc::new(ToolRegistry::with_builtins()),
            Duration::from_secs(30),
        ),
        // None: the session keeps its queue and transcript in memory.
        store: None,
    };
    let session_id = uuid::Uuid::new_v4().to_string();
    let paths = DataDir::new(workspace.join(".cadre")).session(&session_id);
    let mut config = SessionConfig::new(session_id, Workspace::new(&workspace)?, paths);
    config.max_iterations = 10;
    // A host with no one at a prompt: Auto-Review lets the guardian (here the
    // scripted model itself would answer) decide; Full Access runs ordinary
    // calls. This example writes one file in a temporary directory.
    config.permissions = PermissionConfig {
        posture: Posture::Bypass,
        interactive: false,
        ..PermissionConfig::default()
    };
    let (session, mut events) = spawn_session(config, services).await?;
    session.submit(Op::user("Add hello.txt"))?;
    while let Some(event) = events.recv().await {
        println!("{}", serde_json::to_string(&event)?);
        if matches!(
            event,
            Event::TurnCompleted { .. } | Event::TurnFailed { .. }
        ) {
            session.submit(Op::Shutdown)?;
        }
    }
    session.stopped().await;
    Ok(())
}
