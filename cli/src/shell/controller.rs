//! The shell's session logic, with no I/O and no text: what a typed line or
//! a Ctrl-C does given what the session is doing (a turn running, approval
//! prompts and a plan questionnaire waiting), learnt from its events. The
//! terminal feeds it [`Input`]s, submits the [`Op`]s it returns, and hands
//! its [`Notice`]s to the view, so a full-screen UI can reuse it whole.

use std::collections::VecDeque;
use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Activity, Event, Op};
use cadre_runtime::store::QuestionnaireAnswer;

use super::commands::{self, Command, Invalid, Line, PlanReply};

/// What the person did at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A line (Enter).
    Line(String),
    /// Ctrl-C.
    Interrupt,
    /// Esc: the cancel stack (cancel the running turn, else drop a
    /// half-answered revision; the reader clears the line when nothing was
    /// cancelled). Never leaves.
    Escape,
    /// Ctrl-D on an empty line, or the end of input.
    Eof,
}

/// What the shell does about an input.
#[derive(Debug, Default, PartialEq)]
pub struct Reaction {
    /// Submissions to the session, in order.
    pub ops: Vec<Op>,
    /// What to tell the person.
    pub notices: Vec<Notice>,
    /// Stop reading input: the session is being shut down.
    pub quit: bool,
}

/// Something the shell tells the person that is not an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The list of commands.
    Help,
    /// The session's effective settings (`/config`).
    Config(Facts),
    /// The mode now (`/mode` alone).
    Mode(Mode),
    /// The model now (`/model` alone).
    Model(String),
    /// Ctrl-C sent a cancel.
    Cancelling,
    /// Ctrl-C again while the cancel is on its way.
    StillCancelling,
    /// Ctrl-C at an idle prompt: once more leaves.
    InterruptAgainToQuit,
    /// Esc dropped a plan revision whose feedback was awaited.
    RevisionDropped,
    /// The session is shutting down.
    Leaving,
    /// A slash command that cannot run.
    Invalid(Invalid),
    /// A line that does not answer the approval prompt that waits.
    AnswerApproval {
        /// The prompt's id.
        id: String,
    },
    /// A line that does not answer the plan questionnaire that waits.
    AnswerPlan {
        /// The questionnaire's id.
        id: String,
    },
    /// `r` was typed: the next line is the feedback.
    TypeFeedback,
    /// The answer goes once the session is idle: it refuses answers while
    /// the turn that asked is still ending.
    AnswerHeld,
    /// The session stopped on its own; Enter leaves.
    SessionGone,
    /// `/mcp`: the host looks the servers up and answers with `Found`.
    McpServers,
    /// `/restore`: the host lists the session's snapshots and answers with
    /// `Found`.
    Snapshots,
    /// `/trust`: the host shows or changes the workspace's trust and
    /// answers with `Found`.
    Trust(crate::trust_cmd::TrustAction),
    /// What the host found for `McpServers`, `Snapshots` or `Trust`, as text.
    Found(String),
    /// A mode chosen with `/mode` was saved as the startup mode of new
    /// sessions (M6), or could not be (`error`).
    ModeSaved {
        /// The mode.
        mode: Mode,
        /// Why it was not saved.
        error: Option<String>,
    },
}

/// What `/config` shows: the session's effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The session id (known from `session.started`).
    pub session_id: String,
    /// The mode now.
    pub mode: Mode,
    /// The posture now.
    pub posture: Posture,
    /// The model the session talks to.
    pub model: String,
    /// The workspace root.
    pub workspace: String,
    /// Where sessions are stored.
    pub data_dir: PathBuf,
}

/// The shell's state between inputs.
#[derive(Debug)]
pub struct Controller {
    facts: Facts,
    /// A turn runs: between `turn.started` and its end.
    running: bool,
    /// Nothing runs or waits (`session.idle`). A turn's end reaches the
    /// shell before the session has settled it, so this trails `running`.
    idle: bool,
    /// Ops the session would refuse until it has settled the turn that
    /// ended, sent once it has (`session.idle`) or a queued turn started.
    held: Vec<Op>,
    /// A cancel was sent for the running turn.
    cancelling: bool,
    /// Ctrl-Cs in a row at an idle prompt; the second leaves.
    idle_interrupts: u32,
    /// Approval prompts not answered yet, oldest first; the next answer goes
    /// to the front one.
    approvals: VecDeque<String>,
    /// The plan questionnaire waiting for an answer.
    questionnaire: Option<String>,
    /// `r` was typed for this questionnaire: the next line is the feedback.
    revising: Option<String>,
    /// Shutdown was sent.
    quitting: bool,
}

