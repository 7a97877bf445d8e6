//! `cadre exec`: one prompt, one session, no terminal UI.

use cadre_runtime::goal::GoalStatus;
use cadre_runtime::protocol::{
    Activity, Envelope, Event, FailureCategory, ModelSource, Op, SessionOutcome,
};
use cadre_runtime::store::QuestionnaireAnswer;

use crate::args::OutputFormat;
use crate::config::RunConfig;
use crate::exit::{self, CliError};
use crate::launch::{Launched, launch, stamp};
use crate::render::{Renderer, TextView};

/// Said on stderr when nothing named a model: the demo's answers must never
/// pass for a model's (LLM4).
pub const DEMO_START: &str = "cadre: no model is configured (no --base-url, --model, --script, \
     config or OPENAI_* variable): cadre's built-in demo script answers, not a model";

/// Said on stderr at the end of a demo run.
pub const DEMO_END: &str =
    "cadre: this was cadre's built-in demo script, not a model; see README: Using a real model";

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Success,
    AgentFailed,
    Infrastructure {
        retryable: bool,
    },
    Cancelled,
    PausedByDenials,
    /// exec's own request was refused (a goal the session cannot take).
    Refused,
    /// The session's goal settled in this status (`exec --goal`, or a
    /// resumed session with a goal).
    Goal(GoalStatus),
}

impl Ending {
    fn status_and_code(self) -> (SessionOutcome, u8) {
        match self {
            Ending::Success => (SessionOutcome::Success, exit::SUCCESS),
            Ending::AgentFailed => (SessionOutcome::Failed, exit::AGENT_FAILED),
            Ending::Infrastructure { retryable: true } => (SessionOutcome::Error, exit::TEMPFAIL),
            Ending::Infrastructure { retryable: false } => {
                (SessionOutcome::Error, exit::AGENT_FAILED)
            }
            Ending::Cancelled => (SessionOutcome::Cancelled, exit::INTERRUPTED),
            Ending::PausedByDenials => (SessionOutcome::PausedByDenials, exit::AGENT_FAILED),
            Ending::Refused => (SessionOutcome::Failed, exit::USAGE),
            Ending::Goal(status) => {
                let code = crate::goal_cmd::exit_code(status);
                let outcome = match status {
                    GoalStatus::Complete => SessionOutcome::Success,
                    GoalStatus::Blocked => SessionOutcome::Failed,
                    GoalStatus::UsageLimited => SessionOutcome::Error,
                    GoalStatus::Active | GoalStatus::Paused | GoalStatus::BudgetLimited => {
                        SessionOutcome::Unfinished
                    }
                };
                (outcome, code)
            }
        }
    }
}

/// Runs the prompt (or carries on a stored session) and returns the exit code.
pub async fn run(config: RunConfig) -> Result<u8, CliError> {
    // exec has no one to ask: Ask becomes a denial that says why (P7).
    let Launched {
        handle,
        mut events,
        host,
        mode_source,
        model_source,
        ..
    } = launch(&config, false).await?;
    let demo = model_source == ModelSource::Demo;
    if demo {
        crate::errln!("{DEMO_START}");
    }
    let mut driver = Driver::new(&config);
    if let Some(goal) = &config.goal {
        handle
            .submit(Op::Goal {
                action: Box::new(goal.clone()),
            })
            .map_err(|e| CliError::internal(format!("the session stopped early: {e}")))?;
    }
    match &config.prompt {
        Some(prompt) => {
            handle
                .submit(Op::user(prompt.clone()))
                .map_err(|e| CliError::internal(format!("the session stopped early: {e}")))?;
        }
        // exec's goal starts the work.
        None if config.goal.is_some() => {}
        // Resuming with no prompt: whatever was queued runs (the session
        // starts it on its own); a session with nothing to do is idle now.
        None => {
            let _ = handle.submit(Op::Status);
        }
    }

    let view = TextView::default()
        .with_followup(config.followup.clone())
        .with_tool_output_lines(config.tool_output_lines)
        .answer_only();
    let mut renderer = Renderer::new(config.output, view).with_spinner(config.spinner);
    let mut interrupts = 0u32;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(Envelope { mut event, .. }) = event else { break };
                stamp(&mut event, mode_source, model_source);
                renderer.event(&event);
                if matches!(event, Event::SessionStopped { .. }) {
                    break;
                }
                for op in driver.next(&event) {
                    let _ = handle.submit(op);
                }
            }
            _ = tokio::signal::ctrl_c() => {
                interrupts += 1;
                if interrupts > 1 {
                    return Ok(exit::INTERRUPTED);
                }
                renderer.pause();
                crate::errln!("cadre: cancelling the turn (Ctrl-C again to quit at once)");
                let _ = handle.submit(Op::Cancel);
            }
        }
    }
    handle.stopped().await;
    host.close().await;
    if demo {
        renderer.pause();
        crate::errln!("{DEMO_END}");
    }
    let (status, code) = driver.ending().status_and_code();
    renderer.event(&Event::SessionCompleted {
        status,
        exit_code: i32::from(code),
    });
    if let Some(file) = &config.output_last_message {
        let answer = renderer.answer().map(|a| format!("{}\n", a.trim_end()));
        std::fs::write(file, answer.unwrap_or_default()).map_err(|e| {
            CliError::internal(format!("--output-last-message {}: {e}", file.display()))
        })?;
    }
    Ok(code)
}

