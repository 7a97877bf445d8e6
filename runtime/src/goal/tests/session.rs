//! [`GoalSession`] through one helper: a table of inputs, each with the
//! effects it must produce, rendered as short lines. The harness plays the
//! session around the machine: it numbers turns, queues what the machine
//! admits, and records each turn's reply in the conversation.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::super::{
    Budgets, ContinuationHeader, ContinuationKind, Dependencies, GoalAction, GoalCommand,
    GoalSettings, Proposal, Verdict, VerifyMode,
};
use crate::goal::{Gate, GoalEffect, GoalSession, Surroundings, VerifierOutcome};
use crate::lifecycle::Queued;
use crate::message::Message;
use crate::protocol::{Event, FailureCategory, Usage};
use crate::tool::GoalToolRequest;

/// One thing that happens to the session.
#[derive(Debug, Clone)]
enum In {
    /// A person's `/goal`.
    Op(GoalAction),
    /// A person's message starts a turn.
    User,
    /// The oldest message the machine admitted starts a turn.
    Next,
    /// The running turn ends: completed (`true`) or failed, spending
    /// tokens.
    End(bool, u64),
    /// The verifier answers the pending claim.
    Verdict(VerifierOutcome),
    /// A verifier's answer for a turn that holds nothing.
    StaleVerdict,
    /// A goal tool call in the running turn.
    Tool(GoalToolRequest),
    /// A background sub-agent ended.
    Kick,
    /// The session resumed.
    Resumed,
    /// A person's message waits in the queue (`true`), or no longer.
    Waiting(bool),
    /// What the goal would wait for changes.
    Depends(Dependencies),
}

/// The session around the machine.
struct Harness {
    goal: GoalSession,
    /// A turn runs.
    running: bool,
    /// A person's message waits in the queue.
    person_waiting: bool,
    dependencies: Dependencies,
    turn: u64,
    /// What the machine admitted and has not started.
    queued: VecDeque<Queued>,
    conversation: Vec<Arc<Message>>,
    now: Instant,
}

impl Harness {
    fn new(enabled: bool) -> Self {
        Self {
            goal: GoalSession::new(enabled),
            running: false,
            person_waiting: false,
            dependencies: Dependencies::default(),
            turn: 0,
            queued: VecDeque::new(),
            conversation: Vec::new(),
            now: Instant::now(),
        }
    }

    /// The surroundings as the session's queue would say them.
    fn at(&self) -> Surroundings {
        let queue_empty = self.queued.is_empty() && !self.person_waiting;
        Surroundings {
            queue_empty,
            would_start_now: queue_empty && !self.running && self.goal.verifying().is_none(),
            dependencies: self.dependencies,
        }
    }

