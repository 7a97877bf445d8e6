//! Goals on the command line: `cadre exec --goal …` flags, the exit code a
//! goal's status maps to, and `cadre goal show|pause|resume|clear|budget
//! SESSION`, which change a stored session's goal without running it (the
//! next `cadre exec --resume` continues an active goal), holding its lease
//! while they write.

use std::path::PathBuf;

use cadre_runtime::goal::{
    Budgets, Goal, GoalAction, GoalCommand, GoalSettings, GoalStatus, VerifyMode, parse_tokens,
};
use cadre_runtime::store::Store;
use clap::{Args, Subcommand};

use crate::exit::{self, CliError};

/// `cadre exec`'s goal flags.
#[derive(Debug, Default, Args)]
pub struct GoalFlags {
    /// Work toward this objective turn after turn until a verifier confirms
    /// it (the PROMPT becomes optional). Exit 0 complete, 1 blocked, 3
    /// stopped unfinished and resumable (paused, budget-limited), 75 the
    /// provider failed.
    #[arg(long, value_name = "OBJECTIVE")]
    pub goal: Option<String>,

    /// The goal's token budget (the verifier's tokens count too), e.g. 50K.
    #[arg(long, value_name = "N", requires = "goal")]
    pub goal_tokens: Option<String>,

    /// The goal's budget of main turns.
    #[arg(long, value_name = "N", requires = "goal")]
    pub goal_turns: Option<u64>,

    /// The goal's budget of active time, e.g. 90s, 15m, 2h, 1h30m.
    #[arg(long, value_name = "DURATION", requires = "goal")]
    pub goal_time: Option<String>,

    /// How a completion claim is checked: none (accept it), subagent (a
    /// read-only verifier agent; the default) or command (--verify-command).
    #[arg(long, value_name = "MODE", requires = "goal")]
    pub verify: Option<String>,

    /// The check command of --verify command (exit 0 passes), run read-only
    /// in the workspace.
    #[arg(long, value_name = "CMD", requires = "goal")]
    pub verify_command: Option<String>,
}

impl GoalFlags {
    /// The goal these flags set, validated; `None` without `--goal`.
    pub fn action(&self) -> Result<Option<GoalAction>, CliError> {
        let Some(objective) = &self.goal else {
            return Ok(None);
        };
        if objective.trim().is_empty() {
            return Err(CliError::usage("the --goal objective is empty"));
        }
        let tokens = match &self.goal_tokens {
            Some(text) => Some(parse_tokens(text).ok_or_else(|| {
                CliError::usage(format!(
                    "--goal-tokens '{text}' is not a count (e.g. 50000, 50K)"
                ))
            })?),
            None => None,
        };
        let seconds = match &self.goal_time {
            Some(text) => Some(parse_duration(text).ok_or_else(|| {
                CliError::usage(format!(
                    "--goal-time '{text}' is not a duration (e.g. 90s, 15m, 2h, 1h30m)"
                ))
            })?),
            None => None,
        };
        let mut verify = match &self.verify {
            Some(mode) => mode.parse().map_err(CliError::usage)?,
            None => VerifyMode::Subagent,
        };
        if self.verify.is_none() && self.verify_command.is_some() {
            verify = VerifyMode::Command;
        }
        if verify == VerifyMode::Command
            && self
                .verify_command
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
        {
            return Err(CliError::usage(
                "--verify command needs --verify-command CMD",
            ));
        }
        Ok(Some(GoalAction::Set {
            objective: objective.trim().to_string(),
            budgets: Budgets {
                tokens,
                turns: self.goal_turns,
                seconds,
            },
            settings: GoalSettings {
                verify,
                verify_command: self.verify_command.clone(),
                ..GoalSettings::default()
            },
        }))
    }
}

/// Reads `90`, `90s`, `15m`, `2h`, `1h30m` as seconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(seconds) = text.parse() {
        return Some(seconds);
    }
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let n: u64 = number.parse().ok()?;
                number.clear();
                let scale = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                total = total.checked_add(n.checked_mul(scale)?)?;
            }
            _ => return None,
        }
    }
    number.is_empty().then_some(total)
}