/// What exec does in answer to events: stop at the first failed turn, answer
/// or report a waiting plan, stop when the session has nothing left to do.
struct Driver {
    approve_plan: bool,
    plan_only: bool,
    /// Plain lines go to stdout only in text output; the JSON outputs carry
    /// the same facts as events.
    text: bool,
    ending: Option<Ending>,
    /// A plan questionnaire waiting for an answer: (id, plan path).
    pending: Option<(String, String)>,
    /// exec's own prompt was sent but not yet admitted: the session may go
    /// idle (finishing resumed work) before it arrives, and that idle does
    /// not mean exec is done.
    awaiting_prompt: bool,
    session_id: String,
    /// The session's posture: how its approved plan can run unattended.
    posture: cadre_runtime::permission::Posture,
    stopping: bool,
    /// The flags the commands it prints need.
    followup: crate::followup::Followup,
    /// exec's goal was sent but not yet taken: an idle before it is not the end.
    awaiting_goal: bool,
    /// The session's goal as last reported; the run ends by its status, and
    /// a failed turn is the goal's to settle, not the end of the run.
    goal: Option<GoalStatus>,
}

impl Driver {
    fn new(config: &RunConfig) -> Self {
        Self {
            approve_plan: config.approve_plan,
            plan_only: config.plan_only,
            text: config.output == OutputFormat::Text,
            ending: None,
            pending: None,
            awaiting_prompt: config.prompt.is_some(),
            session_id: String::new(),
            posture: config.posture,
            stopping: false,
            followup: config.followup.clone(),
            awaiting_goal: config.goal.is_some(),
            goal: None,
        }
    }

    fn ending(&self) -> Ending {
        // A resumed session with nothing to do ended well.
        self.ending.unwrap_or(Ending::Success)
    }

    fn stop(&mut self) -> Vec<Op> {
        if std::mem::replace(&mut self.stopping, true) {
            return Vec::new();
        }
        vec![Op::Shutdown]
    }

    fn next(&mut self, event: &Event) -> Vec<Op> {
        match event {
            Event::SessionStarted {
                session_id,
                posture,
                ..
            } => {
                self.session_id.clone_from(session_id);
                self.posture = *posture;
            }
            Event::PostureChanged { posture } => self.posture = *posture,
            Event::TurnCompleted { .. } => self.ending = Some(Ending::Success),
            Event::GoalUpdated { status, .. } => {
                self.awaiting_goal = false;
                self.goal = Some(*status);
            }
            Event::GoalCleared {} => self.goal = None,
            // exec's goal was refused: nothing will run.
            Event::OpRejected { op, .. } if op == "goal" && self.awaiting_goal => {
                self.awaiting_goal = false;
                self.ending = Some(Ending::Refused);
                return self.stop();
            }
            // With a goal, a failed turn is settled by the goal (paused,
            // usage-limited), and the run ends when the session is idle.
            Event::TurnFailed { category, .. }
                if self.goal.is_some() && *category != FailureCategory::Cancelled => {}
            Event::TurnFailed {
                category,
                retryable,
                ..
            } => {
                self.ending = Some(match category {
                    FailureCategory::Infrastructure => Ending::Infrastructure {
                        retryable: *retryable,
                    },
                    FailureCategory::Agent => Ending::AgentFailed,
                    FailureCategory::Cancelled => Ending::Cancelled,
                    FailureCategory::PausedByDenials => Ending::PausedByDenials,
                });
                return self.stop();
            }
            Event::QuestionnaireOpened { id, plan_path, .. } => {
                self.pending = Some((id.clone(), plan_path.clone()));
            }
            Event::QuestionnaireAnswered { id, .. }
                if self.pending.as_ref().is_some_and(|(p, _)| p == id) =>
            {
                self.pending = None;
            }
            Event::InputAdmitted { .. } => self.awaiting_prompt = false,
            // exec's own prompt was refused: nothing will run.
            Event::OpRejected { op, retryable, .. }
                if op == "user_input" && self.awaiting_prompt =>
            {
                self.awaiting_prompt = false;
                self.ending = Some(if *retryable {
                    Ending::Infrastructure { retryable: true }
                } else {
                    Ending::AgentFailed
                });
                return self.stop();
            }
            Event::SessionIdle { .. }
            | Event::SessionStatus {
                activity: Activity::Idle,
                ..
            } if !self.awaiting_prompt && !self.awaiting_goal => match self.pending.clone() {
                Some((id, _)) if self.approve_plan => {
                    return vec![Op::Answer {
                        id,
                        answer: QuestionnaireAnswer::Approve,
                    }];
                }
                Some((id, plan_path)) => {
                    if self.plan_only && self.text {
                        crate::outln!("plan: {plan_path}\napproval: {id}");
                    }
                    let session = &self.session_id;
                    crate::errln!(
                        "cadre: the plan at {plan_path} waits for approval ({id})\n  \
                         answer with: {}\n  then run it with: {}",
                        crate::sessions_cmd::answer_commands(&self.followup, session),
                        self.followup.implement(session, self.posture),
                    );
                    return self.stop();
                }
                None => {
                    if let Some(status) = self.goal
                        && self.ending != Some(Ending::Cancelled)
                    {
                        self.ending = Some(Ending::Goal(status));
                    }
                    return self.stop();
                }
            },
            _ => {}
        }
        Vec::new()
    }
}
