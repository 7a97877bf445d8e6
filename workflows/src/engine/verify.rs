//! `check = { verifier = true }`: a read-only verifier agent judges a
//! step's answer.
//!
//! The verifier is the one verifier agent of `cadre_actors::verifier`
//! (the goal's too), started by the step actor under a number of its own in
//! the run's tree: the step's authority narrowed once more to Plan mode and
//! posture `never`, with `run_check` to run the project's own tests. It is
//! given the step's prompt as the objective, the step's answer as the
//! claim and the calls the step really made as the evidence, and must end
//! its answer with `VERDICT: PASS | FAIL | PARTIAL` (the contract of the
//! goal verifier, read by the same parser). PASS verifies; anything else
//! fails the check with the verifier's gaps as the reason. Its tokens are
//! the step's, and count toward the run's budget.

use cadre_actors::kernel::{AgentServices, AgentSpec};
use cadre_actors::session::Subagents;
use cadre_actors::verifier::{Seat, VerifierError};
use cadre_runtime::agent::{AgentPath, LiveAuthority};
use cadre_runtime::goal::Verdict;

/// The most calls of the evidence shown to the verifier (the latest).
const CALLS_SHOWN: usize = 60;

/// The verifier of the step whose agent is `step`, at `path` under the run,
/// and the services it runs with: the one verifier
/// (`cadre_actors::verifier`), beside the step's agent in the run's tree.
pub(super) fn verifier(
    step: &AgentSpec,
    subagents: Option<&Subagents>,
    services: &AgentServices,
    path: AgentPath,
) -> Result<(AgentSpec, AgentServices), VerifierError> {
    let dir = step
        .paths
        .dir
        .parent()
        .map_or_else(|| step.paths.dir.clone(), |d| d.join(path.to_string()));
    cadre_actors::verifier::verifier(Seat {
        judged: step,
        authority: step.authority.clone(),
        // A step always answers to its caller's live authority.
        parent: step
            .parent
            .clone()
            .unwrap_or_else(|| LiveAuthority::root(step.authority.mode, step.authority.posture)),
        path,
        dir,
        subagents,
        services,
    })
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
