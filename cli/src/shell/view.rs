//! The shell's text: events as `exec` shows them ([`TextView`]), except for
//! what the shell asks inline (approval prompts, plan questionnaires) and
//! what answers its commands; plus the [`Notice`]s. No I/O: the terminal
//! prints the pieces. A full-screen UI would replace this module and the
//! terminal, and keep the controller.

use std::fmt::Write as _;

use cadre_runtime::protocol::Event;
use cadre_runtime::store::QuestionnaireKind;

use super::commands::{COMMANDS, Invalid};
use super::controller::Notice;
use crate::render::{Piece, Stream, TextView};

/// The approval prompt's choices.
const APPROVAL_CHOICES: &str =
    "[y] allow once  [s] allow for session  [n] deny  (n REASON: deny, and tell the model why)";
/// A plan questionnaire's choices.
const PLAN_CHOICES: &str = "[a] approve  [d] defer  [r] revise (then type feedback)  [w] withdraw";
/// A plan entry questionnaire's choices.
const ENTRY_CHOICES: &str = "[a] enter Plan mode  [w] stay";

/// Renders events and notices as text.
#[derive(Debug, Default)]
pub struct View {
    text: TextView,
    /// The approval prompts shown and not yet resolved, oldest first: the
    /// next answer goes to the first, which a second prompt says.
    pending: Vec<String>,
}

impl View {
    /// A view that renders events through `text` (its printed commands'
    /// flags, how much tool output it shows).
    pub fn new(text: TextView) -> Self {
        Self {
            text,
            pending: Vec::new(),
        }
    }

    /// The text for an event, if it shows.
    pub fn event(&mut self, event: &Event) -> Option<Piece> {
        let text = match event {
            Event::SessionStarted { .. } => {
                let mut text = self.text.event(event)?.text;
                text.push_str(
                    "  /help lists the commands; Esc or Ctrl-C cancels a turn; /quit leaves\n",
                );
                text
            }
            Event::ApprovalRequested {
                id,
                agent_id,
                tool,
                arguments,
                reason,
                preview,
                ..
            } => {
                let who = if agent_id == "main" {
                    String::new()
                } else {
                    format!(" (agent {agent_id})")
                };
                // A file change shows as its diff; anything else as its
                // arguments.
                let what = match preview {
                    Some(diff) => {
                        let indented: String = diff.lines().map(|l| format!("\n    {l}")).collect();
                        let path = arguments["path"].as_str().unwrap_or_default();
                        format!(" {path}{indented}")
                    }
                    None => format!(" {}", crate::render::brief_arguments(arguments)),
                };
                // Two prompts at once (two steps, two sub-agents): say which
                // one the next answer goes to.
                let order = match self.pending.first() {
                    Some(first) => format!("  (the next answer goes to {first}; this one waits)\n"),
                    None => String::new(),
                };
                self.pending.push(id.clone());
                format!("? {tool}{who}{what}\n  {reason}\n  {APPROVAL_CHOICES}   ({id})\n{order}")
            }
            Event::ApprovalResolved { id, outcome } => {
                self.pending.retain(|p| p != id);
                let next = match self.pending.first() {
                    Some(next) => format!("  now answering {next}\n"),
                    None => String::new(),
                };
                format!("  {id}: {}\n{next}", crate::render::outcome_text(*outcome))
            }
            Event::QuestionnaireOpened { kind, .. } => {
                let mut text = self.text.event(event)?.text;
                let choices = match kind {
                    QuestionnaireKind::PlanApproval => PLAN_CHOICES,
                    QuestionnaireKind::PlanEntry => ENTRY_CHOICES,
                };
                let _ = writeln!(text, "  {choices}");
                text
            }
            // `/goal` shows the objective with the status, every time.
            Event::GoalUpdated { objective, .. } => {
                let text = self.text.event(event)?.text;
                if text.starts_with("goal: ") {
                    text
                } else {
                    let objective = objective.lines().next().unwrap_or_default();
                    format!("goal: {objective}\n{text}")
                }
            }
            Event::PlanStatus { pending, .. } => {
                let mut text = self.text.event(event)?.text;
                if pending.is_some() {
                    let _ = writeln!(text, "  {PLAN_CHOICES}");
                }
                text
            }
            Event::SessionStatus {
                activity,
                mode,
                posture,
                queue_length,
                turns,
            } => format!(
                "queue: {queue_length} waiting · {} · {mode} mode · {posture} · {}\n",
                crate::render::activity_text(*activity),
                crate::render::count(*turns, "turn")
            ),
            Event::SessionStopped { turns } => format!(
                "session stopped after {}\n",
                crate::render::count(*turns, "turn")
            ),
            // The plan as written, without the blank line `exec` leaves.
            Event::PlanView {
                text: Some(text), ..
            } => {
                return Some(Piece {
                    stream: Stream::Out,
                    text: format!("{}\n", text.trim_end()),
                });
            }
            _ => return self.text.event(event),
        };
        Some(line(text))
    }

