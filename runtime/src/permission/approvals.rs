//! The bookkeeping of calls that wait for a person or the guardian, with no
//! actors (P3, P5, S3).
//!
//! An agent holds one [`ApprovalBook`]. A call the engine sends to a person
//! becomes a prompt with a typed [`ApprovalId`] (unless the same call was
//! allowed for the session before); one it sends to the guardian becomes a
//! numbered review. Answers, review verdicts and the end of a turn
//! (withdrawing what it left waiting) come back as the held calls with the
//! decision to deliver. `R` is how a decision reaches the waiting call (a
//! reply port); the book never looks into it.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::engine::{Decision, Layer, Verdict};
use crate::agent::{AgentPath, ApprovalId};
use crate::protocol::{ApprovalDecision, ApprovalOutcome};

/// A call waiting for a decision.
#[derive(Debug)]
pub struct Held<R> {
    /// The turn that made it.
    pub turn_id: u64,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The exact arguments.
    pub args: Value,
    /// Where the decision goes.
    pub reply: R,
}

impl<R> Held<R> {
    /// The key under which "allow for session" remembers this exact call.
    fn session_key(&self) -> String {
        format!("{}\u{1f}{}", self.tool, self.args)
    }
}

/// What asking a person led to.
#[derive(Debug)]
pub enum Asked<R> {
    /// The same call was allowed for the session before: deliver this.
    Earlier(Held<R>, Decision),
    /// A prompt is open under this id.
    Prompt(ApprovalId),
}

/// A person's answer, applied.
#[derive(Debug)]
pub struct Answered<R> {
    /// The call it answers.
    pub held: Held<R>,
    /// The decision to deliver.
    pub decision: Decision,
    /// How the prompt ended, for `approval.resolved`.
    pub outcome: ApprovalOutcome,
}

/// What a turn's end withdrew.
#[derive(Debug)]
pub struct Withdrawn<R> {
    /// Prompts nobody answered: each is resolved as withdrawn, and its
    /// call denied.
    pub prompts: Vec<(ApprovalId, Held<R>)>,
    /// Reviews in flight: each guardian is stopped, and its call denied.
    pub reviews: Vec<(u64, Held<R>)>,
}

/// The calls one agent has waiting.
#[derive(Debug)]
pub struct ApprovalBook<R> {
    me: AgentPath,
    allowed_for_session: HashSet<String>,
    prompts: BTreeMap<u64, Held<R>>,
    prompts_made: u64,
    reviews: BTreeMap<u64, Held<R>>,
    reviews_made: u64,
}

impl<R> ApprovalBook<R> {
    /// The book of the agent at `me`.
    pub fn new(me: AgentPath) -> Self {
        Self {
            me,
            allowed_for_session: HashSet::new(),
            prompts: BTreeMap::new(),
            prompts_made: 0,
            reviews: BTreeMap::new(),
            reviews_made: 0,
        }
    }

    /// Asks a person about `held`, unless the same call was allowed for the
    /// session before.
    pub fn ask(&mut self, held: Held<R>) -> Asked<R> {
        if self.allowed_for_session.contains(&held.session_key()) {
            let earlier = Decision::new(
                Verdict::Allow,
                Layer::User,
                "allowed for this session earlier",
            );
            return Asked::Earlier(held, earlier);
        }
        self.prompts_made += 1;
        let n = self.prompts_made;
        self.prompts.insert(n, held);
        Asked::Prompt(ApprovalId {
            agent: self.me.clone(),
            n,
        })
    }

    /// Whether a prompt with this id waits here (not in a descendant).
    pub fn owns(&self, id: &ApprovalId) -> bool {
        id.agent == self.me && self.prompts.contains_key(&id.n)
    }

    /// A person answered prompt `id`; `None` when no such prompt waits here.
    pub fn answer(&mut self, id: &ApprovalId, answer: ApprovalDecision) -> Option<Answered<R>> {
        if id.agent != self.me {
            return None;
        }
        let held = self.prompts.remove(&id.n)?;
        let (decision, outcome) = match answer {
            ApprovalDecision::AllowOnce => (
                Decision::new(Verdict::Allow, Layer::User, "allowed by the user"),
                ApprovalOutcome::AllowOnce,
            ),
            ApprovalDecision::AllowSession => {
                self.allowed_for_session.insert(held.session_key());
                (
                    Decision::new(
                        Verdict::Allow,
                        Layer::User,
                        "allowed by the user for this session",
                    ),
                    ApprovalOutcome::AllowSession,
                )
            }
            ApprovalDecision::Deny => (
                Decision::new(Verdict::Deny, Layer::User, "denied by the user"),
                ApprovalOutcome::Deny,
            ),
        };
        Some(Answered {
            held,
            decision,
            outcome,
        })
    }

    /// Sends `held` to the guardian: the review's number.
    pub fn open_review(&mut self, held: Held<R>) -> u64 {
        self.reviews_made += 1;
        self.reviews.insert(self.reviews_made, held);
        self.reviews_made
    }

    /// The guardian of review `id` answered (or failed); `None` when the
    /// review was already withdrawn.
    pub fn review_done(&mut self, id: u64) -> Option<Held<R>> {
        self.reviews.remove(&id)
    }