    /// Steps the machine with one input; the effects as lines.
    fn step(&mut self, input: In) -> Vec<String> {
        self.now += Duration::from_secs(1);
        let at = self.at();
        let effects = match input {
            In::Op(action) => self.goal.op(action, &at),
            In::User => self.start(Queued {
                id: None,
                text: "please".into(),
                interrupted: false,
                cause: None,
                internal: false,
            }),
            In::Next => match self.queued.pop_front() {
                Some(message) => self.start(message),
                None => vec![GoalEffect::Note("nothing queued".into())],
            },
            In::End(completed, tokens) => {
                let content = format!("worked in turn {}", self.turn);
                let reply = Message::Assistant {
                    content,
                    tool_calls: Vec::new(),
                };
                self.goal.recorded(&reply);
                self.conversation.push(Arc::new(reply));
                let usage = Usage {
                    prompt_tokens: tokens,
                    ..Usage::default()
                };
                let ending = match completed {
                    true => Event::TurnCompleted {
                        turn_id: self.turn,
                        usage,
                        iterations: 1,
                        context: None,
                    },
                    false => Event::TurnFailed {
                        turn_id: self.turn,
                        category: FailureCategory::Agent,
                        message: "x".into(),
                        retryable: false,
                        usage,
                        iterations: 1,
                    },
                };
                self.running = false;
                let at = self.at();
                let step = self.goal.settle(self.turn, Some(&ending), &at, self.now);
                assert_eq!(step.holds_queue, self.goal.verifying().is_some());
                let mut effects = step.effects;
                if step.holds_queue {
                    effects.push(GoalEffect::Note("holds the queue".into()));
                }
                effects
            }
            In::Verdict(outcome) => {
                let turn = self.goal.verifying().expect("a claim waits");
                let effects = self
                    .goal
                    .verdict(turn, &outcome, super::spent(7), &at, self.now);
                effects.expect("the claim's verdict is taken")
            }
            In::StaleVerdict => {
                let outcome = VerifierOutcome::Verdict(Verdict::Pass);
                match self
                    .goal
                    .verdict(self.turn + 100, &outcome, super::spent(7), &at, self.now)
                {
                    Some(effects) => effects,
                    None => vec![GoalEffect::Note("stale".into())],
                }
            }
            In::Tool(request) => {
                let (outcome, mut effects) = self.goal.tool(request);
                let said = match outcome {
                    Ok(text) => format!("tool ok: {}", first_words(&text)),
                    Err(err) => format!("tool error: {}", first_words(&err.to_string())),
                };
                effects.insert(0, GoalEffect::Note(said));
                effects
            }
            In::Kick => self.goal.kick(&at),
            In::Resumed => self.goal.resumed(&at),
            In::Waiting(waiting) => {
                self.person_waiting = waiting;
                Vec::new()
            }
            In::Depends(dependencies) => {
                self.dependencies = dependencies;
                Vec::new()
            }
        };
        effects.into_iter().map(|e| self.line(e)).collect()
    }

    /// A message starts a turn, unless the gate skips it.
    fn start(&mut self, message: Queued) -> Vec<GoalEffect> {
        self.turn += 1;
        let at = self.at();
        let seq = self.conversation.len();
        match self.goal.gate(&message, &at, seq, self.now) {
            Gate::Run => {
                self.running = true;
                vec![GoalEffect::Note(format!("runs turn {}", self.turn))]
            }
            Gate::Skip(effects) => effects,
        }
    }

    fn line(&mut self, effect: GoalEffect) -> String {
        match effect {
            GoalEffect::Store(goal) => format!("store {} r{}", goal.label(), goal.revision),
            GoalEffect::Forget => "forget".into(),
            GoalEffect::Emit(Event::GoalUpdated { status, reason, .. }) => {
                format!("updated {status} {}", reason.as_str())
            }
            GoalEffect::Emit(Event::GoalVerification { verdict, gaps, .. }) => {
                format!("verification {verdict} {gaps:?}")
            }
            GoalEffect::Emit(other) => format!("emit {other:?}"),
            GoalEffect::Reject(why) => format!("reject: {why}"),
            GoalEffect::Admit { text, n, goal } => {
                let header = ContinuationHeader::parse(&text).expect("a header");
                assert_eq!((header.n, header.revision), (n, goal.revision));
                self.queued.push_back(Queued {
                    id: Some(n as i64),
                    text,
                    interrupted: false,
                    cause: None,
                    internal: true,
                });
                let kind = match header.kind {
                    ContinuationKind::Continue => "continuation",
                    ContinuationKind::Summary => "summary",
                };
                format!("admit {kind} {n}")
            }
            GoalEffect::MarkDone { queue_id } => format!("done {queue_id:?}"),
            GoalEffect::Verify { turn_id, claim, .. } => format!("verify turn {turn_id}: {claim}"),
            GoalEffect::EndTurn => "end turn".into(),
            GoalEffect::Note(why) => why,
        }
    }
}

/// The first four words of a message.
fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Steps a fresh session machine through `cases`, each input with the
/// lines it must produce.
fn check(cases: &[(In, &[&str])]) {
    check_in(Harness::new(true), cases);
}

