//! The plan lifecycle's decisions (PL1, PL4, PL5), with no I/O.
//!
//! Which mode a questionnaire's answer leads to and which message it puts
//! at the front of the queue is decided here, by [`transition`]; the store
//! carries the outcome out in one transaction, and the session asks
//! [`entry_refusal`] and [`submit_refusal`] before it enters Plan or
//! freezes a plan.
//!
//! ```text
//!             /plan on · /mode plan · intent · enter_plan_mode ─(confirmed)─┐
//!                          (refused while a questionnaire waits)            │
//!  Work ──────────────────────────────────────────────────────────────────► Plan
//!   ▲                                                                        │
//!   │ approve: implementation message (instruction + frozen snapshot)       │ exit_plan_mode:
//!   │          at the front of the queue, keyed plan-approval:<id>          │ freeze, SHA-256,
//!   │ withdraw: nothing implemented                                         │ questionnaire,
//!   │                                                                        ▼ turn ends
//!   └──────────────────────────── AwaitingApproval ──── defer: stays in Plan
//!                                         └──────────── revise: feedback, another Plan turn
//! ```

use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::store::Source;

/// The fixed instruction before an approved plan's frozen snapshot (PL6).
pub const IMPLEMENT_INSTRUCTION: &str = "Implement the approved plan below.\n\
Treat the Markdown after the \"Approved plan:\" line as the immutable plan snapshot for this \
implementation turn; it is authoritative.\n\
Do not read the canonical plan file and do not re-derive the plan from anywhere else.\n\n\
If implementation reveals the plan is infeasible or materially wrong (a premise fails, a \
referenced component does not exist, or the work is fundamentally riskier than planned), stop \
and report the mismatch to the user instead of redesigning on your own.\n\
Mechanical adjustments that keep the plan's decisions intact do not require stopping.\n\n\
Approved plan:\n";

/// A mode intent attached to a message (PL1): it takes effect in the
/// message's admission transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeIntent {
    /// Enter Plan with this message.
    PlanEntry,
    /// Leave Plan (back to Work) with this message.
    PlanExit,
}

impl ModeIntent {
    /// The name stored with the message.
    pub fn as_str(self) -> &'static str {
        match self {
            ModeIntent::PlanEntry => "plan_entry",
            ModeIntent::PlanExit => "plan_exit",
        }
    }

    /// The mode the session is in once the message is admitted.
    pub fn mode(self) -> Mode {
        match self {
            ModeIntent::PlanEntry => Mode::Plan,
            ModeIntent::PlanExit => Mode::Work,
        }
    }
}

/// What a questionnaire asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionnaireKind {
    /// Approve the frozen plan for implementation.
    PlanApproval,
    /// Confirm the model's request to enter Plan mode.
    PlanEntry,
}

impl QuestionnaireKind {
    /// The name stored with the questionnaire.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionnaireKind::PlanApproval => "plan_approval",
            QuestionnaireKind::PlanEntry => "plan_entry",
        }
    }
}

/// A person's answer (PL5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum QuestionnaireAnswer {
    /// Implement the plan (or: enter Plan).
    Approve,
    /// Not now: nothing changes.
    Defer,
    /// Revise the plan with this feedback; a follow-up turn runs in Plan.
    Revise {
        /// What to change.
        feedback: String,
    },
    /// Drop it: back to Work, nothing implemented (or: do not enter Plan).
    Withdraw,
}

impl QuestionnaireAnswer {
    /// The questionnaire's stored state once answered so.
    pub fn state(&self) -> &'static str {
        match self {
            QuestionnaireAnswer::Approve => "approved",
            QuestionnaireAnswer::Defer => "deferred",
            QuestionnaireAnswer::Revise { .. } => "revised",
            QuestionnaireAnswer::Withdraw => "withdrawn",
        }
    }

    /// The revision feedback, when it is one.
    pub fn feedback(&self) -> Option<&str> {
        match self {
            QuestionnaireAnswer::Revise { feedback } => Some(feedback),
            QuestionnaireAnswer::Approve
            | QuestionnaireAnswer::Defer
            | QuestionnaireAnswer::Withdraw => None,
        }
    }
}

/// The questionnaire an answer is for, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// Its id (the carried message's idempotency key derives from it).
    pub id: &'a str,
    /// What it asks.
    pub kind: QuestionnaireKind,
    /// Its frozen plan snapshot (empty for an entry confirmation).
    pub snapshot: &'a str,
    /// The snapshot's SHA-256.
    pub sha256: &'a str,
    /// Its stored state: `pending` until answered.
    pub state: &'a str,
}

