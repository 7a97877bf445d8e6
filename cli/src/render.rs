//! Consumers of the event stream: text for people, JSON for machines.
//!
//! Text puts the assistant's words on stdout and everything else on stderr,
//! so `cadre exec … > answer.txt` keeps only the answer. stream-json writes
//! each event as one line on stdout; json writes one summary object at the end.

mod text;

pub(crate) use text::brief_arguments;
use text::{category_name, first_line, some_lines};

use cadre_runtime::Mode;
use cadre_runtime::permission::{Layer, Verdict};
use cadre_runtime::protocol::{
    Activity, AgentStatus, ApprovalOutcome, Event, ModeSource, ToolStatus, Usage,
};
use cadre_runtime::sandbox::WallState;
use cadre_runtime::store::QuestionnaireAnswer;
use cadre_runtime::store::QuestionnaireKind;
use serde_json::json;

use crate::args::OutputFormat;
use crate::followup::Followup;

/// Renders events in one of the output formats.
pub struct Renderer {
    /// Turns on stderr while text waits for the model.
    spinner: crate::spinner::Spinner,
    format: OutputFormat,
    /// For `text`: the event's text.
    view: TextView,
    /// For `json`: what the summary reports.
    summary: Summary,
}

#[derive(Default)]
struct Summary {
    session_id: String,
    text: String,
    /// The last message no tool call followed in a completed turn: the
    /// run's answer (`--output-last-message`).
    answer: Option<String>,
    /// The latest message, until its turn says whether it was the answer.
    held: Option<String>,
    usage: Usage,
    iterations: u32,
    tool_calls: u32,
    error: Option<String>,
}

impl Renderer {
    /// A renderer for `format`; text goes through `view`.
    pub fn new(format: OutputFormat, view: TextView) -> Self {
        Self {
            format,
            view,
            summary: Summary::default(),
            spinner: crate::spinner::Spinner::new(false),
        }
    }

    /// Shows a spinner on stderr while text waits for the model, when
    /// `enabled` (stderr is a terminal with no log lines on it).
    pub fn with_spinner(mut self, enabled: bool) -> Self {
        self.spinner = crate::spinner::Spinner::new(enabled && self.format == OutputFormat::Text);
        self
    }

    /// Clears the spinner's line before a line of the caller's own.
    pub fn pause(&mut self) {
        self.spinner.stop();
    }

    /// The run's answer so far: the last message of its last completed
    /// turn that no tool call followed.
    pub fn answer(&self) -> Option<&str> {
        self.summary.answer.as_deref()
    }

    /// Renders one event.
    pub fn event(&mut self, event: &Event) {
        self.remember(event);
        if let Event::SessionCompleted { .. } = event
            && self.format == OutputFormat::Text
            && let Some(answer) = self.view.take_answer()
        {
            self.spinner.before_write(&answer);
            crate::out::text(
                true,
                &crate::printable::printable(&format!("{}\n", answer.trim_end())),
            );
        }
        match self.format {
            OutputFormat::StreamJson => {
                if let Ok(line) = serde_json::to_string(event) {
                    crate::outln!("{line}");
                }
            }
            OutputFormat::Text => self.text(event),
            OutputFormat::Json => {
                if let Event::SessionCompleted { status, exit_code } = event {
                    let s = &self.summary;
                    let value = json!({
                        "session_id": s.session_id,
                        "status": status,
                        "exit_code": exit_code,
                        "text": s.text,
                        "usage": s.usage,
                        "iterations": s.iterations,
                        "tool_calls": s.tool_calls,
                        "error": s.error,
                    });
                    crate::outln!("{value}");
                }
            }
        }
    }