fn check_in(mut harness: Harness, cases: &[(In, &[&str])]) {
    for (i, (input, expected)) in cases.iter().enumerate() {
        let got = harness.step(input.clone());
        assert_eq!(got, *expected, "step {i}: {input:?}");
    }
}

fn set(objective: &str) -> In {
    set_with(objective, Budgets::default(), VerifyMode::Subagent)
}

fn set_with(objective: &str, budgets: Budgets, verify: VerifyMode) -> In {
    In::Op(GoalAction::Set {
        objective: objective.into(),
        budgets,
        settings: GoalSettings {
            verify,
            ..GoalSettings::default()
        },
    })
}

fn propose() -> In {
    In::Tool(GoalToolRequest::Propose(Proposal::Complete {
        claim: "the tests pass".into(),
    }))
}

fn verdict(verdict: Verdict) -> In {
    In::Verdict(VerifierOutcome::Verdict(verdict))
}

const SET: &[&str] = &["store active(created) r1", "updated active created"];

/// `SET` and the first continuation admitted.
const SET_AND_GO: &[&str] = &[
    "store active(created) r1",
    "updated active created",
    "admit continuation 1",
];

/// A claim made against revision 1 goes to the verifier.
const CLAIMED: &[&str] = &[
    "store active(created) r1",
    "updated active created",
    "verify turn 1: the tests pass",
    "holds the queue",
];

/// The first continuation runs and claims completion.
fn claimed() -> Vec<(In, &'static [&'static str])> {
    vec![
        (set("ship it"), SET_AND_GO),
        (In::Next, &["runs turn 1"]),
        (
            propose(),
            &["tool ok: completion proposed. This turn", "end turn"],
        ),
        (In::End(true, 10), CLAIMED),
    ]
}

#[test]
fn a_goal_set_while_idle_starts_work_and_one_set_during_a_turn_waits_for_it() {
    check(&[
        (set("ship it"), SET_AND_GO),
        (In::Next, &["runs turn 1"]),
        (
            In::End(true, 10),
            &[
                "store active(created) r1",
                "updated active created",
                "admit continuation 2",
            ],
        ),
    ]);
    check(&[
        (In::User, &["runs turn 1"]),
        (set("ship it"), SET),
        // The goal was made during the turn: work starts when it ends.
        (In::End(true, 10), &["admit continuation 1"]),
    ]);
}

#[test]
fn a_person_is_refused_what_the_goal_cannot_do() {
    check(&[
        (
            In::Op(GoalAction::Show),
            &["reject: this session has no goal"],
        ),
        (
            In::Op(GoalAction::Clear),
            &["reject: this session has no goal"],
        ),
        (set("  "), &["reject: the objective is empty"]),
        (In::User, &["runs turn 1"]),
        (set("one"), SET),
        (
            set("two"),
            &[
                "reject: this session already has a goal (active(created)): edit it, or clear it first",
            ],
        ),
        (In::Op(GoalAction::Show), &["updated active created"]),
        (
            In::Op(GoalAction::Command {
                command: GoalCommand::Pause,
            }),
            &[
                "store paused(user_requested) r2",
                "updated paused user_requested",
            ],
        ),
        (In::Op(GoalAction::Clear), &["forget", "emit GoalCleared"]),
    ]);
}

#[test]
fn a_sub_agents_machine_has_no_goal_and_gates_nothing() {
    check_in(
        Harness::new(false),
        &[
            (set("x"), &["reject: only a session has a goal"]),
            (In::User, &["runs turn 1"]),
            (In::End(true, 5), &[]),
            (In::Kick, &[]),
        ],
    );
}

#[test]
fn a_claim_holds_the_queue_until_its_verdict_and_a_pass_completes() {
    let mut cases = claimed();
    cases.extend([
        // Nothing continues while the verifier works, and an answer for
        // another turn changes nothing.
        (In::Kick, &[][..]),
        (In::StaleVerdict, &["stale"][..]),
        (
            verdict(Verdict::Pass),
            &[
                "verification pass []",
                "store complete(verifier_met) r1",
                "updated complete verifier_met",
            ][..],
        ),
        (In::Kick, &[][..]),
    ]);
    check(&cases);
}

