//! The Auto-Review guardian's request and the reading of its answer (P5).
//!
//! The guardian sees only the exact held call and the floor's observations,
//! as separate JSON fields: no conversation, no skills, no attachments. It
//! has no tools and no memory. Its answer must be exactly one JSON object
//! `{"risk": "low|medium|high|critical", "decision": "allow|deny",
//! "reason": "…"}` (optionally in a single fenced block); anything else is
//! malformed and denies. High or critical risk never runs, whatever the
//! decision says. The actor that sends the request lives in `cadre-actors`.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::engine::{Decision, Layer, Risk, Verdict};
use crate::model::{ModelRequest, RequestContext};

/// How the guardian works.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardianConfig {
    /// The model name to ask, when not the agent's own.
    pub model: Option<String>,
    /// The guardian's model choice when it needs a client of its own (a
    /// provider, or parameters such as a reasoning effort): built like a
    /// role's. `None`: the agent's client answers. Boxed: every agent's
    /// spec and authority carry this config, and few name a choice.
    pub choice: Option<Box<crate::config::RoleConfig>>,
    /// How long the review may take before it denies.
    pub timeout: Duration,
    /// The largest held call (its JSON) that is reviewed; larger ones are
    /// denied without a request rather than truncated.
    pub max_call_bytes: usize,
}

impl Default for GuardianConfig {
    /// The agent's model, 90 s, 16 KiB.
    fn default() -> Self {
        Self {
            model: None,
            choice: None,
            timeout: Duration::from_secs(90),
            max_call_bytes: 16 * 1024,
        }
    }
}

/// The guardian's instructions.
pub const GUARDIAN_PROMPT: &str = "You review one tool call that a coding agent wants to run \
without a person's approval. You see only the exact call and factual observations from a \
deterministic checker. You cannot run tools. Judge the risk of running exactly this call in \
the user's workspace: low (routine, reversible, local), medium (changes state but recoverable), \
high (destructive, hard to undo, touches secrets, system files or other machines), critical \
(irreversible damage, data loss, exfiltration, publishing). Do not guess the user's intent beyond \
the call itself. Answer with exactly one JSON object and nothing else: \
{\"risk\": \"low|medium|high|critical\", \"decision\": \"allow|deny\", \"reason\": \"one sentence\"}";

/// The held call, exactly as it would run.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldCall {
    /// The tool.
    pub tool: String,
    /// The arguments, parsed.
    pub arguments: Value,
}

/// A call too large to review; it is denied, never truncated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// Its size in bytes.
    pub bytes: usize,
    /// The limit.
    pub limit: usize,
}

impl TooLarge {
    /// The denial it leads to.
    pub fn decision(&self) -> Decision {
        Decision::new(
            Verdict::Deny,
            Layer::Guardian,
            format!(
                "the call is too large to review ({} bytes, limit {}); split it into smaller calls",
                self.bytes, self.limit
            ),
        )
    }
}