/// The exit code of a run that ended with the goal in `status`.
pub fn exit_code(status: GoalStatus) -> u8 {
    match status {
        GoalStatus::Complete => exit::SUCCESS,
        GoalStatus::Blocked => exit::AGENT_FAILED,
        GoalStatus::Active | GoalStatus::Paused | GoalStatus::BudgetLimited => exit::UNFINISHED,
        GoalStatus::UsageLimited => exit::TEMPFAIL,
    }
}

/// `cadre goal`.
#[derive(Debug, Args)]
pub struct GoalArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: GoalSub,

    /// Where sessions are stored (default: $CADRE_HOME, else the platform data dir + cadre).
    #[arg(
        long = "data-dir",
        id = "goal_data_dir",
        value_name = "DIR",
        env = "CADRE_HOME",
        global = true
    )]
    pub data_dir: Option<PathBuf>,
}

/// `cadre goal …`.
#[derive(Debug, Subcommand)]
pub enum GoalSub {
    /// Print the session's goal and its progress.
    Show {
        /// The session: an id, a unique id prefix, or `latest`.
        session: String,
    },
    /// Stop continuing until resumed.
    Pause {
        /// The session.
        session: String,
    },
    /// Continue a paused or blocked goal (`cadre exec --resume SESSION` runs it).
    Resume {
        /// The session.
        session: String,
    },
    /// Remove the goal.
    Clear {
        /// The session.
        session: String,
    },
    /// Change the budgets; raising (or clearing) a spent one reactivates
    /// the goal. `clear` removes a budget; an absent flag keeps it.
    Budget {
        /// The session.
        session: String,
        /// Tokens, e.g. 50K, or clear.
        #[arg(long)]
        tokens: Option<String>,
        /// Main turns, or clear.
        #[arg(long)]
        turns: Option<String>,
        /// Active time, e.g. 15m, or clear.
        #[arg(long)]
        time: Option<String>,
    },
}

/// A budget flag: `None` keeps the budget, `Some(None)` clears it.
fn budget_flag(
    flag: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Option<u64>,
) -> Result<Option<Option<u64>>, CliError> {
    match value {
        None => Ok(None),
        Some("clear") => Ok(Some(None)),
        Some(text) => parse(text)
            .map(|n| Some(Some(n)))
            .ok_or_else(|| CliError::usage(format!("--{flag} '{text}' is not a valid budget"))),
    }
}

/// Runs `cadre goal …` against the store; the command it prints carries
/// `followup`'s flags. Every action but `show` writes under the session's
/// lease, so it is refused (exit 75) while another process runs the session.
pub fn run(
    args: GoalArgs,
    data_dir: PathBuf,
    followup: &crate::followup::Followup,
) -> Result<u8, CliError> {
    let path = cadre_runtime::store::store_path(&data_dir);
    let mut store = Store::open(&path).map_err(store_error)?;
    let spec = match &args.action {
        GoalSub::Show { session }
        | GoalSub::Pause { session }
        | GoalSub::Resume { session }
        | GoalSub::Clear { session }
        | GoalSub::Budget { session, .. } => session.clone(),
    };
    let session = store
        .resolve(&spec, None)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let edit = match args.action {
        GoalSub::Show { .. } => {
            let goal = stored_goal(&mut store, &session.id)?;
            crate::outln!("{}", goal.objective);
            crate::outln!("{}", goal.progress_line());
            for gap in &goal.gaps.gaps {
                crate::outln!("gap: {gap}");
            }
            return Ok(exit::SUCCESS);
        }
        GoalSub::Clear { .. } => Edit::Clear,
        GoalSub::Pause { .. } => Edit::Command(GoalCommand::Pause),
        GoalSub::Resume { .. } => Edit::Command(GoalCommand::Resume),
        GoalSub::Budget {
            tokens,
            turns,
            time,
            ..
        } => Edit::Budgets {
            tokens: budget_flag("tokens", tokens.as_deref(), parse_tokens)?,
            turns: budget_flag("turns", turns.as_deref(), |s| s.parse().ok())?,
            seconds: budget_flag("time", time.as_deref(), parse_duration)?,
        },
    };
    let changed = crate::lease::with_lease(
        &mut store,
        &session.id,
        "change its goal there (/goal in its shell)",
        |store| edit.apply(store, &session.id),
    )?;
    let Some(goal) = changed else {
        crate::outln!("goal cleared");
        return Ok(exit::SUCCESS);
    };
    crate::outln!("{}", goal.progress_line());
    if goal.status == GoalStatus::Active {
        crate::outln!(
            "continue it with: {}",
            followup.exec(&["--resume", &session.id])
        );
    }
    Ok(exit::SUCCESS)
}