impl Controller {
    /// A shell for a session with these settings (refined by its events).
    pub fn new(facts: Facts) -> Self {
        Self {
            facts,
            running: false,
            idle: true,
            held: Vec::new(),
            cancelling: false,
            idle_interrupts: 0,
            approvals: VecDeque::new(),
            questionnaire: None,
            revising: None,
            quitting: false,
        }
    }

    /// Whether Shutdown was sent.
    pub fn quitting(&self) -> bool {
        self.quitting
    }

    /// Learns from an event; returns the held answers it releases.
    pub fn event(&mut self, event: &Event) -> Vec<Op> {
        match event {
            Event::SessionStarted {
                session_id,
                mode,
                posture,
                workspace,
                model,
                ..
            } => {
                self.facts.session_id.clone_from(session_id);
                self.facts.mode = *mode;
                self.facts.posture = *posture;
                self.facts.workspace.clone_from(workspace);
                self.facts.model.clone_from(model);
            }
            Event::TurnStarted { mode, .. } => {
                self.running = true;
                self.idle = false;
                self.cancelling = false;
                self.facts.mode = *mode;
                // A queued turn started instead of the session settling: the
                // session answers held ops now (refusing what a turn forbids).
                return std::mem::take(&mut self.held);
            }
            Event::SessionIdle { .. }
            | Event::SessionStatus {
                activity: Activity::Idle,
                ..
            } => {
                self.idle = true;
                if let Event::SessionStatus { mode, posture, .. } = event {
                    self.facts.mode = *mode;
                    self.facts.posture = *posture;
                }
                return std::mem::take(&mut self.held);
            }
            Event::TurnCompleted { .. } | Event::TurnFailed { .. } => {
                self.running = false;
                self.cancelling = false;
            }
            Event::ApprovalRequested { id, .. } => self.approvals.push_back(id.clone()),
            Event::ApprovalResolved { id, .. } => self.approvals.retain(|a| a != id),
            Event::QuestionnaireOpened { id, .. } => self.questionnaire = Some(id.clone()),
            Event::QuestionnaireAnswered { id, mode, .. } => {
                if self.questionnaire.as_ref() == Some(id) {
                    self.questionnaire = None;
                }
                if self.revising.as_ref() == Some(id) {
                    self.revising = None;
                }
                self.facts.mode = *mode;
            }
            Event::PlanStatus { mode, pending, .. } => {
                self.facts.mode = *mode;
                if pending.is_some() {
                    self.questionnaire.clone_from(pending);
                }
            }
            Event::ModeChanged { mode } => self.facts.mode = *mode,
            Event::PostureChanged { posture } => self.facts.posture = *posture,
            Event::ModelChanged { model } => self.facts.model.clone_from(model),
            Event::SessionStatus { mode, posture, .. } => {
                self.idle = false;
                self.facts.mode = *mode;
                self.facts.posture = *posture;
            }
            _ => {}
        }
        Vec::new()
    }

    /// Reacts to an input.
    pub fn input(&mut self, input: Input) -> Reaction {
        match input {
            Input::Interrupt => self.interrupt(),
            Input::Escape => self.escape(),
            Input::Eof => self.quit(),
            Input::Line(line) => {
                self.idle_interrupts = 0;
                self.line(&line)
            }
        }
    }

    fn interrupt(&mut self) -> Reaction {
        // Whatever was half answered is dropped with the line.
        self.revising = None;
        if self.running {
            self.idle_interrupts = 0;
            if std::mem::replace(&mut self.cancelling, true) {
                return notice(Notice::StillCancelling);
            }
            return Reaction {
                ops: vec![Op::Cancel],
                notices: vec![Notice::Cancelling],
                quit: false,
            };
        }
        self.idle_interrupts += 1;
        if self.idle_interrupts >= 2 {
            return self.quit();
        }
        notice(Notice::InterruptAgainToQuit)
    }

