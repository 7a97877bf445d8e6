//! `check = { verifier = true }`: a read-only verifier agent judges a
//! step's answer.
//!
//! The verifier is a kernel agent like the step's, started by the step
//! actor under a number of its own in the run's tree. Its authority is the
//! step's narrowed once more to Plan mode and posture `never` (read-only
//! tools, read-only bash, nothing that would need a person), with no
//! sub-agents and no file scope to write; a `[roles.verifier]` in the
//! configuration may give its model and add to its prompt, never widen it.
//! It is given the step's prompt as the objective, the step's answer as the
//! claim and the calls the step really made as the evidence, and must end
//! its answer with `VERDICT: PASS | FAIL | PARTIAL` (the contract of the
//! goal verifier, read by the same parser). PASS verifies; anything else
//! fails the check with the verifier's gaps as the reason. Its tokens are
//! the step's, and count toward the run's budget.

use cadre_actors::events::Events;
use cadre_actors::kernel::{AgentServices, AgentSpec};
use cadre_actors::session::Subagents;
use cadre_runtime::Mode;
use cadre_runtime::agent::AgentPath;
use cadre_runtime::config::RoleConfig;
use cadre_runtime::goal::{VERIFIER_PROMPT, Verdict, parse_verdict};
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Envelope, Event};

/// The role the verifier runs under (a `[roles.verifier]` may give its
/// model and prompt).
pub const VERIFIER_ROLE: &str = "verifier";

/// The most calls of the evidence shown to the verifier (the latest).
const CALLS_SHOWN: usize = 60;

/// The verifier of the step whose agent is `step`, at `path` under the run,
/// and the services it runs with.
pub(super) fn verifier(
    step: &AgentSpec,
    subagents: Option<&Subagents>,
    services: &AgentServices,
    path: AgentPath,
) -> Result<(AgentSpec, AgentServices), String> {
    let configured = subagents.and_then(|s| s.roles.get(VERIFIER_ROLE).cloned());
    // Whatever the configuration says, the verifier reads only.
    let role = RoleConfig {
        mode: Some(Mode::Plan),
        posture: Some(Posture::Never),
        file_scope: None,
        ..configured.clone().unwrap_or_default()
    };
    let mut parent = step.authority.clone();
    // It starts nothing itself, so a step at the depth limit can still be
    // verified.
    parent.max_depth = parent.max_depth.max(parent.depth + 1);
    let authority = parent
        .narrow(VERIFIER_ROLE, &role)
        .map_err(|e| format!("the verifier's authority: {e}"))?;
    let mut services = services.clone();
    if configured.is_some()
        && let Some(subagents) = subagents
    {
        services.model = subagents
            .models
            .client(&role)
            .map_err(|e| format!("the verifier's model: {e}"))?;
    }
    let prompt = match &role.system_prompt {
        Some(extra) => format!("{VERIFIER_PROMPT}\n\n{extra}"),
        None => VERIFIER_PROMPT.to_string(),
    };
    let dir = step
        .paths
        .dir
        .parent()
        .map_or_else(|| step.paths.dir.clone(), |d| d.join(path.to_string()));
    let spec = AgentSpec {
        path,
        role: VERIFIER_ROLE.into(),
        authority,
        model: match role.base_url {
            Some(_) => role.model.clone(),
            None => role.model.clone().or_else(|| step.model.clone()),
        },
        prompt: Some(prompt),
        first_message: None,
        paths: SessionPaths { dir },
        // No person answers a verifier: what would ask is denied.
        interactive: false,
        subagents: None,
        plan_agent_entry: false,
        mode_given: true,
        posture_given: true,
        snapshots: None,
        ..step.clone()
    };
    Ok((spec, services))
}

/// The verifier's first message: the step's prompt as the objective, its
/// answer as the claim, and the calls it made (`name subject → outcome`).
pub fn verifier_request(prompt: &str, answer: &str, calls: &[String]) -> String {
    let skipped = calls.len().saturating_sub(CALLS_SHOWN);
    let mut evidence: Vec<String> = calls[skipped..].iter().map(|c| format!("- {c}")).collect();
    if skipped > 0 {
        evidence.insert(0, format!("({skipped} earlier calls not shown)"));
    }
    if evidence.is_empty() {
        evidence.push("(no tool calls)".into());
    }
    let answer = match answer.trim() {
        "" => "(no answer given)",
        text => text,
    };
    format!(
        "A workflow step was given this task:\n{}\n\nIts answer (the claim):\n{answer}\n\n\
         The tool calls it actually made (the evidence):\n{}\n\nVerify the answer against the \
         task and the workspace and answer with GAP lines and a last line VERDICT: PASS, FAIL or \
         PARTIAL.",
        prompt.trim(),
        evidence.join("\n")
    )
}

/// Reads the verifier's events until its turn ends: its verdict and the
/// tokens it spent (`None` when its stream ended before its turn did).
pub(super) async fn read_verdict(mut events: Events) -> (Verdict, u64) {
    let mut answer = String::new();
    while let Some(Envelope { event, .. }) = events.recv().await {
        match event {
            Event::AssistantMessage { text, .. } => answer = text,
            Event::TurnCompleted { usage, .. } => {
                let tokens = usage.prompt_tokens + usage.completion_tokens;
                return (parse_verdict(&answer), tokens);
            }
            Event::TurnFailed { message, usage, .. } => {
                let tokens = usage.prompt_tokens + usage.completion_tokens;
                return (Verdict::Unavailable(message), tokens);
            }
            _ => {}
        }
    }
    (
        Verdict::Unavailable("the verifier stopped before it answered".into()),
        0,
    )
}

/// A verdict as a check's outcome: PASS verifies; anything else fails,
/// with the gaps (or why there is no verdict) as the detail.
pub fn outcome(verdict: &Verdict) -> (bool, String) {
    match verdict {
        Verdict::Pass => (true, "the verifier: PASS".into()),
        Verdict::Fail(gaps) | Verdict::Partial(gaps) => {
            let word = if matches!(verdict, Verdict::Fail(_)) {
                "FAIL"
            } else {
                "PARTIAL"
            };
            let gaps = if gaps.is_empty() {
                "no gaps named".to_string()
            } else {
                gaps.join("; ")
            };
            (false, format!("the verifier: {word}: {gaps}"))
        }
        Verdict::Unparseable => (
            false,
            "the verifier's answer did not end with a VERDICT line".into(),
        ),
        Verdict::Unavailable(why) => (false, format!("the verifier could not judge: {why}")),
    }
}

#[cfg(test)]
mod tests;
