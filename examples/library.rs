//! Embedding cadre as a library: a host with a tool of its own and a file
//! store, a session that uses the tool, and the same session resumed by a
//! second host, its conversation read back from the store.
//!
//! Run with `cargo run --example library`.

use std::sync::Arc;

use cadre::actors::host::{Host, ModelChoice, Resume, SessionOptions, Started};
use cadre::runtime::protocol::{Event, Op};
use cadre::runtime::tool::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};
use serde_json::{Value, json};

/// A host tool: counts the words of a text. Read-only, so it runs in every
/// mode and posture without asking.
struct WordCount(ToolDefinition);

impl WordCount {
    fn new() -> Self {
        Self(ToolDefinition::new(
            "word_count",
            "Count the words of a text.",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        ))
    }
}

impl Tool for WordCount {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = args["text"]
                .as_str()
                .ok_or_else(|| ToolError::invalid("text must be a string"))?;
            Ok(text.split_whitespace().count().to_string())
        })
    }
}

/// The first host's model: call the tool, then answer.
const FIRST: &str = r#"
[[response]]
text = "Let me count."
[[response.tool_calls]]
name = "word_count"
arguments = { text = "the quick brown fox" }

[[response]]
text = "The text has 4 words."
"#;

/// The second host's model: answer from the resumed conversation.
const SECOND: &str = r#"
[[response]]
text = "Earlier I counted 4 words."
"#;

/// Sends one message and prints the session's events until its turn ends.
async fn one_turn(session: &mut Started, text: &str) -> Result<(), Box<dyn std::error::Error>> {
    // Every event this message causes echoes the id it was submitted under.
    session.handle.submit_as(text, Op::user(text))?;
    while let Some(envelope) = session.events.recv().await {
        println!("{}", serde_json::to_string(&envelope)?);
        if matches!(
            envelope.event,
            Event::TurnCompleted { .. } | Event::TurnFailed { .. }
        ) {
            return Ok(());
        }
    }
    Err("the session stopped early".into())
}

/// Stops the session and waits until it has.
async fn stop(session: Started) -> Result<(), Box<dyn std::error::Error>> {
    session.handle.submit(Op::Shutdown)?;
    let mut events = session.events;
    while events.recv().await.is_some() {}
    session.handle.stopped().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::temp_dir().join(format!("cadre-library-{}", std::process::id()));
    let (workspace, data) = (root.join("workspace"), root.join("data"));
    std::fs::create_dir_all(&workspace)?;

    let host = Host::builder(&data)
        .model(ModelChoice::ScriptText {
            text: FIRST.into(),
            name: "first script".into(),
        })
        .tool(Arc::new(WordCount::new()))
        .build()
        .await?;
    let mut session = host.start(SessionOptions::new(&workspace)).await?;
    let id = session.session_id.clone();
    one_turn(&mut session, "How many words in 'the quick brown fox'?").await?;
    stop(session).await?;
    host.close().await;

    // A new host on the same data directory resumes the session.
    let host = Host::builder(&data)
        .model(ModelChoice::ScriptText {
            text: SECOND.into(),
            name: "second script".into(),
        })
        .tool(Arc::new(WordCount::new()))
        .build()
        .await?;
    let mut options = SessionOptions::new(&workspace);
    options.resume = Resume::Session(id.clone());
    let mut session = host.start(options).await?;
    let stored = session.handle.snapshot().await?.conversation.len();
    println!("resumed {id} with {stored} stored messages");
    one_turn(&mut session, "What did you count before?").await?;
    stop(session).await?;
    host.close().await;
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
