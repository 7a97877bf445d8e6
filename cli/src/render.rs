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
    /// Whether assistant text was streamed since the last full message, so
    /// the full message is not printed twice.
    streamed: bool,
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
            streamed: false,
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
        match event {
            Event::SessionStarted {
                session_id,
                mode,
                workspace,
                model,
                ..
            } => eprintln!(
                "cadre · session {session_id} · {mode} mode · {model}\n  workspace {workspace}"
            ),
            Event::InputQueued { queue_length } => eprintln!("(queued; {queue_length} waiting)"),
            Event::TurnStarted { turn_id, mode } => eprintln!("── turn {turn_id} ({mode}) ──"),
            Event::AssistantDelta { text, .. } => {
                self.streamed = true;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            Event::AssistantMessage { text, .. } => {
                if self.streamed {
                    println!();
                } else {
                    println!("{text}");
                }
                self.streamed = false;
            }
            Event::AssistantReasoning { .. } => {}
            Event::ToolCall {
                name, arguments, ..
            } => eprintln!("  → {name} {}", brief_arguments(arguments)),
            Event::ToolResult {
                status,
                error_code,
                output,
                ..
            } => match (status, error_code) {
                (ToolStatus::Ok, _) => eprintln!("    ✓ {}", first_line(output)),
                (ToolStatus::Error, code) => eprintln!(
                    "    ✗ {}: {}",
                    code.map_or("error", |c| c.as_str()),
                    first_line(output)
                ),
            },
            Event::ModelRetry {
                attempt,
                delay_ms,
                reason,
                ..
            } => {
                eprintln!("  model request {attempt} failed ({reason}); retrying in {delay_ms} ms")
            }
            Event::TurnCompleted {
                turn_id,
                usage,
                iterations,
            } => eprintln!(
                "── turn {turn_id} completed · {iterations} model requests · {} prompt / {} completion tokens",
                usage.prompt_tokens, usage.completion_tokens
            ),
            Event::TurnFailed {
                turn_id,
                category,
                message,
                ..
            } => eprintln!(
                "── turn {turn_id} failed ({}): {message}",
                category_name(*category)
            ),
            Event::PermissionDecision { decision, line, .. } => {
                // Read-only calls the floor proved safe are in the event
                // stream and the audit log; the terminal shows the rest.
                let routine = decision.layer == Layer::Floor && decision.verdict == Verdict::Allow;
                if !routine {
                    eprintln!("    · {line}");
                }
            }
            Event::ApprovalRequested {
                id, tool, reason, ..
            } => eprintln!("    ? approval {id} for '{tool}': {reason}"),
            Event::ApprovalResolved { id, outcome } => {
                eprintln!("    ? approval {id}: {outcome:?}")
            }
            Event::PostureChanged { posture } => eprintln!("posture: {posture}"),
            Event::AutonomyPaused { reason, fallback } => match fallback {
                Some(posture) => eprintln!("autonomy paused ({reason}); falling back to {posture}"),
                None => eprintln!("autonomy paused ({reason})"),
            },
            Event::AgentSpawned {
                agent_id,
                role,
                model,
                posture,
                depth,
            } => eprintln!("  ⇢ agent {agent_id} ({role}, {model}, {posture}, depth {depth})"),
            Event::AgentStatusChanged { agent_id, status } => {
                eprintln!("  ⇢ agent {agent_id}: {status:?}")
            }
            Event::AgentCompleted {
                agent_id,
                status,
                verified,
                ..
            } => eprintln!(
                "  ⇢ agent {agent_id} {status}{}",
                if *verified { "" } else { " (unverified)" }
            ),
            Event::ModeChanged { mode } => eprintln!("mode: {mode}"),
            Event::OpRejected { message, .. } => eprintln!("refused: {message}"),
            Event::SessionStatus {
                activity,
                mode,
                posture,
                queue_length,
                turns,
            } => eprintln!(
                "{activity:?} · {mode} · {posture} · {queue_length} queued · {turns} turns"
            ),
            Event::SessionStopped { .. } | Event::SessionIdle { .. } => {}
            Event::PlanEntered { plan_path, backup } => match backup {
                Some(backup) => eprintln!(
                    "plan mode: the plan goes to {plan_path} (the earlier one is in {backup})"
                ),
                None => eprintln!("plan mode: the plan goes to {plan_path}"),
            },
            Event::QuestionnaireOpened {
                id,
                kind,
                plan_path,
                sha256,
                truncated,
                ..
            } => match kind {
                QuestionnaireKind::PlanApproval => eprintln!(
                    "plan submitted for approval: {id} · {plan_path} · sha256 {}{}",
                    &sha256[..sha256.len().min(12)],
                    if *truncated {
                        " · truncated at 512 KiB"
                    } else {
                        ""
                    }
                ),
                QuestionnaireKind::PlanEntry => {
                    eprintln!("the model asks to enter Plan mode: {id}")
                }
            },
            Event::QuestionnaireAnswered { id, answer, mode } => {
                eprintln!("{id} answered: {answer:?} · now in {mode} mode")
            }
            Event::PlanStatus {
                mode,
                plan_path,
                exists,
                pending,
            } => eprintln!(
                "{mode} mode · plan {plan_path}{} · {}",
                if *exists { "" } else { " (not written yet)" },
                pending.as_deref().map_or_else(
                    || "no questionnaire waiting".to_string(),
                    |p| format!("{p} waits for an answer")
                )
            ),
            Event::PlanView { plan_path, text } => match text {
                Some(text) => println!("{text}"),
                None => eprintln!("there is no plan at {plan_path} yet"),
            },
            Event::SessionCompleted { status, exit_code } => {
                if *exit_code != 0 {
                    eprintln!("cadre: {status} (exit {exit_code})");
                }
            }
        }
    }
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
fn brief_arguments(arguments: &Value) -> String {
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