/// A message an answer puts at the front of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carry {
    /// The text.
    pub content: String,
    /// Who sent it.
    pub source: Source,
    /// Its idempotency key, derived from the questionnaire, so the same
    /// answer given twice admits it once.
    pub key: String,
    /// The plan snapshot's hash, for an implementation message.
    pub plan_sha256: Option<String>,
}

/// What an answer does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Record the answer; switch to `mode` when set; admit `carry` when set.
    Apply {
        /// The session's mode after the answer, when it changes.
        mode: Option<Mode>,
        /// The message the answer sends.
        carry: Option<Carry>,
    },
    /// The same answer was given before: nothing changes.
    Repeated,
    /// A different answer was given before: refused.
    Conflict(String),
}

/// Decides what answering `asked` with `answer` does (PL5).
pub fn transition(asked: Asked<'_>, answer: &QuestionnaireAnswer) -> Transition {
    if asked.state != "pending" {
        return if asked.state == answer.state() {
            Transition::Repeated
        } else {
            Transition::Conflict(format!(
                "questionnaire {} was already answered ({})",
                asked.id, asked.state
            ))
        };
    }
    let id = asked.id;
    let carry = |content: String, source: Source, key: String| {
        Some(Carry {
            content,
            source,
            key,
            plan_sha256: None,
        })
    };
    let (mode, carry) = match (asked.kind, answer) {
        (QuestionnaireKind::PlanApproval, QuestionnaireAnswer::Approve) => (
            Some(Mode::Work),
            Some(Carry {
                content: format!("{IMPLEMENT_INSTRUCTION}{}", asked.snapshot),
                source: Source::Questionnaire,
                key: format!("plan-approval:{id}"),
                plan_sha256: Some(asked.sha256.to_string()),
            }),
        ),
        (QuestionnaireKind::PlanApproval, QuestionnaireAnswer::Defer) => (None, None),
        (QuestionnaireKind::PlanApproval, QuestionnaireAnswer::Revise { feedback }) => (
            None,
            carry(
                format!(
                    "Revise the plan (still in Plan mode), then call exit_plan_mode again. \
                     Feedback on the plan:\n{feedback}"
                ),
                Source::Questionnaire,
                format!("plan-revision:{id}"),
            ),
        ),
        (QuestionnaireKind::PlanApproval, QuestionnaireAnswer::Withdraw) => {
            (Some(Mode::Work), None)
        }
        (QuestionnaireKind::PlanEntry, QuestionnaireAnswer::Approve) => (
            Some(Mode::Plan),
            carry(
                "The user confirmed: Plan mode is on. Investigate, write the plan file, then \
                 call exit_plan_mode."
                    .into(),
                Source::Continuation,
                format!("plan-entry:{id}"),
            ),
        ),
        (QuestionnaireKind::PlanEntry, QuestionnaireAnswer::Revise { feedback }) => (
            None,
            carry(
                format!("The user declined Plan mode for now and said:\n{feedback}"),
                Source::Continuation,
                format!("plan-entry:{id}"),
            ),
        ),
        (
            QuestionnaireKind::PlanEntry,
            QuestionnaireAnswer::Defer | QuestionnaireAnswer::Withdraw,
        ) => (
            None,
            carry(
                "The user declined Plan mode; continue in Work mode.".into(),
                Source::Continuation,
                format!("plan-entry:{id}"),
            ),
        ),
    };
    Transition::Apply { mode, carry }
}

/// Why Plan cannot be entered now (PL1), if it cannot.
pub fn entry_refusal(mode: Mode, pending: Option<&str>) -> Option<String> {
    if let Some(id) = pending {
        return Some(format!(
            "questionnaire {id} waits for an answer: answer it before entering Plan mode"
        ));
    }
    (mode == Mode::Plan).then(|| "the session is already in Plan mode".to_string())
}