    /// Esc: what is in progress is cancelled, innermost first; nothing in
    /// progress is nothing to do (the reader then clears the input).
    fn escape(&mut self) -> Reaction {
        if self.running {
            if std::mem::replace(&mut self.cancelling, true) {
                return notice(Notice::StillCancelling);
            }
            return Reaction {
                ops: vec![Op::Cancel],
                notices: vec![Notice::Cancelling],
                quit: false,
            };
        }
        if self.revising.take().is_some() {
            return notice(Notice::RevisionDropped);
        }
        Reaction::default()
    }

    fn quit(&mut self) -> Reaction {
        self.quitting = true;
        Reaction {
            ops: vec![Op::Shutdown],
            notices: vec![Notice::Leaving],
            quit: true,
        }
    }

    fn line(&mut self, line: &str) -> Reaction {
        let text = match commands::parse(line) {
            Line::Blank => return Reaction::default(),
            Line::Command(command) => return self.command(command),
            Line::Invalid(invalid) => return notice(Notice::Invalid(invalid)),
            Line::Message(text) => text,
        };
        if let Some(id) = self.approvals.front().cloned() {
            return match commands::approval(&text) {
                Some((decision, reason)) => {
                    self.approvals.pop_front();
                    op(Op::Approve {
                        id,
                        decision,
                        reason,
                    })
                }
                None => notice(Notice::AnswerApproval { id }),
            };
        }
        if let Some(id) = self.revising.take() {
            return self.answer(id, QuestionnaireAnswer::Revise { feedback: text });
        }
        if let Some(id) = self.questionnaire.clone() {
            return match commands::plan_reply(&text) {
                Some(PlanReply::Answer(a)) => self.answer(id, a),
                Some(PlanReply::ReviseAsk) => {
                    self.revising = Some(id);
                    notice(Notice::TypeFeedback)
                }
                None => notice(Notice::AnswerPlan { id }),
            };
        }
        op(Op::user(text))
    }

    fn command(&mut self, command: Command) -> Reaction {
        match command {
            Command::Mode(Some(mode)) => self.when_settled(Op::SetMode { mode }),
            Command::Mode(None) => notice(Notice::Mode(self.facts.mode)),
            Command::Model(Some(model)) => self.when_settled(Op::SetModel { model }),
            Command::Model(None) => notice(Notice::Model(self.facts.model.clone())),
            Command::Plan(action) => self.when_settled(Op::Plan { action }),
            Command::Snapshots => notice(Notice::Snapshots),
            Command::Restore { snapshot, dry_run } => {
                self.when_settled(Op::Restore { snapshot, dry_run })
            }
            // The goal may change while a turn runs: the settlement sees it.
            Command::Goal(action) => op(Op::Goal {
                action: Box::new(action),
            }),
            // While a turn runs it compacts before its next request.
            Command::Compact => op(Op::Compact),
            Command::Mcp => notice(Notice::McpServers),
            Command::Trust(action) => notice(Notice::Trust(action)),
            Command::Config => notice(Notice::Config(self.facts.clone())),
            Command::Queue => op(Op::Status),
            Command::Help => notice(Notice::Help),
            Command::Quit => self.quit(),
        }
    }

    /// Sends `op` now, or, when a turn has ended but the session has not
    /// settled it yet (and would refuse `op` as if the turn still ran), as
    /// soon as it has. While a turn runs, the session's refusal is the
    /// answer.
    fn when_settled(&mut self, submit: Op) -> Reaction {
        if self.running || self.idle {
            return op(submit);
        }
        self.held.push(submit);
        Reaction::default()
    }

    fn answer(&mut self, id: String, answer: QuestionnaireAnswer) -> Reaction {
        let submit = Op::Answer { id, answer };
        if self.idle {
            return op(submit);
        }
        self.held.push(submit);
        notice(Notice::AnswerHeld)
    }
}

fn op(op: Op) -> Reaction {
    Reaction {
        ops: vec![op],
        ..Reaction::default()
    }
}

fn notice(notice: Notice) -> Reaction {
    Reaction {
        notices: vec![notice],
        ..Reaction::default()
    }
}

#[cfg(test)]
mod tests;
