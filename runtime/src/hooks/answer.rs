//! What a hook says: its exit code and optional JSON on stdout, and
//! several hooks' answers taken together.
//!
//! Exit 0 with nothing on stdout is no objection; exit 0 with a JSON
//! object says more (`decision`, `reason`, `continue`, `message`,
//! `additional_context`); exit 2 denies, its stderr the reason. Any other
//! exit, a signal, a timeout, or stdout that is not such an object is a
//! failure: a `pre_tool_use` hook's failure denies the call (fail closed),
//! another event's is reported.

use serde::Deserialize;

use super::config::HookEvent;

/// What a hook answers about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// No objection: the other layers decide (it never allows past them).
    Allow,
    /// A person must be asked (denied where none can answer).
    Ask,
    /// The call does not run.
    Deny,
}

/// A hook's answer that could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookAnswer {
    /// `deny`, `ask` or `allow` (no objection).
    #[serde(default)]
    pub decision: Option<HookDecision>,
    /// Why, for the model and the audit.
    #[serde(default)]
    pub reason: Option<String>,
    /// A stop hook: keep the agent working.
    #[serde(default, rename = "continue")]
    pub keep_going: Option<bool>,
    /// A stop hook's message to the agent with `continue`.
    #[serde(default)]
    pub message: Option<String>,
    /// A post-tool or prompt hook's context for the model.
    #[serde(default)]
    pub additional_context: Option<String>,
}

/// How one hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// It answered.
    Answered(HookAnswer),
    /// It failed: why (a timeout, a crash, unreadable output).
    Failed(String),
}

/// Reads a hook's end: its exit code (`None`: killed by a signal), its
/// stdout and its stderr.
pub fn read_answer(code: Option<i32>, stdout: &str, stderr: &str) -> HookOutcome {
    let stderr = stderr.trim();
    match code {
        Some(0) if stdout.trim().is_empty() => HookOutcome::Answered(HookAnswer::default()),
        Some(0) => match serde_json::from_str::<HookAnswer>(stdout.trim()) {
            Ok(answer) => HookOutcome::Answered(answer),
            Err(e) => HookOutcome::Failed(format!("its output is not a hook answer: {e}")),
        },
        Some(2) => HookOutcome::Answered(HookAnswer {
            decision: Some(HookDecision::Deny),
            reason: Some(if stderr.is_empty() {
                "it exited with code 2".to_string()
            } else {
                stderr.to_string()
            }),
            ..HookAnswer::default()
        }),
        Some(code) => {
            HookOutcome::Failed(with_stderr(format!("it exited with code {code}"), stderr))
        }
        None => HookOutcome::Failed(with_stderr("it was killed by a signal".into(), stderr)),
    }
}

fn with_stderr(what: String, stderr: &str) -> String {
    match stderr.lines().next() {
        Some(line) => format!("{what}: {line}"),
        None => what,
    }
}

/// What the `pre_tool_use` hooks of one call conclude.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HookVerdict {
    /// None ran, or none objected.
    #[default]
    NoObjection,
    /// A person must be asked (or the call is denied where none can be).
    Ask {
        /// The hook's command.
        hook: String,
        /// Why.
        reason: String,
    },
    /// The call does not run.
    Deny {
        /// The hook's command.
        hook: String,
        /// Why.
        reason: String,
    },
}

/// The verdict of `pre_tool_use` hooks, each `(command, outcome)`, in
/// order: the first deny (a failure is one) wins, else the first ask.
pub fn verdict(outcomes: &[(String, HookOutcome)]) -> HookVerdict {
    let mut ask = None;
    for (hook, outcome) in outcomes {
        match outcome {
            HookOutcome::Failed(why) => {
                return HookVerdict::Deny {
                    hook: hook.clone(),
                    reason: format!("the hook failed ({why}); a pre_tool_use hook fails closed"),
                };
            }
            HookOutcome::Answered(answer) => {
                let reason = || {
                    answer
                        .reason
                        .clone()
                        .unwrap_or_else(|| "no reason given".into())
                };
                match answer.decision {
                    Some(HookDecision::Deny) => {
                        return HookVerdict::Deny {
                            hook: hook.clone(),
                            reason: reason(),
                        };
                    }
                    Some(HookDecision::Ask) if ask.is_none() => {
                        ask = Some(HookVerdict::Ask {
                            hook: hook.clone(),
                            reason: reason(),
                        });
                    }
                    Some(HookDecision::Ask | HookDecision::Allow) | None => {}
                }
            }
        }
    }
    ask.unwrap_or_default()
}

/// What stop hooks (`stop`, `subagent_stop`, `step_stop`) send back to the
/// agent: the messages of those that said `continue`, or `None` to let it
/// stop. A failed hook lets it stop (and is reported).
pub fn continuation(outcomes: &[(String, HookOutcome)]) -> Option<String> {
    let messages: Vec<String> = outcomes
        .iter()
        .filter_map(|(hook, outcome)| match outcome {
            HookOutcome::Answered(answer) if answer.keep_going == Some(true) => Some(
                answer
                    .message
                    .clone()
                    .or_else(|| answer.reason.clone())
                    .unwrap_or_else(|| format!("The hook `{hook}` asks you to keep working.")),
            ),
            HookOutcome::Answered(_) | HookOutcome::Failed(_) => None,
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join("\n\n"))
}

/// The `additional_context` of the hooks that gave one, joined.
pub fn additional_context(outcomes: &[(String, HookOutcome)]) -> Option<String> {
    let parts: Vec<&str> = outcomes
        .iter()
        .filter_map(|(_, outcome)| match outcome {
            HookOutcome::Answered(answer) => answer.additional_context.as_deref(),
            HookOutcome::Failed(_) => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// One line per failed hook of an event that does not fail closed, for
/// the log and the transcript.
pub fn report_failures(event: HookEvent, outcomes: &[(String, HookOutcome)]) -> Vec<String> {
    outcomes
        .iter()
        .filter_map(|(hook, outcome)| match outcome {
            HookOutcome::Failed(why) => Some(format!(
                "the {} hook `{hook}` failed: {why}",
                event.as_str()
            )),
            HookOutcome::Answered(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