/// Why a plan cannot be submitted for approval now (PL4), if it cannot.
pub fn submit_refusal(mode: Mode, queued: usize, pending: Option<&str>) -> Option<String> {
    if mode != Mode::Plan {
        return Some("exit_plan_mode works only in Plan mode".into());
    }
    if queued > 0 {
        return Some(format!(
            "{queued} message(s) wait in the queue; the plan can be submitted only when it is empty"
        ));
    }
    pending.map(|id| format!("questionnaire {id} already waits for an answer"))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn asked(kind: QuestionnaireKind, state: &'static str) -> Asked<'static> {
        Asked {
            id: "q1",
            kind,
            snapshot: "## Summary\nDo it.",
            sha256: "abc",
            state,
        }
    }

    /// The whole table: every kind × every answer, pending.
    #[test]
    fn every_answer_to_every_kind() {
        use QuestionnaireAnswer as A;
        use QuestionnaireKind as K;
        let revise = || A::Revise {
            feedback: "smaller".into(),
        };
        type Case = (K, A, Option<Mode>, Option<(Source, &'static str)>);
        let cases: Vec<Case> = vec![
            (
                K::PlanApproval,
                A::Approve,
                Some(Mode::Work),
                Some((Source::Questionnaire, "plan-approval:q1")),
            ),
            (K::PlanApproval, A::Defer, None, None),
            (
                K::PlanApproval,
                revise(),
                None,
                Some((Source::Questionnaire, "plan-revision:q1")),
            ),
            (K::PlanApproval, A::Withdraw, Some(Mode::Work), None),
            (
                K::PlanEntry,
                A::Approve,
                Some(Mode::Plan),
                Some((Source::Continuation, "plan-entry:q1")),
            ),
            (
                K::PlanEntry,
                A::Defer,
                None,
                Some((Source::Continuation, "plan-entry:q1")),
            ),
            (
                K::PlanEntry,
                revise(),
                None,
                Some((Source::Continuation, "plan-entry:q1")),
            ),
            (
                K::PlanEntry,
                A::Withdraw,
                None,
                Some((Source::Continuation, "plan-entry:q1")),
            ),
        ];
        for (kind, answer, mode, carried) in cases {
            let Transition::Apply { mode: got, carry } =
                transition(asked(kind, "pending"), &answer)
            else {
                panic!("{kind:?} {answer:?} did not apply");
            };
            assert_eq!(got, mode, "{kind:?} {answer:?}");
            assert_eq!(
                carry.as_ref().map(|c| (c.source, c.key.as_str())),
                carried,
                "{kind:?} {answer:?}"
            );
        }
    }

    #[test]
    fn an_approved_plan_carries_the_instruction_snapshot_and_hash() {
        let Transition::Apply {
            carry: Some(carry), ..
        } = transition(
            asked(QuestionnaireKind::PlanApproval, "pending"),
            &QuestionnaireAnswer::Approve,
        )
        else {
            panic!("no implementation message");
        };
        assert_eq!(
            carry.content,
            format!("{IMPLEMENT_INSTRUCTION}## Summary\nDo it.")
        );
        assert_eq!(carry.plan_sha256.as_deref(), Some("abc"));
        let Transition::Apply {
            carry: Some(revision),
            ..
        } = transition(
            asked(QuestionnaireKind::PlanApproval, "pending"),
            &QuestionnaireAnswer::Revise {
                feedback: "smaller".into(),
            },
        )
        else {
            panic!("no revision message");
        };
        assert!(revision.content.ends_with("Feedback on the plan:\nsmaller"));
        assert_eq!(revision.plan_sha256, None);
    }

    #[test]
    fn answered_questionnaires_take_the_same_answer_again_and_refuse_another() {
        let approved = asked(QuestionnaireKind::PlanApproval, "approved");
        assert_eq!(
            transition(approved, &QuestionnaireAnswer::Approve),
            Transition::Repeated
        );
        assert_eq!(
            transition(approved, &QuestionnaireAnswer::Withdraw),
            Transition::Conflict("questionnaire q1 was already answered (approved)".into())
        );
    }

    #[test]
    fn entry_and_submission_are_refused_with_the_reason() {
        assert_eq!(entry_refusal(Mode::Work, None), None);
        assert_eq!(
            entry_refusal(Mode::Plan, None).as_deref(),
            Some("the session is already in Plan mode")
        );
        assert!(entry_refusal(Mode::Work, Some("plan-1")).is_some_and(|r| r.contains("plan-1")));
        assert_eq!(submit_refusal(Mode::Plan, 0, None), None);
        assert!(submit_refusal(Mode::Work, 0, None).is_some());
        assert!(submit_refusal(Mode::Plan, 2, None).is_some_and(|r| r.starts_with("2 message")));
        assert!(
            submit_refusal(Mode::Plan, 0, Some("plan-1")).is_some_and(|r| r.contains("plan-1"))
        );
    }
}