    fn remember(&mut self, event: &Event) {
        let s = &mut self.summary;
        match event {
            Event::SessionStarted { session_id, .. } => s.session_id.clone_from(session_id),
            Event::AssistantMessage { text, .. } => {
                s.text.clone_from(text);
                s.held = Some(text.clone());
            }
            Event::ToolCall { .. } => {
                s.tool_calls += 1;
                s.held = None;
            }
            Event::TurnCompleted {
                usage, iterations, ..
            } => {
                s.usage.add(*usage);
                s.iterations += iterations;
                if let Some(answer) = s.held.take() {
                    s.answer = Some(answer);
                }
            }
            Event::TurnFailed {
                message,
                usage,
                iterations,
                ..
            } => {
                s.usage.add(*usage);
                s.iterations += iterations;
                s.error = Some(message.clone());
                s.held = None;
                s.answer = None;
            }
            _ => {}
        }
    }

    fn text(&mut self, event: &Event) {
        if let Some(piece) = self.view.event(event) {
            // What a file, a command or the model wrote never drives the terminal.
            let text = crate::printable::printable(&piece.text);
            self.spinner.before_write(&text);
            crate::out::text(piece.stream == Stream::Out, &text);
        }
        self.spinner.after(event);
    }
}

/// Where a piece of text belongs: `exec` keeps the answer alone on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The assistant's words and the plan: what a person asked for.
    Out,
    /// Progress: turns, tool calls, decisions.
    Err,
}

/// Rendered text: whole lines, or a piece of streamed assistant text that
/// a later piece finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Where it goes.
    pub stream: Stream,
    /// The text, ending in a newline unless it is streamed text.
    pub text: String,
}

/// The text form of events, with no I/O: `exec` writes the pieces to stdout
/// and stderr, the shell hands them to its terminal.
#[derive(Debug)]
pub struct TextView {
    /// Whether assistant text was streamed since the last full message, so
    /// the full message is not shown twice.
    streamed: bool,
    /// The flags the commands it prints need (the undo of a restore).
    followup: Followup,
    /// How many lines of a tool's output to show.
    tool_lines: usize,
    /// `exec`: stdout carries only the answer, the last message of the last
    /// turn; messages a tool call followed go to stderr with the progress.
    answer_only: bool,
    /// The latest message, not yet known to be an answer (a tool call may
    /// follow it).
    held: Option<String>,
    /// The latest turn's answer, shown on stdout at the end
    /// ([`TextView::take_answer`]), or on stderr when another turn follows.
    answer: Option<String>,
    /// The goal objective last shown, so a goal update names its objective
    /// when it is new (set, edited, shown by `/goal`) and not after every
    /// turn.
    objective: Option<String>,
}

/// Lines of a tool's output text shows: enough to see what a command
/// printed, not so many that a turn scrolls away.
pub const TOOL_OUTPUT_LINES: usize = 5;

/// Lines of a tool's output text shows with `-v`.
pub const VERBOSE_TOOL_OUTPUT_LINES: usize = 50;

impl Default for TextView {
    fn default() -> Self {
        Self {
            streamed: false,
            followup: Followup::default(),
            tool_lines: TOOL_OUTPUT_LINES,
            answer_only: false,
            held: None,
            answer: None,
            objective: None,
        }
    }
}

impl TextView {
    /// A view that shows up to `lines` lines of each tool's output.
    pub fn with_tool_output_lines(mut self, lines: usize) -> Self {
        self.tool_lines = lines.max(1);
        self
    }

    /// A view that keeps stdout for the answer alone (`exec`): the last
    /// message of the last turn, given by [`TextView::take_answer`] at the
    /// end; every other message goes to stderr as it is known not to be it.
    pub fn answer_only(mut self) -> Self {
        self.answer_only = true;
        self
    }

    /// The answer not yet shown (answer-only views).
    pub fn take_answer(&mut self) -> Option<String> {
        self.held.take().or(self.answer.take())
    }

    /// Messages held back that are known now not to be the answer, as
    /// stderr lines.
    fn not_the_answer(&mut self, held: bool, answer: bool) -> String {
        let mut text = String::new();
        for message in [
            answer.then(|| self.answer.take()).flatten(),
            held.then(|| self.held.take()).flatten(),
        ]
        .into_iter()
        .flatten()
        {
            text.push_str(message.trim_end());
            text.push('\n');
        }
        text
    }

