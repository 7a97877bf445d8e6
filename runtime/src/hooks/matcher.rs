//! A hook's `matcher`: the rule syntax of permissions (`bash`,
//! `bash(cargo test:*)`, `write_file(migrations/**)`, `mcp_*`), read the
//! way a deny rule is — anything that could be what it names is — so a
//! hook that guards a path or a command is not slipped past by a spelling.

use crate::permission::call::Call;
use crate::permission::rules::{PermissionRules, RuleSet, Scope};

/// A matcher that is not a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hook matcher '{matcher}': {message}")]
pub struct MatcherError {
    /// The matcher as written.
    pub matcher: String,
    /// What is wrong with it.
    pub message: String,
}

/// Whether a hook with `matcher` runs for `call` (every call without one,
/// or with `*`).
pub fn matches(matcher: Option<&str>, call: &Call<'_>) -> Result<bool, MatcherError> {
    let Some(matcher) = matcher
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "*")
    else {
        return Ok(true);
    };
    let mut rules = RuleSet::default();
    rules
        .extend_from(
            Scope::User,
            &PermissionRules {
                allow: Vec::new(),
                ask: Vec::new(),
                deny: vec![matcher.to_string()],
            },
        )
        .map_err(|e| MatcherError {
            matcher: matcher.to_string(),
            message: e.to_string(),
        })?;
    Ok(rules.decide(call).is_some())
}

#[cfg(test)]
mod tests;
