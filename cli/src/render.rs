//! Consumers of the event stream: text for people, JSON for machines.
//!
//! Text puts the assistant's words on stdout and everything else on stderr,
//! so `cadre exec … > answer.txt` keeps only the answer. stream-json writes
//! each event as one line on stdout; json writes one summary object at the end.

use std::io::Write;

use cadre_runtime::permission::{Layer, Verdict};
use cadre_runtime::protocol::{Event, ToolStatus, Usage};
use cadre_runtime::store::QuestionnaireKind;
use serde_json::{Value, json};

use crate::args::OutputFormat;

/// Renders events in one of the output formats.
pub struct Renderer {
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
    usage: Usage,
    iterations: u32,
    tool_calls: u32,
    error: Option<String>,
}

impl Renderer {
    /// A renderer for `format`.
    pub fn new(format: OutputFormat) -> Self {
        Self {
            format,
            view: TextView::default(),
            summary: Summary::default(),
        }
    }

    /// Renders one event.
    pub fn event(&mut self, event: &Event) {
        self.remember(event);
        match self.format {
            OutputFormat::StreamJson => {
                if let Ok(line) = serde_json::to_string(event) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
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
                    println!("{value}");
                }
            }
        }
    }

    fn remember(&mut self, event: &Event) {
        let s = &mut self.summary;
        match event {
            Event::SessionStarted { session_id, .. } => s.session_id.clone_from(session_id),
            Event::AssistantMessage { text, .. } => s.text.clone_from(text),
            Event::ToolCall { .. } => s.tool_calls += 1,
            Event::TurnCompleted {
                usage, iterations, ..
            } => {
                s.usage.add(*usage);
                s.iterations += iterations;
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
            }
            _ => {}
        }
    }

    fn text(&mut self, event: &Event) {
        let Some(piece) = self.view.event(event) else {
            return;
        };
        let _ = match piece.stream {
            Stream::Out => {
                let mut out = std::io::stdout().lock();
                out.write_all(piece.text.as_bytes())
                    .and_then(|()| out.flush())
            }
            Stream::Err => std::io::stderr().lock().write_all(piece.text.as_bytes()),
        };
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
#[derive(Debug, Default)]
pub struct TextView {
    /// Whether assistant text was streamed since the last full message, so
    /// the full message is not shown twice.
    streamed: bool,
}

impl TextView {
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
                ..
            } => {
                let mut text = format!(
                    "cadre · session {session_id} · {mode} mode · posture {posture} · {model}\n  workspace {workspace}"
                );
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
                err(text)
            }
            Event::InputAdmitted { queue_length } => {
                if *queue_length > 0 {
                    err(format!("(queued; {queue_length} waiting)"))
                } else {
                    None
                }
            }
            Event::TurnStarted { turn_id, mode } => err(format!("── turn {turn_id} ({mode}) ──")),
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
            } => err(format!("  → {name} {}", brief_arguments(arguments))),
            Event::ToolResult {
                status,
                error_code,
                output,
                ..
            } => match (status, error_code) {
                (ToolStatus::Ok, _) => err(format!("    ✓ {}", first_line(output))),
                (ToolStatus::Error, code) => err(format!(
                    "    ✗ {}: {}",
                    code.map_or("error", |c| c.as_str()),
                    first_line(output)
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
            Event::TurnCompleted {
                turn_id,
                usage,
                iterations,
            } => err(format!(
                "── turn {turn_id} completed · {iterations} model requests · {} prompt / {} completion tokens",
                usage.prompt_tokens, usage.completion_tokens
            )),
            Event::TurnFailed {
                turn_id,
                category,
                message,
                ..
            } => err(format!(
                "── turn {turn_id} failed ({}): {message}",
                category_name(*category)
            )),
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
                err(format!("    ? approval {id}: {outcome:?}"))
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
                err(format!("  ⇢ agent {agent_id}: {status:?}"))
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
            Event::WorkspaceRestored { .. } => err(restored_text(event)),
            Event::ModeChanged { mode } => err(format!("mode: {mode}")),
            Event::OpRejected { message, .. } => err(format!("refused: {message}")),
            Event::SessionStatus {
                activity,
                mode,
                posture,
                queue_length,
                turns,
            } => err(format!(
                "{activity:?} · {mode} · {posture} · {queue_length} queued · {turns} turns"
            )),
            Event::SessionStopped { .. } | Event::SessionIdle { .. } => None,
            Event::GoalUpdated {
                status,
                reason,
                usage,
                budgets,
                ..
            } => err(cadre_runtime::goal::progress_line(
                *status, *reason, usage, budgets,
            )),
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
                ..
            } => match kind {
                QuestionnaireKind::PlanApproval => err(format!(
                    "plan submitted for approval: {id} · {plan_path} · sha256 {}{}",
                    &sha256[..sha256.len().min(12)],
                    if *truncated {
                        " · truncated at 512 KiB"
                    } else {
                        ""
                    }
                )),
                QuestionnaireKind::PlanEntry => {
                    err(format!("the model asks to enter Plan mode: {id}"))
                }
            },
            Event::QuestionnaireAnswered { id, answer, mode } => {
                err(format!("{id} answered: {answer:?} · now in {mode} mode"))
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
                "workflow {workflow} · run {run_id} · {} steps",
                steps.len()
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

fn category_name(category: cadre_runtime::protocol::FailureCategory) -> &'static str {
    use cadre_runtime::protocol::FailureCategory;
    match category {
        FailureCategory::Infrastructure => "infrastructure",
        FailureCategory::Agent => "agent",
        FailureCategory::Cancelled => "cancelled",
        FailureCategory::PausedByDenials => "paused_by_denials",
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = text.lines().filter(|l| !l.trim().is_empty()).count() > 1;
    let mut shown: String = line.chars().take(160).collect();
    if more || line.chars().count() > 160 {
        shown.push_str(" …");
    }
    shown
}

/// Arguments on one line, long strings shortened.
pub(crate) fn brief_arguments(arguments: &Value) -> String {
    fn shorten(value: &Value) -> Value {
        match value {
            Value::String(s) if s.chars().count() > 60 => {
                Value::String(format!("{}…", s.chars().take(60).collect::<String>()))
            }
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), shorten(v))).collect())
            }
            other => other.clone(),
        }
    }
    shorten(arguments).to_string()
}

/// A `workspace.restored` event as text: what changed, path by path, and
/// how to undo it. Empty for any other event.
pub fn restored_text(event: &Event) -> String {
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
        text.push_str(&format!("\n  undo with: cadre restore apply {undo}"));
    }
    text
}
