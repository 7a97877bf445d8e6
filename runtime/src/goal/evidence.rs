//! What the verifier is given (G5): its contract, and a digest of the
//! evidence (the calls the worker really made and what they returned)
//! beside the worker's claim, so it checks facts rather than prose.

use std::sync::Arc;

use crate::message::Message;

/// The verifier's system prompt: the contract of its answer.
pub const VERIFIER_PROMPT: &str = "You are a goal verifier. A worker agent claims it has met an \
objective. Check the claim against the workspace yourself with your read-only tools (read files, \
search, run read-only commands, and `run_check` to run the project's own build and tests as \
written, e.g. `cargo test`); do not trust the claim or the digest, which only show where to \
look. You cannot change anything, and you do not fix what you find. Answer with your findings, \
each unmet requirement on its own line starting with `GAP: `, and end your answer with exactly \
one last line: `VERDICT: PASS` when the objective is fully met, `VERDICT: FAIL` when it is not \
(with the GAP lines), or `VERDICT: PARTIAL` when it is partly met and the rest needs a person.";

/// The most calls the digest lists (the latest).
const CALLS_SHOWN: usize = 40;
/// The most characters of one call's arguments or result in the digest.
const SHOWN: usize = 240;

fn clip(text: &str) -> String {
    let line = text.trim().replace('\n', " ⏎ ");
    match line.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// The verifier's first message: the objective, the claim, and the digest
/// of `messages` (the worker's recent conversation).
pub fn verifier_request(objective: &str, claim: &str, messages: &[Arc<Message>]) -> String {
    let mut calls: Vec<String> = Vec::new();
    let mut names = std::collections::HashMap::new();
    for message in messages {
        match message.as_ref() {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    names.insert(call.id.clone(), calls.len());
                    calls.push(format!("- {}({})", call.name, clip(&call.arguments)));
                }
            }
            Message::Tool { call_id, content } => {
                if let Some(&i) = names.get(call_id)
                    && let Some(line) = calls.get_mut(i)
                {
                    line.push_str(&format!(" → {}", clip(content)));
                }
            }
            Message::User { .. } | Message::Compaction(_) => {}
        }
    }
    let skipped = calls.len().saturating_sub(CALLS_SHOWN);
    let mut digest = calls.split_off(skipped).join("\n");
    if skipped > 0 {
        digest = format!("({skipped} earlier calls not shown)\n{digest}");
    }
    if digest.is_empty() {
        digest = "(no tool calls)".into();
    }
    format!(
        "Objective:\n{objective}\n\nThe worker's claim:\n{}\n\nEvidence digest (the worker's \
         latest tool calls and their results):\n{digest}\n\nVerify the objective against the \
         workspace and answer with GAP lines and a last line VERDICT: PASS, FAIL or PARTIAL.",
        if claim.trim().is_empty() {
            "(no claim given)"
        } else {
            claim.trim()
        }
    )
}
