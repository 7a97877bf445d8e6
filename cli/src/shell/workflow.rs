//! `/workflow FILE` in the shell: a workflow run as an overlay on the
//! session, not a mode. Its events show above the prompt as they come (its
//! steps' approval prompts too, answered like the session's own); when it
//! ends, its table shows and the session carries on. `/workflow cancel
//! [STEP | STEP[i]]` cancels it, a step or one item.
//!
//! The run has the shell's starting mode and posture, with a person to ask.

use std::collections::HashSet;
use std::path::Path;

use cadre_actors::EventSink;
use cadre_runtime::protocol::Event;
use cadre_workflows::Host;
use cadre_workflows::diagnostic::Source;
use cadre_workflows::engine::{Launch, Reserved, RunHandle, RunSettings};
use cadre_workflows::validate::{Options, validate};

use crate::config::RunConfig;
use crate::launch::session_options;

/// The usage line.
pub const USAGE: &str =
    "/workflow FILE runs a workflow; /workflow cancel [STEP | STEP[i]] cancels it";

/// What a `/workflow` line asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Run this file.
    Run(String),
    /// Cancel the run (`None`), a step or an item.
    Cancel(Option<String>),
}

/// `Some` when the line is a `/workflow` command (or its usage is wrong).
pub fn parse(line: &str) -> Option<Result<Request, &'static str>> {
    let mut words = line.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("/workflow") {
        return None;
    }
    let args: Vec<&str> = words.collect();
    Some(match args.as_slice() {
        ["cancel"] => Ok(Request::Cancel(None)),
        ["cancel", target] => Ok(Request::Cancel(Some((*target).to_string()))),
        [file] => Ok(Request::Run((*file).to_string())),
        _ => Err(USAGE),
    })
}

/// A running overlay.
pub struct Overlay {
    /// The run.
    pub handle: RunHandle,
    /// Its events.
    pub events: cadre_actors::events::Events,
    /// The ids of its prompts still open: only answers to these go to it
    /// (a run the session's model delegated shows `step:` prompts too).
    asked: HashSet<String>,
    /// Its step names, kept from the session's delegated runs while it
    /// runs.
    _reserved: Reserved,
}

impl Overlay {
    /// Notes the prompts `event` opens or closes.
    pub fn saw(&mut self, event: &Event) {
        if let Event::ApprovalRequested { id, .. } = event {
            self.asked.insert(id.clone());
        }
        if let Event::ApprovalResolved { id, .. } = event {
            self.asked.remove(id);
        }
    }

    /// Whether `id` is one of its open prompts.
    pub fn asked(&self, id: &str) -> bool {
        self.asked.contains(id)
    }
}

/// Validates and starts `file` (relative to the workspace) beside session
/// `session`; the error is what to show.
pub async fn run(
    host: &Host,
    config: &RunConfig,
    session: &str,
    file: &str,
) -> Result<Overlay, String> {
    let path = config.workspace.join(Path::new(file));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let source = Source::file(file, text);
    let options = Options {
        vars: Default::default(),
        roles: Some(config.roles.keys().cloned().collect()),
    };
    let workflow = validate(&source, &options)
        .map_err(|invalid| invalid.render())?
        .workflow;
    // Its prompts' ids name its steps: while it runs, a run the session's
    // model delegates must use other names, so an answer reaches one step.
    let steps = workflow.steps.iter().map(|s| s.name.clone()).collect();
    let reserved = host
        .engine()
        .reserve(session, steps)
        .map_err(|taken| taken.to_string())?;
    let (tx, events) = cadre_actors::events::channel();
    let launch = Launch {
        workflow,
        source,
        file: Some(path.display().to_string()),
        settings: RunSettings::default(),
        resume: None,
        retry_failed: false,
    };
    let handle = host
        .run(launch, &session_options(config, true), EventSink::new(tx))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Overlay {
        handle,
        events,
        asked: HashSet::new(),
        _reserved: reserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_lines_parse() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/plan on"), None);
        assert_eq!(
            parse("/workflow wf.toml"),
            Some(Ok(Request::Run("wf.toml".into())))
        );
        assert_eq!(parse("/workflow cancel"), Some(Ok(Request::Cancel(None))));
        assert_eq!(
            parse("/workflow cancel review[2]"),
            Some(Ok(Request::Cancel(Some("review[2]".into()))))
        );
        assert_eq!(parse("/workflow"), Some(Err(USAGE)));
        assert_eq!(parse("/workflow a b c"), Some(Err(USAGE)));
    }
}