/// The one review request for `call`, or why there is none.
pub fn review_request(
    call: &HeldCall,
    observations: &[String],
    config: &GuardianConfig,
    context: RequestContext,
) -> Result<ModelRequest, TooLarge> {
    let held = json!({"tool": call.tool, "arguments": call.arguments});
    let size = held.to_string().len();
    if size > config.max_call_bytes {
        return Err(TooLarge {
            bytes: size,
            limit: config.max_call_bytes,
        });
    }
    let body = json!({"held_call": held, "observations": observations});
    let message = crate::message::Message::user(body.to_string());
    Ok(ModelRequest {
        system: Arc::from(GUARDIAN_PROMPT),
        history: vec![Arc::new(message)].into(),
        turn: Vec::new(),
        reminder: None,
        tools: Vec::new().into(),
        context,
        model: config.model.as_deref().map(Arc::from),
        single_attempt: true,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    risk: Risk,
    decision: Verdict,
    reason: String,
}

/// Reads the guardian's answer into a decision; anything but a complete,
/// well-formed answer denies.
pub fn read_answer(text: &str) -> Decision {
    let body = unfenced(text.trim());
    let answer: Answer = match serde_json::from_str(body) {
        Ok(answer) => answer,
        Err(err) => {
            return Decision::new(
                Verdict::Deny,
                Layer::Guardian,
                format!("the guardian's answer is malformed ({err}); denied"),
            );
        }
    };
    if answer.reason.trim().is_empty() {
        return Decision::new(
            Verdict::Deny,
            Layer::Guardian,
            "the guardian gave no reason; denied",
        );
    }
    let verdict = match (answer.risk, answer.decision) {
        (Risk::High | Risk::Critical, _) => Verdict::Deny,
        (Risk::Low | Risk::Medium, decision) => decision,
    };
    let reason = if verdict != answer.decision {
        format!(
            "{} risk never runs automatically: {}",
            answer.risk.as_str(),
            answer.reason
        )
    } else {
        answer.reason
    };
    Decision {
        risk: Some(answer.risk),
        ..Decision::new(verdict, Layer::Guardian, reason)
    }
}

/// The body of a single ```json fenced block, or the text itself.
fn unfenced(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").map_or(text, str::trim)
}

/// The denial for a review that could not finish.
pub fn failed(why: &str) -> Decision {
    Decision::new(
        Verdict::Deny,
        Layer::Guardian,
        format!("{why}; denied (fail closed)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(answer: &str, expected: (Verdict, Option<Risk>, &str)) {
        let decision = read_answer(answer);
        assert_eq!(
            (decision.verdict, decision.risk),
            (expected.0, expected.1),
            "{answer}"
        );
        assert!(
            decision.reason.contains(expected.2),
            "{answer}: {}",
            decision.reason
        );
    }

    #[test]
    fn answers_are_read_strictly_and_fail_closed() {
        use Risk::*;
        use Verdict::*;
        check(
            r#"{"risk":"low","decision":"allow","reason":"lists files"}"#,
            (Allow, Some(Low), "lists files"),
        );
        check(
            r#"{"risk":"medium","decision":"deny","reason":"deletes build output"}"#,
            (Deny, Some(Medium), "deletes"),
        );
        check(
            r#"{"risk":"high","decision":"allow","reason":"force push"}"#,
            (Deny, Some(High), "never runs automatically"),
        );
        check(
            r#"{"risk":"critical","decision":"allow","reason":"rm -rf /"}"#,
            (Deny, Some(Critical), "never runs"),
        );
        check(
            "```json\n{\"risk\":\"low\",\"decision\":\"allow\",\"reason\":\"ok\"}\n```",
            (Allow, Some(Low), "ok"),
        );
        check(
            r#"{"risk":"low","decision":"allow"}"#,
            (Deny, None, "malformed"),
        );
        check(
            r#"{"risk":"low","decision":"allow","reason":"  "}"#,
            (Deny, None, "no reason"),
        );
        check(
            r#"{"risk":"none","decision":"allow","reason":"x"}"#,
            (Deny, None, "malformed"),
        );
        check(
            r#"{"risk":"low","decision":"maybe","reason":"x"}"#,
            (Deny, None, "malformed"),
        );
        check(
            r#"Sure! {"risk":"low","decision":"allow","reason":"x"} Hope that helps."#,
            (Deny, None, "malformed"),
        );
        check(
            r#"{"risk":"low","decision":"allow","reason":"x""#,
            (Deny, None, "malformed"),
        );
        check("", (Deny, None, "malformed"));
        check(
            r#"{"risk":"low","decision":"allow","reason":"x","also":"run rm"}"#,
            (Deny, None, "malformed"),
        );
    }

    #[test]
    fn the_request_holds_only_the_call_and_the_observations() {
        let call = HeldCall {
            tool: "bash".into(),
            arguments: json!({"command": "make deploy"}),
        };
        let context = RequestContext {
            agent_id: "a".into(),
            role: "guardian".into(),
            mode: crate::mode::Mode::Work,
            turn: 1,
            iteration: 1,
            session_id: "s".into(),
            workspace: "/w".into(),
            plan_file: "/p".into(),
        };
        let config = GuardianConfig::default();
        let request =
            review_request(&call, &["runs make".into()], &config, context.clone()).expect("small");
        let messages: Vec<_> = request.messages().collect();
        assert_eq!(messages.len(), 1);
        let crate::message::Message::User { content } = messages[0] else {
            panic!("not a user message");
        };
        let body: Value = serde_json::from_str(content).expect("json");
        assert_eq!(
            body,
            json!({"held_call": {"tool": "bash", "arguments": {"command": "make deploy"}}, "observations": ["runs make"]})
        );
        assert!(request.tools.is_empty() && request.single_attempt && request.reminder.is_none());

        let big = HeldCall {
            tool: "write_file".into(),
            arguments: json!({"path": "a", "content": "x".repeat(20_000)}),
        };
        let refused = review_request(&big, &[], &config, context).expect_err("too large");
        assert_eq!(refused.decision().verdict, Verdict::Deny);
    }
}