/// `session_id`'s goal, or a usage error saying it has none.
fn stored_goal(store: &mut Store, session_id: &str) -> Result<Goal, CliError> {
    store
        .goal(session_id)
        .map_err(store_error)?
        .ok_or_else(|| CliError::usage(format!("session {session_id} has no goal")))
}

/// What `cadre goal pause|resume|clear|budget` does to the stored goal, its
/// flags already read.
enum Edit {
    Clear,
    Command(GoalCommand),
    /// Per budget: `None` keeps it, `Some(None)` clears it.
    Budgets {
        tokens: Option<Option<u64>>,
        turns: Option<Option<u64>>,
        seconds: Option<Option<u64>>,
    },
}

impl Edit {
    /// Applies the edit to `session_id`'s stored goal and stores the result;
    /// `None` once the goal is cleared. Run under the session's lease, so
    /// no running session stores its own copy between the read and the write.
    fn apply(self, store: &mut Store, session_id: &str) -> Result<Option<Goal>, CliError> {
        let mut goal = stored_goal(store, session_id)?;
        let command = match self {
            Edit::Clear => {
                store.clear_goal(session_id).map_err(store_error)?;
                return Ok(None);
            }
            Edit::Command(command) => command,
            Edit::Budgets {
                tokens,
                turns,
                seconds,
            } => {
                let budgets = Budgets {
                    tokens: tokens.unwrap_or(goal.budgets.tokens),
                    turns: turns.unwrap_or(goal.budgets.turns),
                    seconds: seconds.unwrap_or(goal.budgets.seconds),
                };
                GoalCommand::Budget(budgets)
            }
        };
        goal.command(command)
            .map_err(|e| CliError::usage(e.to_string()))?;
        store.put_goal(session_id, &goal).map_err(store_error)?;
        Ok(Some(goal))
    }
}

fn store_error(err: cadre_runtime::store::StoreError) -> CliError {
    if err.is_retryable() {
        CliError::tempfail(err.to_string())
    } else {
        CliError::internal(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let check = |text: &str, expected: Option<u64>| {
            assert_eq!(parse_duration(text), expected, "{text}");
        };
        check("90", Some(90));
        check("90s", Some(90));
        check("15m", Some(900));
        check("1h30m", Some(5400));
        check("2h", Some(7200));
        check("1h30", None);
        check("soon", None);
        check("", None);
    }

    #[test]
    fn each_goal_status_has_its_exit_code() {
        let check = |status, code| assert_eq!(exit_code(status), code, "{status}");
        check(GoalStatus::Complete, 0);
        check(GoalStatus::Blocked, 1);
        check(GoalStatus::Paused, 3);
        check(GoalStatus::BudgetLimited, 3);
        check(GoalStatus::Active, 3);
        check(GoalStatus::UsageLimited, 75);
    }

    #[test]
    fn goal_flags_are_validated_into_a_goal() {
        let flags = |verify: Option<&str>, command: Option<&str>| GoalFlags {
            goal: Some("ship it".into()),
            goal_tokens: Some("50K".into()),
            goal_turns: Some(4),
            goal_time: Some("15m".into()),
            verify: verify.map(str::to_string),
            verify_command: command.map(str::to_string),
        };
        let Ok(Some(GoalAction::Set {
            budgets, settings, ..
        })) = flags(None, Some("cargo test")).action()
        else {
            panic!("a goal");
        };
        assert_eq!(
            (budgets.tokens, budgets.turns, budgets.seconds),
            (Some(50_000), Some(4), Some(900))
        );
        assert_eq!(settings.verify, VerifyMode::Command);
        assert!(flags(Some("command"), None).action().is_err());
        assert!(flags(Some("maybe"), None).action().is_err());
        assert!(GoalFlags::default().action().is_ok_and(|a| a.is_none()));
    }
}