    /// `line` on stderr after what it shows is not the answer.
    fn after_messages(&mut self, held: bool, answer: bool, line: String) -> Option<Piece> {
        let mut text = self.not_the_answer(held, answer);
        text.push_str(&line);
        err(text)
    }

    /// A view whose printed commands carry `followup`'s flags.
    pub fn with_followup(mut self, followup: Followup) -> Self {
        self.followup = followup;
        self
    }

    /// The text for one event, if it shows.
    pub fn event(&mut self, event: &Event) -> Option<Piece> {
        match event {
            Event::SessionStarted {
                session_id,
                mode,
                posture,
                workspace,
                model,
                sandbox,
                sandbox_walls,
                mode_source,
                ..
            } => {
                let mut text = format!(
                    "cadre · session {session_id} · {mode} mode · posture {posture} · {model}\n  workspace {workspace}"
                );
                // A run that is not in Work says why, so a mode saved long
                // ago by the shell's /mode does not surprise a later run.
                if *mode != Mode::default()
                    && let Some(origin) = mode_source.and_then(mode_origin)
                {
                    text.push_str(&format!("\n  {mode} mode {origin}"));
                }
                // Said once, at the start: without a kernel sandbox only the
                // reader decides what commands may do.
                if !sandbox.starts_with("landlock-") {
                    text.push_str(&format!(
                        "\n  sandbox {sandbox}\n  bash commands run under the reader's checks alone"
                    ));
                } else if sandbox.ends_with("(partial)") {
                    text.push_str(&format!(
                        "\n  sandbox {sandbox}: this kernel enforces only part of it"
                    ));
                }
                // Each wall this host cannot build, once; the others hold.
                for wall in sandbox_walls {
                    if wall.state == WallState::Unavailable {
                        text.push_str(&format!(
                            "\n  sandbox wall {} unavailable: {}",
                            wall.wall, wall.detail
                        ));
                    }
                }
                err(text)
            }
            Event::InputAdmitted { queue_length } => {
                if *queue_length > 0 {
                    err(format!("(queued; {queue_length} waiting)"))
                } else {
                    None
                }
            }
            Event::TurnStarted { turn_id, mode } if self.answer_only => {
                self.after_messages(true, true, format!("── turn {turn_id} ({mode}) ──"))
            }
            Event::TurnStarted { turn_id, mode } => err(format!("── turn {turn_id} ({mode}) ──")),
            Event::AssistantDelta { .. } if self.answer_only => None,
            Event::AssistantMessage { text, .. } if self.answer_only => {
                let earlier = self.not_the_answer(true, false);
                self.held = Some(text.clone());
                (!earlier.is_empty()).then_some(Piece {
                    stream: Stream::Err,
                    text: earlier,
                })
            }
            Event::AssistantDelta { text, .. } => {
                self.streamed = true;
                Some(Piece {
                    stream: Stream::Out,
                    text: text.clone(),
                })
            }
            Event::AssistantMessage { text, .. } => {
                // Streamed text only needs its line ended.
                let text = if std::mem::take(&mut self.streamed) {
                    String::new()
                } else {
                    text.clone()
                };
                out(text)
            }
            Event::AssistantReasoning { .. } => None,
            Event::ToolCall {
                name, arguments, ..
            } => {
                let line = format!("  → {name} {}", brief_arguments(arguments));
                self.after_messages(true, false, line)
            }
            Event::ToolResult {
                status,
                error_code,
                output,
                ..
            } => match (status, error_code) {
                (ToolStatus::Ok, _) => {
                    err(format!("    ✓ {}", some_lines(output, self.tool_lines)))
                }
                (ToolStatus::Error, code) => err(format!(
                    "    ✗ {}: {}",
                    code.map_or("error", |c| c.as_str()),
                    some_lines(output, self.tool_lines)
                )),
            },
            // Another agent's calls, indented under its name: one line
            // each, the result's first line.
            Event::AgentToolCall {
                agent_id,
                name,
                arguments,
                ..
            } => err(format!(
                "    [{agent_id}] → {name} {}",
                brief_arguments(arguments)
            )),
            Event::AgentToolResult {
                agent_id,
                status,
                error_code,
                output,
                ..
            } => match (status, error_code) {
                (ToolStatus::Ok, _) => {
                    err(format!("      [{agent_id}] ✓ {}", some_lines(output, 1)))
                }
                (ToolStatus::Error, code) => err(format!(
                    "      [{agent_id}] ✗ {}: {}",
                    code.map_or("error", |c| c.as_str()),
                    some_lines(output, 1)
                )),
            },
            Event::ModelRetry {
                attempt,
                delay_ms,
                reason,
                ..
            } => err(format!(
                "  model request {attempt} failed ({reason}); retrying in {delay_ms} ms"
            )),
            Event::ModelParamDropped { param, reason, .. } => err(format!(
                "  the server rejected `{param}`; sent again without it ({reason})"
            )),
            Event::TurnCompleted {
                turn_id,
                usage,
                iterations,
                context,
            } => {
                let earlier = self.not_the_answer(false, true);
                self.answer = self.held.take();
                let mut text = earlier;
                text.push_str(&format!(
                    "── turn {turn_id} completed · {} · {} prompt / {} completion tokens",
                    count(u64::from(*iterations), "model request"),
                    usage.prompt_tokens,
                    usage.completion_tokens
                ));
                if usage.cached_tokens > 0 || usage.reasoning_tokens > 0 {
                    text.push_str(&format!(
                        " ({} cached, {} reasoning)",
                        usage.cached_tokens, usage.reasoning_tokens
                    ));
                }
                if let Some(c) = context {
                    text.push_str(&format!(" · context {}% of {}", c.percent(), c.window));
                }
                err(text)
            }
            Event::ContextCompacted {
                agent,
                tokens_before,
                tokens_after,
                kind,
            } => err(format!(
                "  context of {agent} compacted ({}): about {tokens_before} → {tokens_after} tokens",
                kind.as_str()
            )),
            Event::TurnFailed {
                turn_id,
                category,
                message,
                ..
            } => {
                let line = format!(
                    "── turn {turn_id} failed ({}): {message}",
                    category_name(*category)
                );
                self.after_messages(true, false, line)
            }
            Event::PermissionDecision { decision, line, .. } => {
                // Read-only calls the floor proved safe are in the event
                // stream and the audit log; the terminal shows the rest.
                let routine = decision.layer == Layer::Floor && decision.verdict == Verdict::Allow;
                if routine {
                    None
                } else {
                    err(format!("    · {line}"))
                }
            }
            Event::ApprovalRequested {
                id, tool, reason, ..
            } => err(format!("    ? approval {id} for '{tool}': {reason}")),
            Event::ApprovalResolved { id, outcome } => {
                err(format!("    ? approval {id}: {}", outcome_text(*outcome)))
            }
            Event::PostureChanged { posture } => err(format!("posture: {posture}")),
            Event::ModelChanged { model } => err(format!("model: {model}")),
            Event::AutonomyPaused { reason, fallback } => match fallback {
                Some(posture) => err(format!(
                    "autonomy paused ({reason}); falling back to {posture}"
                )),
                None => err(format!("autonomy paused ({reason})")),
            },
            Event::AgentSpawned {
                agent_id,
                role,
                model,
                posture,
                depth,
            } => err(format!(
                "  ⇢ agent {agent_id} ({role}, {model}, {posture}, depth {depth})"
            )),
            Event::AgentStatusChanged { agent_id, status } => {
                let status = match status {
                    AgentStatus::Running => "running",
                    AgentStatus::WaitingForUser => "waiting for a person",
                };
                err(format!("  ⇢ agent {agent_id}: {status}"))
            }
            Event::AgentCompleted {
                agent_id,
                status,
                verified,
                ..
            } => err(format!(
                "  ⇢ agent {agent_id} {status}{}",
                if *verified { "" } else { " (unverified)" }
            )),
            Event::WorkspaceRestored { .. } => err(restored_text(event, &self.followup)),
            Event::ModeChanged { mode } => err(format!("mode: {mode}")),
            Event::OpRejected { message, .. } => err(format!("refused: {message}")),
            Event::SessionStatus {
                activity,
                mode,
                posture,
                queue_length,
                turns,
            } => err(format!(
                "{} · {mode} · {posture} · {queue_length} queued · {}",
                activity_text(*activity),
                count(*turns, "turn")
            )),
            Event::SessionStopped { .. } | Event::SessionIdle { .. } => None,
            Event::GoalUpdated {
                objective,
                status,
                reason,
                usage,
                budgets,
                ..
            } => {
                let progress = cadre_runtime::goal::progress_line(*status, *reason, usage, budgets);
                if self.objective.as_deref() == Some(objective.as_str()) {
                    return err(progress);
                }
                self.objective = Some(objective.clone());
                err(format!(
                    "goal: {}
{progress}",
                    first_line(objective)
                ))
            }
            Event::GoalVerification { verdict, gaps, .. } => {
                let mut text = format!("  ⊨ verifier: {verdict}");
                for gap in gaps {
                    text.push_str(&format!("\n    gap: {}", first_line(gap)));
                }
                err(text)
            }
            Event::GoalContinuation { n } => err(format!("── goal continuation {n} ──")),
            Event::GoalCleared {} => err("goal cleared".to_string()),
            Event::PlanEntered { plan_path, backup } => match backup {
                Some(backup) => err(format!(
                    "plan mode: the plan goes to {plan_path} (the earlier one is in {backup})"
                )),
                None => err(format!("plan mode: the plan goes to {plan_path}")),
            },
            Event::QuestionnaireOpened {
                id,
                kind,
                plan_path,
                sha256,
                truncated,
                head,
                ..
            } => {
                let shown: String = head.lines().map(|l| format!("\n  │ {l}")).collect();
                match kind {
                    QuestionnaireKind::PlanApproval => err(format!(
                        "plan submitted for approval: {id} · {plan_path} · sha256 {}{}{shown}",
                        &sha256[..sha256.len().min(12)],
                        if *truncated {
                            " · truncated at 512 KiB"
                        } else {
                            ""
                        }
                    )),
                    QuestionnaireKind::PlanEntry => {
                        err(format!("the model asks to enter Plan mode: {id}{shown}"))
                    }
                }
            }
            Event::QuestionnaireAnswered { id, answer, mode } => {
                err(format!("{id} {} · now in {mode} mode", answer_text(answer)))
            }
            Event::PlanStatus {
                mode,
                plan_path,
                exists,
                pending,
            } => err(format!(
                "{mode} mode · plan {plan_path}{} · {}",
                if *exists { "" } else { " (not written yet)" },
                pending.as_deref().map_or_else(
                    || "no questionnaire waiting".to_string(),
                    |p| format!("{p} waits for an answer")
                )
            )),
            Event::PlanView { plan_path, text } => match text {
                Some(text) => out(text.clone()),
                None => err(format!("there is no plan at {plan_path} yet")),
            },
            Event::WorkflowStarted {
                run_id,
                workflow,
                steps,
            } => err(format!(
                "workflow {workflow} · run {run_id} · {}",
                count(steps.len() as u64, "step")
            )),
            Event::StepState {
                step,
                index,
                state,
                reason,
                ..
            } => {
                let name = match index {
                    Some(i) => format!("{step}[{i}]"),
                    None => step.clone(),
                };
                match reason {
                    Some(why) => err(format!("  {name}: {state} ({why})")),
                    None => err(format!("  {name}: {state}")),
                }
            }
            Event::StepOutput { .. } => None,
            Event::WorkflowCompleted { status, counts, .. } => err(format!(
                "workflow {status}: {}",
                counts
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(state, n)| format!("{n} {state}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Event::SessionCompleted { status, exit_code } => {
                if *exit_code == 0 {
                    None
                } else {
                    err(format!("cadre: {status} (exit {exit_code})"))
                }
            }
            // Events are added within a stream version; one this view does
            // not know yet shows nothing (stream-json still carries it).
            _ => None,
        }
    }
}

/// `1 turn`, `2 turns`: a count and its noun, plural when it is not one.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A plan answer as words: what a person chose, the feedback with it.
pub fn answer_text(answer: &QuestionnaireAnswer) -> String {
    match answer {
        QuestionnaireAnswer::Approve => "approved".into(),
        QuestionnaireAnswer::Defer => "deferred".into(),
        QuestionnaireAnswer::Withdraw => "withdrawn".into(),
        QuestionnaireAnswer::Revise { feedback } => {
            format!("sent back for revision: {feedback}")
        }
    }
}

/// How an approval prompt ended, as words.
pub fn outcome_text(outcome: ApprovalOutcome) -> &'static str {
    match outcome {
        ApprovalOutcome::AllowOnce => "allowed once",
        ApprovalOutcome::AllowSession => "allowed for the session",
        ApprovalOutcome::Deny => "denied",
        ApprovalOutcome::Withdrawn => "withdrawn (the turn ended)",
    }
}

/// Whether a turn runs, as words.
pub fn activity_text(activity: Activity) -> &'static str {
    match activity {
        Activity::Idle => "idle",
        Activity::Running => "a turn runs",
    }
}

