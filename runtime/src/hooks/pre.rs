//! The `pre_tool_use` layer for one call: which hooks match it, what they
//! answer, and the verdict the permission evaluation takes.

use super::answer::{HookOutcome, HookVerdict, verdict};
use super::config::{HookEvent, HookSet, HookSpec};
use super::event::{Who, tool_event};
use super::matcher::matches;
use super::run::{HookEnv, run_hooks};
use crate::permission::call::Call;

/// The hooks of `hooks` whose matcher names `call`, in order; a matcher
/// that cannot be read matches (and its hook then decides), so a broken
/// guard never lets a call through unseen.
pub fn matching<'h>(hooks: &'h [HookSpec], call: &Call<'_>) -> Vec<&'h HookSpec> {
    hooks
        .iter()
        .filter(|hook| matches(hook.matcher.as_deref(), call).unwrap_or(true))
        .collect()
}

/// Runs the `pre_tool_use` hooks that match `call` and concludes; also
/// returns the commands that ran, for the audit.
pub async fn pre_tool_use(
    hooks: &HookSet,
    who: &Who<'_>,
    call: &Call<'_>,
    env: HookEnv<'_>,
) -> (HookVerdict, Vec<String>) {
    let matched = matching(&hooks.pre_tool_use, call);
    if matched.is_empty() {
        return (HookVerdict::NoObjection, Vec::new());
    }
    let event = tool_event(HookEvent::PreToolUse, who, call);
    let outcomes: Vec<(String, HookOutcome)> = run_hooks(&matched, &event, env).await;
    let ran = outcomes.iter().map(|(hook, _)| hook.clone()).collect();
    (verdict(&outcomes), ran)
}
