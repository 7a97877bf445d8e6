//! Two sessions at once on one host: each runs its own turn against the
//! shared model and store, in its own workspace, and their events are
//! read side by side.
//!
//! Run with `cargo run --example two_sessions`.

use cadre::actors::host::{Host, ModelChoice, SessionOptions, Started};
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{Event, Op};

/// Every agent follows this script with its own cursor: write a file named
/// after its session, then answer.
const SCRIPT: &str = r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "notes-${session_id}.txt", content = "written by ${session_id}\n" }

[[response]]
iteration = 2
text = "Wrote my notes."
"#;

/// Drives one session to the end of its turn and stops it; returns the
/// session id and its final answer.
async fn run(mut session: Started, prompt: &str) -> Result<(String, String), String> {
    session
        .handle
        .submit(Op::user(prompt))
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    while let Some(envelope) = session.events.recv().await {
        match envelope.event {
            Event::AssistantMessage { text, .. } => answer = text,
            Event::TurnCompleted { .. } | Event::TurnFailed { .. } => {
                let _ = session.handle.submit(Op::Shutdown);
            }
            Event::SessionStopped { .. } => break,
            _ => {}
        }
    }
    let id = session.session_id.clone();
    session.handle.stopped().await;
    Ok((id, answer))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::temp_dir().join(format!("cadre-two-{}", std::process::id()));
    let host = Host::builder(root.join("data"))
        .model(ModelChoice::ScriptText {
            text: SCRIPT.into(),
            name: "two sessions".into(),
        })
        .build()
        .await?;
    let mut started = Vec::new();
    for name in ["left", "right"] {
        let workspace = root.join(name);
        std::fs::create_dir_all(&workspace)?;
        let mut options = SessionOptions::new(&workspace);
        // No one answers prompts here; writes in a throwaway directory.
        options.posture = Some(Posture::Bypass);
        options.interactive = false;
        started.push((workspace, host.start(options).await?));
    }
    let [(left_ws, left), (right_ws, right)]: [_; 2] =
        started.try_into().map_err(|_| "two sessions")?;
    let (a, b) = tokio::join!(run(left, "take notes"), run(right, "take notes"));
    for ((id, answer), ws) in [(a?, left_ws), (b?, right_ws)] {
        let written = std::fs::read_to_string(ws.join(format!("notes-{id}.txt")))?;
        println!("{id}: {answer} ({})", written.trim());
    }
    host.close().await;
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