/// Where a mode came from, as the end of a sentence; nothing for the
/// built-in default.
fn mode_origin(source: ModeSource) -> Option<&'static str> {
    Some(match source {
        ModeSource::Flag => "from --mode",
        ModeSource::Env => "from CADRE_MODE",
        ModeSource::Config => "from `mode` in a config file",
        ModeSource::Settings => {
            "from default_mode in settings.toml, saved by the shell's /mode \
             (--mode overrides it; `cadre config set default_mode work` resets it)"
        }
        ModeSource::Resumed => "kept from the resumed session (--mode switches it)",
        ModeSource::Default => return None,
    })
}

/// A progress line.
fn err(text: String) -> Option<Piece> {
    Some(Piece {
        stream: Stream::Err,
        text: text + "\n",
    })
}

/// A line of what a person asked for.
fn out(text: String) -> Option<Piece> {
    Some(Piece {
        stream: Stream::Out,
        text: text + "\n",
    })
}

/// A `workspace.restored` event as text: what changed, path by path, and
/// how to undo it (with `followup`'s flags). Empty for any other event.
pub fn restored_text(event: &Event, followup: &Followup) -> String {
    let Event::WorkspaceRestored {
        snapshot,
        before,
        dry_run,
        restored,
        recreated,
        removed,
        skipped,
    } = event
    else {
        return String::new();
    };
    let short = snapshot.get(..12).unwrap_or(snapshot);
    let mut text = if *dry_run {
        format!("restore {short} (dry run, nothing changed):")
    } else {
        format!("workspace restored to {short}:")
    };
    for (verb, paths) in [
        ("restore", restored),
        ("recreate", recreated),
        ("remove", removed),
    ] {
        for path in paths {
            text.push_str(&format!("\n  {verb:<8} {path}"));
        }
    }
    for why in skipped {
        text.push_str(&format!("\n  skipped  {why}"));
    }
    if restored.is_empty() && recreated.is_empty() && removed.is_empty() && skipped.is_empty() {
        text.push_str(" the workspace already matches it");
    }
    if let Some(before) = before {
        let undo = before.get(..12).unwrap_or(before);
        let command = followup.restore(&["apply", undo]);
        text.push_str(&format!("\n  undo with: {command}"));
    }
    text
}
