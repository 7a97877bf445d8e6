//! Workflows end to end through the library: a host, a mock server over
//! real HTTP, the supervisor and its step agents, the store.

mod admission;
mod check_vars;
mod dry_run;
mod endings;
mod operate;
mod resume;
mod runs;
mod verifier;
mod worktree;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use cadre::actors::EventSink;
use cadre::actors::events::Events;
use cadre::actors::host::{Host, ModelChoice, SessionOptions};
use cadre::runtime::Mode;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::workflows::diagnostic::Source;
use cadre::workflows::engine::{Launch, RunSettings};
use cadre::workflows::scheduler::Report;
use cadre::workflows::validate::{Options, validate};
use serde_json::Value;
use tempfile::TempDir;

use crate::support::mock::MockServer;
use crate::support::{PATIENCE, quick_retries};

/// The first user message of a request: the step's prompt, which says
/// whose conversation it is.
pub fn prompt_of(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Model requests already answered in this conversation.
pub fn answered(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// A host on the mock server, in fresh directories.
pub struct Harness {
    /// The library's whole host: sessions and workflow runs on one store.
    pub host: cadre::workflows::Host,
    /// Holds the data directory (the store) until the test ends.
    pub _data: TempDir,
    pub workspace: TempDir,
}

impl Harness {
    pub async fn new(mock: &MockServer) -> Self {
        Self::with_model(ModelChoice::Server {
            base_url: mock.url.clone(),
            model: "mock-model".into(),
            api_key: None,
            stream: true,
            options: Default::default(),
        })
        .await
    }

    pub async fn with_model(model: ModelChoice) -> Self {
        Self::build(model, None).await
    }

    /// A host whose model endpoint takes at most `max` requests at once.
    pub async fn limited(mock: &MockServer, max: u32) -> Self {
        let model = ModelChoice::Server {
            base_url: mock.url.clone(),
            model: "mock-model".into(),
            api_key: None,
            stream: true,
            options: Default::default(),
        };
        Self::build(model, Some(max)).await
    }

    async fn build(model: ModelChoice, model_requests: Option<u32>) -> Self {
        let data = tempfile::tempdir().expect("data dir");
        let workspace = tempfile::tempdir().expect("workspace");
        let mut builder = Host::builder(data.path());
        if let Some(max) = model_requests {
            builder = builder.model_requests(max);
        }
        let builder = builder.model(model).retry(quick_retries(2));
        let host = cadre::workflows::Host::build(builder, None)
            .await
            .expect("host");
        Self {
            host,
            _data: data,
            workspace,
        }
    }

    pub fn options(&self, posture: Posture) -> SessionOptions {
        let mut options = SessionOptions::new(self.workspace.path());
        options.mode = Some(Mode::Work);
        options.posture = Some(posture);
        options.interactive = false;
        options
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.workspace.path().join(rel)
    }

    /// Runs a workflow to its end under `posture`.
    pub async fn run(&self, text: &str, posture: Posture, max_parallel: Option<u32>) -> Finished {
        let (tx, rx) = cadre::actors::events::channel();
        let source = Source::file("wf.toml", text);
        let workflow = match validate(&source, &Options::default()) {
            Ok(v) => v.workflow,
            Err(e) => panic!("invalid workflow: {}", e.render()),
        };
        let launch = Launch {
            workflow,
            source,
            file: Some("wf.toml".into()),
            settings: RunSettings {
                vars: BTreeMap::new(),
                max_parallel,
            },
            resume: None,
            retry_failed: false,
        };
        let handle = self
            .host
            .run(launch, &self.options(posture), EventSink::new(tx))
            .await
            .expect("started");
        let run_id = handle.run_id.clone();
        let report = tokio::time::timeout(PATIENCE * 3, handle.done)
            .await
            .expect("the run ended in time")
            .expect("a report");
        Finished {
            run_id,
            report,
            events: drain(rx),
        }
    }
}

/// Events received so far.
pub fn drain(mut rx: Events) -> Vec<Event> {
    let mut events = Vec::new();
    while let Ok(envelope) = rx.try_recv() {
        events.push(envelope.event);
    }
    events
}

/// A run's end.
pub struct Finished {
    pub run_id: String,
    pub report: Report,
    pub events: Vec<Event>,
}

impl Finished {
    /// The states an instance went through, in order.
    pub fn states(&self, step: &str, index: Option<u64>) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::StepState {
                    step: s,
                    index: i,
                    state,
                    ..
                } if s == step && *i == index => Some(state.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The step report of `step`.
    pub fn step(&self, step: &str) -> &cadre::workflows::scheduler::StepReport {
        self.report
            .steps
            .iter()
            .find(|s| s.name == step)
            .unwrap_or_else(|| panic!("no step {step}"))
    }
}

/// Shared so a responder can count.
pub type Counter = Arc<std::sync::Mutex<BTreeMap<String, usize>>>;
