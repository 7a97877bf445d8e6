//! What a line typed at the shell's prompt means: a slash command, a
//! message for the model, or an answer to a waiting prompt. Pure parsing:
//! nothing here knows whether a session runs.

use cadre_runtime::Mode;
use cadre_runtime::goal::{Budgets, GoalAction, GoalCommand, GoalSettings, parse_tokens};
use cadre_runtime::protocol::{ApprovalDecision, PlanAction};
use cadre_runtime::store::QuestionnaireAnswer;

const MODE_USAGE: &str = "/mode [plan|work|operate]";
const PLAN_USAGE: &str = "/plan on|off|status|view";
const MODEL_USAGE: &str = "/model [NAME]";
const RESTORE_USAGE: &str = "/restore [list | SNAPSHOT [--dry-run]]";
const TRUST_USAGE: &str = "/trust [yes|no]";
const GOAL_USAGE: &str = "/goal [OBJECTIVE [budget=50K] | budget=N|clear | edit OBJECTIVE | pause | resume | complete | blocked | clear]";

/// The slash commands and what they do, for `/help`.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        MODE_USAGE,
        "show the mode, or switch (refused while a turn runs)",
    ),
    (
        PLAN_USAGE,
        "enter or leave Plan mode, report the plan, show it",
    ),
    (
        MODEL_USAGE,
        "show the model, or switch for the next turns (refused while a turn runs)",
    ),
    (
        RESTORE_USAGE,
        "list this session's snapshots, or put the workspace back (refused while a turn runs)",
    ),
    (
        GOAL_USAGE,
        "show the goal, set one the session works on until it is verified, or change it",
    ),
    (
        "/compact",
        "compact the conversation now (before the next model request): a summary and the recent messages",
    ),
    ("/mcp", "the MCP servers: state, tools and their safety"),
    (
        TRUST_USAGE,
        "this workspace's trust: what of its project config is ignored; yes trusts it as it is now, no revokes (for sessions started after)",
    ),
    ("/config", "the session's effective settings"),
    ("/queue", "how many messages wait for a turn"),
    ("/help", "this list"),
    ("/quit", "stop the session and leave (also Ctrl-D)"),
];

