//! The spinner a terminal shows while a turn waits for the model: seconds
//! can pass before the first token, and silence reads as a hang.
//!
//! It turns on stderr only when stderr is a terminal and no log lines are
//! written there (they would cut through its line). Which events start and
//! stop the wait is decided by [`waiting`], with no I/O; [`Spinner`] only
//! draws. Its line is cleared before any text is written, and it starts
//! only at the start of a line, so it never eats streamed text.

use std::time::Duration;

use cadre_runtime::protocol::Event;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};

/// What the spinner's line says.
pub const WAITING: &str = "waiting for the model";

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(120);

/// Whether, after `event`, the turn waits for the model (`Some(true)`),
/// does not (`Some(false)`), or is as it was (`None`).
pub fn waiting(event: &Event) -> Option<bool> {
    match event {
        // A request goes out: at the start of a turn, once a tool's result
        // is in, and again after a failed attempt.
        Event::TurnStarted { .. } | Event::ToolResult { .. } | Event::ModelRetry { .. } => {
            Some(true)
        }
        // The model answers, or the turn (or the session) is over or waits
        // for a person.
        Event::AssistantDelta { .. }
        | Event::AssistantMessage { .. }
        | Event::AssistantReasoning { .. }
        | Event::ToolCall { .. }
        | Event::TurnCompleted { .. }
        | Event::TurnFailed { .. }
        | Event::ApprovalRequested { .. }
        | Event::QuestionnaireOpened { .. }
        | Event::AutonomyPaused { .. }
        | Event::SessionIdle { .. }
        | Event::SessionStopped { .. }
        | Event::SessionCompleted { .. } => Some(false),
        // Events are non-exhaustive: one this does not know changes nothing.
        _ => None,
    }
}

/// What the turn is doing after `event`, as its progress line says it:
/// waiting for the model, or running a tool (`running bash`); `Some(None)`
/// when it does neither (an answer, an end, a prompt), `None` when `event`
/// changes nothing.
pub fn doing(event: &Event) -> Option<Option<String>> {
    match event {
        Event::ToolCall { name, .. } => Some(Some(format!("running {name}"))),
        other => waiting(other).map(|wait| wait.then(|| WAITING.to_string())),
    }
}

/// The spinner on stderr, or nothing when it is off.
#[derive(Debug)]
pub struct Spinner {
    /// Whether it may show at all.
    enabled: bool,
    /// The one turning now.
    bar: Option<ProgressBar>,
    /// The last text written ended its line: the spinner's line is free.
    at_line_start: bool,
}

impl Spinner {
    /// A spinner that shows only when `enabled` (stderr a terminal, no
    /// logs there).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            bar: None,
            at_line_start: true,
        }
    }

    /// Clears its line before `text` is written, and notes where `text`
    /// leaves the cursor.
    pub fn before_write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.stop();
        self.at_line_start = text.ends_with('\n');
    }

    /// Starts, relabels or stops it after `event` (and its text) as
    /// [`doing`] says; its elapsed time counts from the latest label.
    pub fn after(&mut self, event: &Event) {
        match doing(event) {
            Some(Some(label)) => match &self.bar {
                Some(bar) => {
                    bar.set_message(label);
                    bar.reset_elapsed();
                }
                None if self.enabled && self.at_line_start => self.bar = Some(start(label)),
                None => {}
            },
            Some(None) => self.stop(),
            None => {}
        }
    }

    /// Clears its line.
    pub fn stop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A spinner drawn now and turning on its own thread, saying `label` and
/// how long it has been (`⠋ running bash (12s)`).
fn start(label: String) -> ProgressBar {
    let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        .with_style(style)
        .with_message(label)
        .with_finish(ProgressFinish::AndClear);
    // Drawn at once, so even a quick answer was announced.
    bar.tick();
    bar.enable_steady_tick(TICK);
    bar
}

#[cfg(test)]
mod tests;