    /// Turn `turn_id` ended: everything it left waiting is withdrawn.
    pub fn withdraw(&mut self, turn_id: u64) -> Withdrawn<R> {
        let prompts = drain_turn(&mut self.prompts, turn_id)
            .into_iter()
            .map(|(n, held)| {
                let id = ApprovalId {
                    agent: self.me.clone(),
                    n,
                };
                (id, held)
            })
            .collect();
        let reviews = drain_turn(&mut self.reviews, turn_id);
        Withdrawn { prompts, reviews }
    }

    /// Prompts waiting for a person.
    pub fn waiting(&self) -> usize {
        self.prompts.len()
    }
}

fn drain_turn<R>(held: &mut BTreeMap<u64, Held<R>>, turn_id: u64) -> Vec<(u64, Held<R>)> {
    let ids: Vec<u64> = held
        .iter()
        .filter(|(_, h)| h.turn_id == turn_id)
        .map(|(id, _)| *id)
        .collect();
    ids.into_iter()
        .filter_map(|id| held.remove(&id).map(|h| (id, h)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn held(turn_id: u64, command: &str, reply: u32) -> Held<u32> {
        Held {
            turn_id,
            call_id: format!("c{reply}"),
            tool: "bash".into(),
            args: json!({ "command": command }),
            reply,
        }
    }

    fn prompt(asked: Asked<u32>) -> ApprovalId {
        match asked {
            Asked::Prompt(id) => id,
            Asked::Earlier(..) => panic!("expected a prompt"),
        }
    }

    #[test]
    fn prompts_get_ids_under_the_asking_agent() {
        let mut book = ApprovalBook::new("1.2".parse().expect("path"));
        let first = prompt(book.ask(held(1, "make", 1)));
        let second = prompt(book.ask(held(1, "make", 2)));
        assert_eq!(first.to_string(), "agent:1.2:approval:1");
        assert_eq!(second.to_string(), "agent:1.2:approval:2");
        assert!(book.owns(&first));
        assert!(!book.owns(&"approval:1".parse().expect("id")));
        assert_eq!(book.waiting(), 2);
    }

    #[test]
    fn each_answer_decides_once_and_allow_for_session_remembers_the_exact_call() {
        let mut book = ApprovalBook::new(AgentPath::root());
        let id = prompt(book.ask(held(1, "make test", 1)));
        let answered = book
            .answer(&id, ApprovalDecision::AllowSession)
            .expect("waits");
        assert_eq!(answered.held.reply, 1);
        assert_eq!(answered.decision.verdict, Verdict::Allow);
        assert_eq!(answered.outcome, ApprovalOutcome::AllowSession);
        assert!(
            book.answer(&id, ApprovalDecision::Deny).is_none(),
            "answered twice"
        );
        match book.ask(held(2, "make test", 2)) {
            Asked::Earlier(h, d) => assert_eq!((h.reply, d.verdict), (2, Verdict::Allow)),
            Asked::Prompt(id) => panic!("asked again: {id}"),
        }
        let other = prompt(book.ask(held(2, "make install", 3)));
        let denied = book.answer(&other, ApprovalDecision::Deny).expect("waits");
        assert_eq!(
            (denied.decision.verdict, denied.outcome),
            (Verdict::Deny, ApprovalOutcome::Deny)
        );
    }

    #[test]
    fn allow_once_does_not_carry_over() {
        let mut book = ApprovalBook::new(AgentPath::root());
        let id = prompt(book.ask(held(1, "make", 1)));
        assert!(book.answer(&id, ApprovalDecision::AllowOnce).is_some());
        assert!(matches!(book.ask(held(1, "make", 2)), Asked::Prompt(_)));
    }

    #[test]
    fn a_turns_end_withdraws_only_its_own_prompts_and_reviews() {
        let mut book = ApprovalBook::new(AgentPath::root());
        let a = prompt(book.ask(held(1, "a", 1)));
        let b = prompt(book.ask(held(2, "b", 2)));
        let r1 = book.open_review(held(1, "c", 3));
        let r2 = book.open_review(held(2, "d", 4));
        let withdrawn = book.withdraw(1);
        let prompts: Vec<(String, u32)> = withdrawn
            .prompts
            .iter()
            .map(|(id, h)| (id.to_string(), h.reply))
            .collect();
        assert_eq!(prompts, [(a.to_string(), 1)]);
        let reviews: Vec<(u64, u32)> = withdrawn
            .reviews
            .iter()
            .map(|(id, h)| (*id, h.reply))
            .collect();
        assert_eq!(reviews, [(r1, 3)]);
        assert!(
            book.review_done(r1).is_none(),
            "a withdrawn review cannot decide"
        );
        assert_eq!(book.review_done(r2).map(|h| h.reply), Some(4));
        assert!(book.answer(&b, ApprovalDecision::AllowOnce).is_some());
    }

    #[test]
    fn an_answer_for_another_agent_is_not_taken_here() {
        let mut book = ApprovalBook::new(AgentPath::root());
        let _ = prompt(book.ask(held(1, "a", 1)));
        let theirs: ApprovalId = "agent:1:approval:1".parse().expect("id");
        assert!(book.answer(&theirs, ApprovalDecision::AllowOnce).is_none());
        assert_eq!(book.waiting(), 1);
    }
}