/// A line typed at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Nothing but blanks.
    Blank,
    /// Text for the model; `//text` sends `/text`.
    Message(String),
    /// A slash command.
    Command(Command),
    /// A slash command that cannot run.
    Invalid(Invalid),
}

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/mode` shows the mode (`None`); `/mode plan|work|operate` switches.
    Mode(Option<Mode>),
    /// `/model` shows the model (`None`); `/model NAME` switches.
    Model(Option<String>),
    /// `/plan on|off|status|view`; `/plan` alone is `status`.
    Plan(PlanAction),
    /// `/restore` or `/restore list`: this session's snapshots.
    Snapshots,
    /// `/restore SNAPSHOT [--dry-run]`.
    Restore {
        /// The snapshot's id or a unique prefix.
        snapshot: String,
        /// Report only.
        dry_run: bool,
    },
    /// `/goal …`.
    Goal(GoalAction),
    /// `/compact`.
    Compact,
    /// `/mcp`.
    Mcp,
    /// `/trust`, `/trust yes|grant`, `/trust no|revoke`.
    Trust(crate::trust_cmd::TrustAction),
    /// `/config`.
    Config,
    /// `/queue`.
    Queue,
    /// `/help` (or `/?`).
    Help,
    /// `/quit` (or `/exit`).
    Quit,
}

/// Why a slash command cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// No command has this name (as typed, with its slash).
    Unknown(String),
    /// The command exists; its arguments do not fit this usage.
    Usage(&'static str),
}

/// Parses one line.
pub fn parse(line: &str) -> Line {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Line::Blank;
    }
    if let Some(escaped) = trimmed.strip_prefix("//") {
        return Line::Message(format!("/{escaped}"));
    }
    if !trimmed.starts_with('/') {
        return Line::Message(trimmed.to_string());
    }
    let mut words = trimmed.split_whitespace();
    let name = words.next().unwrap_or_default().to_ascii_lowercase();
    let args: Vec<&str> = words.collect();
    let parsed = match name.as_str() {
        "/mode" => match args.as_slice() {
            [] => Ok(Command::Mode(None)),
            [mode] => mode
                .parse()
                .map(|m| Command::Mode(Some(m)))
                .map_err(|_| MODE_USAGE),
            _ => Err(MODE_USAGE),
        },
        "/plan" => match args.as_slice() {
            [] => Ok(Command::Plan(PlanAction::Status)),
            [action] => plan_action(action).map(Command::Plan).ok_or(PLAN_USAGE),
            _ => Err(PLAN_USAGE),
        },
        "/model" => match args.as_slice() {
            [] => Ok(Command::Model(None)),
            [name] => Ok(Command::Model(Some((*name).to_string()))),
            _ => Err(MODEL_USAGE),
        },
        "/compact" => no_arguments(&args, Command::Compact, "/compact"),
        "/restore" => match args.as_slice() {
            [] | ["list"] => Ok(Command::Snapshots),
            [id] | [id, "--dry-run"] | ["--dry-run", id] if !id.starts_with('-') => {
                Ok(Command::Restore {
                    snapshot: (*id).to_string(),
                    dry_run: args.len() == 2,
                })
            }
            _ => Err(RESTORE_USAGE),
        },
        "/goal" => goal(trimmed.get(name.len()..).unwrap_or_default().trim()),
        "/mcp" => no_arguments(&args, Command::Mcp, "/mcp"),
        "/trust" => {
            use crate::trust_cmd::TrustAction;
            match args.as_slice() {
                [] | ["show"] => Ok(Command::Trust(TrustAction::Show)),
                ["yes" | "grant"] => Ok(Command::Trust(TrustAction::Yes)),
                ["no" | "revoke"] => Ok(Command::Trust(TrustAction::No)),
                _ => Err(TRUST_USAGE),
            }
        }
        "/config" => no_arguments(&args, Command::Config, "/config"),
        "/queue" => no_arguments(&args, Command::Queue, "/queue"),
        "/help" | "/?" => no_arguments(&args, Command::Help, "/help"),
        "/quit" | "/exit" => no_arguments(&args, Command::Quit, "/quit"),
        _ => return Line::Invalid(Invalid::Unknown(name)),
    };
    match parsed {
        Ok(command) => Line::Command(command),
        Err(usage) => Line::Invalid(Invalid::Usage(usage)),
    }
}

/// `/goal` and its arguments (the rest of the line, trimmed).
fn goal(rest: &str) -> Result<Command, &'static str> {
    let command = |command| Ok(Command::Goal(GoalAction::Command { command }));
    let budget = |text: &str| match text {
        "clear" => Some(None),
        text => parse_tokens(text).map(Some),
    };
    match rest {
        "" => return Ok(Command::Goal(GoalAction::Show)),
        "clear" => return Ok(Command::Goal(GoalAction::Clear)),
        "pause" => return command(GoalCommand::Pause),
        "resume" => return command(GoalCommand::Resume),
        "complete" => return command(GoalCommand::Complete),
        "blocked" => return command(GoalCommand::Blocked),
        _ => {}
    }
    if let Some(objective) = rest.strip_prefix("edit ") {
        return command(GoalCommand::Edit {
            objective: objective.trim().to_string(),
        });
    }
    if let Some(value) = rest.strip_prefix("budget=") {
        return budget(value.trim())
            .map(GoalCommand::TokenBudget)
            .ok_or(GOAL_USAGE)
            .and_then(command);
    }
    // `/goal OBJECTIVE [budget=N]`: the budget, if any, is the last word.
    let (objective, tokens) = match rest.rsplit_once(' ') {
        Some((objective, last)) if last.starts_with("budget=") => {
            let tokens = budget(&last["budget=".len()..]).ok_or(GOAL_USAGE)?;
            (objective.trim(), tokens)
        }
        _ => (rest, None),
    };
    if objective.is_empty() || objective == "edit" {
        return Err(GOAL_USAGE);
    }
    Ok(Command::Goal(GoalAction::Set {
        objective: objective.to_string(),
        budgets: Budgets {
            tokens,
            ..Budgets::default()
        },
        settings: GoalSettings::default(),
    }))
}

/// `command` when there are no arguments; else its usage.
fn no_arguments(
    args: &[&str],
    command: Command,
    usage: &'static str,
) -> Result<Command, &'static str> {
    if args.is_empty() {
        Ok(command)
    } else {
        Err(usage)
    }
}

fn plan_action(word: &str) -> Option<PlanAction> {
    match word.to_ascii_lowercase().as_str() {
        "on" => Some(PlanAction::On),
        "off" => Some(PlanAction::Off),
        "status" => Some(PlanAction::Status),
        "view" | "show" => Some(PlanAction::View),
        _ => None,
    }
}

/// An answer to an approval prompt: `y` allow once, `s` allow for the
/// session, `n` deny (the words spelled out work too).
pub fn approval(text: &str) -> Option<(ApprovalDecision, Option<String>)> {
    let text = text.trim();
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let word = word.trim_end_matches([',', ':']).to_ascii_lowercase();
    let rest = rest.trim();
    match (word.as_str(), rest.is_empty()) {
        ("y" | "yes" | "once", true) => Some((ApprovalDecision::AllowOnce, None)),
        ("s" | "session" | "always", true) => Some((ApprovalDecision::AllowSession, None)),
        // A denial may say what to do instead: the model reads it.
        ("n" | "no" | "deny", true) => Some((ApprovalDecision::Deny, None)),
        ("n" | "no" | "deny", false) => Some((ApprovalDecision::Deny, Some(rest.to_string()))),
        _ => None,
    }
}

/// An answer to a plan questionnaire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanReply {
    /// A complete answer.
    Answer(QuestionnaireAnswer),
    /// `r` alone: the feedback follows on the next line.
    ReviseAsk,
}

/// Parses `a` approve, `d` defer, `w` withdraw, `r [feedback]` revise (the
/// words spelled out work too).
pub fn plan_reply(text: &str) -> Option<PlanReply> {
    let text = text.trim();
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let rest = rest.trim();
    let answer = match (word.to_ascii_lowercase().as_str(), rest.is_empty()) {
        ("a" | "approve", true) => QuestionnaireAnswer::Approve,
        ("d" | "defer", true) => QuestionnaireAnswer::Defer,
        ("w" | "withdraw", true) => QuestionnaireAnswer::Withdraw,
        ("r" | "revise", true) => return Some(PlanReply::ReviseAsk),
        ("r" | "revise", false) => QuestionnaireAnswer::Revise {
            feedback: rest.to_string(),
        },
        _ => return None,
    };
    Some(PlanReply::Answer(answer))
}

#[cfg(test)]
mod tests;