    /// The text for a notice.
    pub fn notice(&self, notice: &Notice) -> Piece {
        line(match notice {
            Notice::Help => help(),
            Notice::Config(facts) => format!(
                "session    {}\nmode       {}\nposture    {}\nmodel      {}\nworkspace  {}\ndata dir   {}\n",
                facts.session_id,
                facts.mode,
                facts.posture,
                facts.model,
                facts.workspace,
                facts.data_dir.display()
            ),
            Notice::Mode(mode) => {
                format!("{mode} mode (/mode plan|work|operate switches)\n")
            }
            Notice::Model(model) => format!("model {model} (/model NAME switches)\n"),
            Notice::Cancelling => "cancelling the turn…\n".into(),
            Notice::StillCancelling => {
                "still cancelling; once it has ended, Ctrl-C twice leaves\n".into()
            }
            Notice::InterruptAgainToQuit => "(Ctrl-C again, Ctrl-D or /quit leaves)\n".into(),
            Notice::RevisionDropped => "the revision's feedback is dropped\n".into(),
            Notice::Leaving => "stopping the session…\n".into(),
            Notice::Invalid(Invalid::Unknown(name)) => {
                format!("unknown command {name}; /help lists the commands\n")
            }
            Notice::Invalid(Invalid::Usage(usage)) => format!("usage: {usage}\n"),
            Notice::AnswerApproval { id } => {
                format!("{id} waits for an answer first: {APPROVAL_CHOICES}\n")
            }
            Notice::AnswerPlan { id } => {
                format!("{id} waits for an answer first: {PLAN_CHOICES}\n")
            }
            Notice::TypeFeedback => "type what to change, then Enter\n".into(),
            Notice::AnswerHeld => "(the answer goes as soon as the turn has ended)\n".into(),
            Notice::SessionGone => "the session stopped; press Enter to leave\n".into(),
            Notice::McpServers => "looking up the MCP servers…\n".into(),
            Notice::Snapshots => "listing this session's snapshots…\n".into(),
            Notice::Trust(_) => "looking up this workspace's trust…\n".into(),
            Notice::Found(text) => format!("{}\n", text.trim_end()),
            Notice::ModeSaved { mode, error: None } => {
                format!("{mode} — saved as the startup mode for new sessions\n")
            }
            Notice::ModeSaved {
                mode,
                error: Some(why),
            } => format!(
                "{mode} is this session's mode, but it was not saved as the startup mode: {why}\n"
            ),
        })
    }
}

fn line(text: String) -> Piece {
    Piece {
        stream: Stream::Err,
        text,
    }
}

fn help() -> String {
    let mut text = String::from("commands:\n");
    for (usage, about) in COMMANDS {
        let _ = writeln!(text, "  {usage:<27} {about}");
    }
    let _ = writeln!(
        text,
        "  {:<27} run a workflow over the session; /workflow cancel [STEP[i]] stops it",
        "/workflow FILE"
    );
    let _ = writeln!(
        text,
        "  //text                      send a message that starts with /\n\
         approval prompts: {APPROVAL_CHOICES}\n\
         plan questionnaires: {PLAN_CHOICES}\n\
         Ctrl-C cancels the running turn; at an idle prompt, twice leaves. Ctrl-D leaves."
    );
    text
}

#[cfg(test)]
mod tests {
    use cadre_runtime::protocol::Event;
    use serde_json::json;

    use super::View;

    #[test]
    fn an_approval_shows_a_file_changes_diff_and_other_calls_their_arguments() {
        let asked = |tool: &str, arguments, preview: Option<&str>| Event::ApprovalRequested {
            id: "approval:1".into(),
            agent_id: "main".into(),
            call_id: "c".into(),
            tool: tool.into(),
            arguments,
            reason: "the call can change things".into(),
            preview: preview.map(str::to_string),
        };
        let mut view = View::default();
        let diff = "notes.txt: +1 -1 lines\n-two\n+2\n";
        let write = asked(
            "write_file",
            json!({"path": "notes.txt", "content": "…"}),
            Some(diff),
        );
        let shown = view.event(&write).map(|p| p.text).unwrap_or_default();
        assert!(
            shown.starts_with(
                "? write_file notes.txt\n    notes.txt: +1 -1 lines\n    -two\n    +2\n  the call"
            ),
            "{shown}"
        );
        let bash = asked("bash", json!({"command": "touch x"}), None);
        let shown = view.event(&bash).map(|p| p.text).unwrap_or_default();
        assert!(
            shown.starts_with("? bash {\"command\":\"touch x\"}\n"),
            "{shown}"
        );
    }

    #[test]
    fn a_second_prompt_says_which_one_the_next_answer_goes_to() {
        use cadre_runtime::protocol::ApprovalOutcome;
        let asked = |id: &str, agent: &str| Event::ApprovalRequested {
            id: id.into(),
            agent_id: agent.into(),
            call_id: "c".into(),
            tool: "bash".into(),
            arguments: json!({"command": "touch x"}),
            reason: "r".into(),
            preview: None,
        };
        let mut view = View::default();
        let mut shown = |e: &Event| view.event(e).map(|p| p.text).unwrap_or_default();
        let first = shown(&asked("step:a[0]:approval:1", "step:a[0]"));
        assert!(!first.contains("next answer"), "{first}");
        let second = shown(&asked("step:b[0]:approval:1", "step:b[0]"));
        assert!(
            second.contains("(agent step:b[0])")
                && second
                    .ends_with("(the next answer goes to step:a[0]:approval:1; this one waits)\n"),
            "{second}"
        );
        let resolved = shown(&Event::ApprovalResolved {
            id: "step:a[0]:approval:1".into(),
            outcome: ApprovalOutcome::AllowOnce,
        });
        assert!(
            resolved.ends_with("now answering step:b[0]:approval:1\n"),
            "{resolved}"
        );
    }
}