#[test]
fn a_failed_verdict_sends_its_gaps_back_as_the_next_continuation() {
    let mut cases = claimed();
    cases.push((
        verdict(Verdict::Fail(vec!["no test for b".into()])),
        &[
            "verification fail [\"no test for b\"]",
            "store active(created) r1",
            "updated active created",
            "admit continuation 2",
        ],
    ));
    check(&cases);
}

#[test]
fn a_stopped_verifier_pauses_the_goal() {
    let mut cases = claimed();
    cases.push((
        In::Verdict(VerifierOutcome::Cancelled),
        &[
            "verification unavailable [\"cancelled\"]",
            "store paused(user_requested) r1",
            "updated paused user_requested",
        ],
    ));
    check(&cases);
}

#[test]
fn a_spent_budget_ends_with_the_summary_turn() {
    let budgets = Budgets {
        tokens: Some(100),
        ..Budgets::default()
    };
    check(&[
        (
            set_with("ship it", budgets, VerifyMode::Subagent),
            SET_AND_GO,
        ),
        (In::Next, &["runs turn 1"]),
        (
            In::End(true, 150),
            &[
                "store budget_limited(tokens) r1",
                "updated budget_limited tokens",
                "admit summary 2",
            ],
        ),
        (In::Next, &["runs turn 2"]),
        (
            In::End(true, 5),
            &[
                "store budget_limited(tokens) r1",
                "updated budget_limited tokens",
            ],
        ),
    ]);
}

#[test]
fn a_continuation_for_an_edited_goal_is_dropped_and_one_behind_a_question_waits() {
    check(&[
        (set("ship it"), SET_AND_GO),
        // A person edits the goal before the continuation runs.
        (
            In::Op(GoalAction::Command {
                command: GoalCommand::Edit {
                    objective: "ship it well".into(),
                },
            }),
            &["store active(created) r2", "updated active created"],
        ),
        (
            In::Next,
            &[
                "continuation dropped: the goal changed after this continuation was written",
                "done Some(1)",
            ],
        ),
        (In::Kick, &["admit continuation 2"]),
        (
            In::Depends(Dependencies {
                questionnaire: true,
                ..Dependencies::default()
            }),
            &[],
        ),
        (
            In::Next,
            &[
                "continuation waits: a plan questionnaire waits for an answer",
                "done Some(2)",
            ],
        ),
    ]);
}

#[test]
fn a_resumed_active_goal_continues_and_a_busy_one_does_not() {
    check(&[
        (In::User, &["runs turn 1"]),
        (set("ship it"), SET),
        (In::Resumed, &[]),
        (In::End(true, 1), &["admit continuation 1"]),
        (In::Next, &["runs turn 2"]),
        (
            In::End(false, 1),
            &["store paused(turn_failed) r1", "updated paused turn_failed"],
        ),
        (In::Resumed, &[]),
    ]);
    check(&[
        (In::Waiting(true), &[]),
        (set("ship it"), SET),
        (In::Resumed, &[]),
        (In::Waiting(false), &[]),
        (In::Resumed, &["admit continuation 1"]),
    ]);
}

