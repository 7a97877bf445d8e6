//! What the model is told: the system prompt and the Plan reminders (M7).
//!
//! Reminders travel with each request after the conversation and are never
//! stored in it, so a resumed session never replays a stale one.

use std::path::Path;

use crate::mode::Mode;

/// The system prompt for a session's own turns.
pub fn system_prompt(mode: Mode, workspace: &Path) -> String {
    let mode_line = match mode {
        Mode::Plan => {
            "You are in Plan mode: investigate with read-only tools and write a plan; \
             change nothing else."
        }
        Mode::Work => "You are in Work mode: make the change the user asks for, then verify it.",
        Mode::Operate => {
            "You are in Operate mode: do the work, delegating independent steps where \
             that helps, and report what is completed, blocked and next."
        }
    };
    format!(
        "You are cadre, a coding agent working in the workspace {}.\n{mode_line}\n\
         Use the tools to read and change files and run commands; paths are relative to the \
         workspace root. When a tool returns an error, read it and correct course. \
         Finish with a short answer saying what you did and how you checked it.",
        workspace.display()
    )
}

/// Whether a Plan request at `iteration` (1-based) carries the full reminder:
/// iterations 1, 5, 9, …; the others carry the short one.
pub fn is_full_reminder(iteration: u32) -> bool {
    iteration % 4 == 1
}

/// The first line of every Plan reminder, full or short.
pub const PLAN_REMINDER_TAG: &str = "<plan-mode-reminder>";

/// The Plan reminder for a request at `iteration`. An agent with no plan
/// file (a read-only sub-agent) is told to report instead.
pub fn plan_reminder(iteration: u32, plan_file: Option<&Path>) -> String {
    let Some(plan_file) = plan_file else {
        return format!(
            "{PLAN_REMINDER_TAG}\nPlan mode is active and you are a read-only sub-agent: \
             investigate with read-only tools and report what you found in your final answer. \
             You may not create, modify or delete any file.\n</plan-mode-reminder>"
        );
    };
    let path = plan_file.display();
    if is_full_reminder(iteration) {
        format!(
            "{PLAN_REMINDER_TAG}\nPlan mode is active. Investigate freely with read-only tools: \
             read files, list and search the workspace. Do not create, modify, delete, publish \
             or send anything.\n\
             The sole mutation exception is writing or editing the canonical plan file at \
             exactly this path:\n{path}\n\
             No other file may be created or modified.\n\
             The plan must begin with a non-empty `## Summary`, and should cover the goal and \
             scope, the current state and affected files, the approach and end-to-end flow, \
             state and failure recovery, tests and acceptance, and open questions. A plan that \
             exists only in the conversation does not count: write it to the file.\n\
             If a tool is denied, switch to another read-only way to investigate. When two \
             different approaches to the same question have been blocked, stop pursuing it \
             and record the uncertainty in the plan.\n</plan-mode-reminder>"
        )
    } else {
        format!(
            "{PLAN_REMINDER_TAG}\nPlan mode is still active: read-only tools only; the one \
             writable file is {path}.\n</plan-mode-reminder>"
        )
    }
}
