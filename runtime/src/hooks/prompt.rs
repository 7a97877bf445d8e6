//! What the hooks around a person's message conclude: `user_prompt_submit`
//! may refuse the message (and fails closed) or add context to it;
//! `session_start` may add context to the first message after it.

use super::answer::{HookDecision, HookOutcome, additional_context};

/// What a message's `user_prompt_submit` hooks conclude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptVerdict {
    /// The message is admitted, with the context the hooks added.
    Admit {
        /// Their `additional_context`, joined.
        context: Option<String>,
    },
    /// The message is refused: it is never admitted nor sent to the model.
    Refuse {
        /// The hook's command.
        hook: String,
        /// Why.
        reason: String,
    },
}

/// The verdict of `user_prompt_submit` hooks, each `(command, outcome)`, in
/// order: the first deny refuses; a hook that failed refuses too (a prompt
/// gate fails closed); `ask` and `allow` are no objection (the person
/// asked is the one who sent it).
pub fn prompt_verdict(outcomes: &[(String, HookOutcome)]) -> PromptVerdict {
    for (hook, outcome) in outcomes {
        match outcome {
            HookOutcome::Failed(why) => {
                return PromptVerdict::Refuse {
                    hook: hook.clone(),
                    reason: format!(
                        "the hook failed ({why}); a user_prompt_submit hook fails closed"
                    ),
                };
            }
            HookOutcome::Answered(answer) => match answer.decision {
                Some(HookDecision::Deny) => {
                    return PromptVerdict::Refuse {
                        hook: hook.clone(),
                        reason: answer
                            .reason
                            .clone()
                            .unwrap_or_else(|| "no reason given".into()),
                    };
                }
                Some(HookDecision::Ask | HookDecision::Allow) | None => {}
            },
        }
    }
    PromptVerdict::Admit {
        context: additional_context(outcomes),
    }
}

impl PromptVerdict {
    /// What the refusal says to the person.
    pub fn refusal(&self) -> Option<String> {
        match self {
            PromptVerdict::Admit { .. } => None,
            PromptVerdict::Refuse { hook, reason } => Some(format!(
                "the message was refused by the user_prompt_submit hook `{hook}`: {reason}"
            )),
        }
    }
}

/// `text` with the context a hook of `event` added, under a line naming
/// the event (as `post_tool_use` context follows a call's output).
pub fn with_context(text: &str, event: &str, context: Option<&str>) -> String {
    match context.map(str::trim).filter(|c| !c.is_empty()) {
        Some(context) => format!("{text}\n\n[{event} hook]\n{context}"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