#[test]
fn goal_tools_answer_by_turn_kind() {
    check(&[
        (In::User, &["runs turn 1"]),
        (
            In::Tool(GoalToolRequest::Create {
                objective: "ship it".into(),
                token_budget: Some(5000),
            }),
            &[
                "tool ok: goal set: ship it.",
                "store active(created) r1",
                "updated active created",
            ],
        ),
        (
            In::Tool(GoalToolRequest::Get),
            &["tool ok: objective: ship it status:"],
        ),
        (
            In::Tool(GoalToolRequest::TokenBudget(Some(9000))),
            &[
                "tool ok: token budget set to",
                "store active(created) r2",
                "updated active created",
            ],
        ),
        // The model's own budget change made the turn the goal's: it is
        // settled (its tokens count) and work continues.
        (
            In::End(true, 10),
            &[
                "store active(created) r2",
                "updated active created",
                "admit continuation 1",
            ],
        ),
        (In::Next, &["runs turn 2"]),
        (
            In::Tool(GoalToolRequest::Create {
                objective: "another".into(),
                token_budget: None,
            }),
            &["tool error: failed: create_goal works only"],
        ),
        (
            In::Tool(GoalToolRequest::TokenBudget(None)),
            &["tool error: tool_not_allowed: token_budget can change"],
        ),
    ]);
}

#[test]
fn a_person_waiting_goes_before_the_next_continuation() {
    check(&[
        (set("ship it"), SET_AND_GO),
        (In::Next, &["runs turn 1"]),
        (In::Waiting(true), &[]),
        (
            In::End(true, 10),
            &["store active(created) r1", "updated active created"],
        ),
    ]);
}

/// Every input, in any order, from any state.
fn input() -> impl Strategy<Value = In> {
    prop_oneof![
        Just(set("ship it")),
        Just(In::Op(GoalAction::Clear)),
        Just(In::Op(GoalAction::Command {
            command: GoalCommand::Pause
        })),
        Just(In::Op(GoalAction::Command {
            command: GoalCommand::Resume
        })),
        Just(In::User),
        Just(In::Next),
        (any::<bool>(), 0u64..200).prop_map(|(ok, tokens)| In::End(ok, tokens)),
        Just(verdict(Verdict::Pass)),
        Just(verdict(Verdict::Fail(vec!["gap".into()]))),
        Just(In::Verdict(VerifierOutcome::Cancelled)),
        Just(In::StaleVerdict),
        Just(propose()),
        Just(In::Kick),
        Just(In::Resumed),
        any::<bool>().prop_map(In::Waiting),
    ]
}

proptest! {
    /// Whatever happens: a claim holds the queue exactly while it waits,
    /// nothing is admitted or verified while a claim waits, continuations
    /// are numbered in order, and a stale verdict changes nothing.
    #[test]
    fn the_machine_keeps_its_promises_under_any_sequence(inputs in prop::collection::vec(input(), 1..60)) {
        let mut harness = Harness::new(true);
        let mut last_n = 0;
        for input in inputs {
            // Inputs only a session in the right state sees.
            let valid = match &input {
                In::Verdict(_) => harness.goal.verifying().is_some(),
                In::End(..) | In::Tool(_) => harness.running,
                In::User => !harness.running && harness.goal.verifying().is_none(),
                In::Next => {
                    !harness.running && harness.goal.verifying().is_none() && !harness.queued.is_empty()
                }
                _ => true,
            };
            if !valid {
                continue;
            }
            let waiting = harness.goal.verifying().is_some();
            if matches!(input, In::Op(GoalAction::Clear)) {
                last_n = 0;
                harness.queued.clear();
            }
            let lines = harness.step(input.clone());
            // A new goal counts its continuations from 1.
            if lines.first().is_some_and(|l| l.starts_with("store active(created) r1")) {
                last_n = 0;
            }
            for line in &lines {
                let admitted = line
                    .strip_prefix("admit continuation ")
                    .or(line.strip_prefix("admit summary "));
                if let Some(n) = admitted {
                    let n: u64 = n.parse().unwrap();
                    prop_assert!(n > last_n, "{lines:?}");
                    last_n = n;
                    prop_assert!(harness.goal.verifying().is_none(), "admitted while verifying: {lines:?}");
                }
                if waiting && !matches!(input, In::Verdict(_)) {
                    prop_assert!(!line.starts_with("verify"), "{lines:?}");
                }
            }
            if matches!(input, In::StaleVerdict) {
                prop_assert_eq!(lines, vec!["stale".to_string()]);
            }
        }
    }
}
