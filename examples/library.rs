//! Embedding cadre as a library: a host with a tool of its own and a file
//! store, a session that uses the tool, the same session resumed by a
//! second host (its conversation read back from the store), and a small
//! workflow that host runs: two steps, the second fed the first's output.
//!
//! Run with `cargo run --example library`.

use std::sync::Arc;

use cadre::actors::EventSink;
use cadre::actors::host::{ModelChoice, Resume, SessionOptions, Started};
use cadre::runtime::protocol::{Event, Op};
use cadre::runtime::tool::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};
use cadre::workflows::Host;
use cadre::workflows::diagnostic::Source;
use cadre::workflows::engine::{Launch, RunSettings};
use cadre::workflows::validate::{Options, validate};
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

/// The second host's model: answer from the resumed conversation, then
/// the workflow's steps (each step's agent reads the script from the top,
/// taking the entries whose `prompt` its task holds).
const SECOND: &str = r#"
[[response]]
prompt = "What did you count"
text = "Earlier I counted 4 words."

[[response]]
prompt = "Count the words"
text = "Counting."
[[response.tool_calls]]
name = "word_count"
arguments = { text = "one two three" }

[[response]]
prompt = "Count the words"
text = "3"

[[response]]
prompt = "Report the count"
text = "The text has 3 words."
"#;

/// The workflow the second host runs.
const WORKFLOW: &str = r#"
[workflow]
name = "count-and-report"

[[steps]]
name = "count"
prompt = "Count the words of 'one two three'; answer with the number only."

[[steps]]
name = "report"
needs = ["count"]
prompt = "Report the count: {{steps.count.output}}"
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // First, before any thread starts: this binary doubles as the helper
    // that puts each `bash` command behind its seccomp filter and limits.
    cadre::runtime::sandbox::dispatch_helper();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::temp_dir().join(format!("cadre-library-{}", std::process::id()));
    let (workspace, data) = (root.join("workspace"), root.join("data"));
    std::fs::create_dir_all(&workspace)?;

    let sessions = cadre::actors::Host::builder(&data)
        .model(ModelChoice::ScriptText {
            text: FIRST.into(),
            name: "first script".into(),
        })
        .tool(Arc::new(WordCount::new()));
    // No cluster: every agent runs in this process.
    let host = Host::build(sessions, None).await?;
    let mut session = host.start(SessionOptions::new(&workspace)).await?;
    let id = session.session_id.clone();
    one_turn(&mut session, "How many words in 'the quick brown fox'?").await?;
    stop(session).await?;
    host.close().await;

    // A new host on the same data directory resumes the session.
    let sessions = cadre::actors::Host::builder(&data)
        .model(ModelChoice::ScriptText {
            text: SECOND.into(),
            name: "second script".into(),
        })
        .tool(Arc::new(WordCount::new()));
    let host = Host::build(sessions, None).await?;
    let mut options = SessionOptions::new(&workspace);
    options.resume = Resume::Session(id.clone());
    let mut session = host.start(options).await?;
    let stored = session.handle.snapshot().await?.stored;
    println!("resumed {id} with {stored} stored messages");
    one_turn(&mut session, "What did you count before?").await?;
    stop(session).await?;

    // The same host runs a workflow: validated first, then each step by an
    // agent of its own, in the order its `needs` say.
    let source = Source::file("count.toml", WORKFLOW);
    let workflow = validate(&source, &Options::default())
        .map_err(|invalid| invalid.render())?
        .workflow;
    let launch = Launch {
        workflow,
        source,
        file: None,
        settings: RunSettings::default(),
        resume: None,
        retry_failed: false,
    };
    let (tx, mut events) = cadre::actors::events::channel();
    let run = host
        .run(launch, &SessionOptions::new(&workspace), EventSink::new(tx))
        .await?;
    let shown = tokio::spawn(async move {
        while let Some(envelope) = events.recv().await {
            if let Event::StepState { step, state, .. } = &envelope.event {
                println!("step {step}: {state}");
            }
        }
    });
    let report = run.done.await?;
    let _ = run.join.await;
    shown.abort();
    println!("workflow {}: {:?}", run.run_id, report.status);
    for step in &report.steps {
        for instance in &step.instances {
            let output = instance.output.as_deref().unwrap_or("");
            println!("  {}: {output}", step.name);
        }
    }
    if report.status != cadre::runtime::store::RunStatus::Completed {
        return Err("the workflow did not complete".into());
    }
    host.close().await;
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
