//! Generated sequences of inputs: whatever arrives in whatever order, an
//! agent runs one turn at a time, answers every request exactly once, and
//! asks the store only as its last effect.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;

use super::super::*;
use crate::Mode;
use crate::goal::GoalAction;
use crate::goal::VerifierOutcome;
use crate::permission::{Decision, Evaluation, Layer, Posture, Verdict};
use crate::protocol::{ApprovalDecision, Event, Op, Usage};
use crate::store::AnswerOutcome;

/// One thing that may happen to a session.
#[derive(Debug, Clone)]
enum Happening {
    Message,
    EndTurn { failed: bool },
    Ask { stale: bool },
    Review,
    Reviewed(u64),
    Approve(u64, u8),
    Cancel,
    Shutdown,
    Goal,
    Verdict,
    Mode(bool),
    Compact,
    Status,
}

fn happening() -> impl Strategy<Value = Happening> {
    prop_oneof![
        4 => Just(Happening::Message),
        4 => any::<bool>().prop_map(|failed| Happening::EndTurn { failed }),
        3 => any::<bool>().prop_map(|stale| Happening::Ask { stale }),
        2 => Just(Happening::Review),
        2 => (1u64..6).prop_map(Happening::Reviewed),
        3 => ((1u64..6), any::<u8>()).prop_map(|(n, d)| Happening::Approve(n, d)),
        1 => Just(Happening::Cancel),
        1 => Just(Happening::Shutdown),
        1 => Just(Happening::Goal),
        2 => Just(Happening::Verdict),
        1 => any::<bool>().prop_map(Happening::Mode),
        1 => Just(Happening::Compact),
        1 => Just(Happening::Status),
    ]
}

/// What the sequence has seen, checked after every step.
#[derive(Default)]
struct Watch {
    /// The turn whose actor runs (spawned, not yet ended).
    live: Option<u64>,
    last_turn: u64,
    /// Answers per ticket.
    answers: BTreeMap<u64, u32>,
    /// Tickets handed in.
    tickets: u64,
    stopped: bool,
    rows: i64,
}

impl Watch {
    fn ticket(&mut self) -> Ticket {
        self.tickets += 1;
        Ticket(self.tickets)
    }

    /// Steps the core, answering its store trips, and checks each step.
    fn feed(&mut self, core: &mut AgentCore, input: AgentInput, fail: bool) {
        let mut input = Some(input);
        while let Some(next) = input.take() {
            let effects = core.step(next, Instant::now());
            for (i, effect) in effects.iter().enumerate() {
                match effect {
                    AgentEffect::Ask(ask) => {
                        assert_eq!(i, effects.len() - 1, "an ask is the last effect");
                        input = Some(AgentInput::Store(self.answer(ask, fail)));
                    }
                    AgentEffect::SpawnTurn(start) => {
                        assert!(!self.stopped, "a turn after the stop");
                        assert_eq!(self.live, None, "two turns at once");
                        assert!(start.turn_id > self.last_turn, "turn ids go up");
                        self.live = Some(start.turn_id);
                        self.last_turn = start.turn_id;
                    }
                    AgentEffect::Reply { ticket, .. } | AgentEffect::Drop(ticket) => {
                        let n = self.answers.entry(ticket.0).or_default();
                        *n += 1;
                        assert_eq!(*n, 1, "ticket {} answered twice", ticket.0);
                    }
                    AgentEffect::Stop => self.stopped = true,
                    _ => {}
                }
            }
        }
    }

    fn answer(&mut self, ask: &Ask, fail: bool) -> Answer {
        let failure = || crate::store::StoreError::Sql("generated".into());
        self.rows += 1;
        match ask {
            Ask::Admit { .. } if fail => Answer::Admitted(Err(failure())),
            Ask::Admit { .. } => Answer::Admitted(Ok((self.rows, None))),
            Ask::StartTurn { .. } if fail => Answer::Started(Err(failure())),
            Ask::StartTurn { .. } => Answer::Started(Ok(())),
            Ask::FinishTurn(_) if fail => Answer::Finished(Err(failure())),
            Ask::FinishTurn(_) => Answer::Finished(Ok(())),
            Ask::Continue { .. } => Answer::Continued(Ok(self.rows)),
            Ask::EnterPlan => Answer::Entered(Ok(None)),
            Ask::Answer { .. } => Answer::Answered(Ok(AnswerOutcome {
                mode: Mode::Work,
                admitted: None,
                new: true,
            })),
            Ask::Pending => Answer::Pending(Ok(Vec::new())),
            Ask::OpenQuestionnaire { .. } => Answer::Opened(Ok(())),
        }
    }
}

fn input_for(happening: &Happening, core: &AgentCore, watch: &mut Watch) -> Option<AgentInput> {
    let running = core.queue().running().map(|r| r.turn_id);
    let op = |op: Op| AgentInput::Op { op, cause: None };
    Some(match happening {
        Happening::Message => op(Op::user("go")),
        Happening::EndTurn { failed } => {
            let turn_id = watch.live.take()?;
            let ending = if *failed {
                Event::TurnFailed {
                    turn_id,
                    category: crate::protocol::FailureCategory::Agent,
                    message: "x".into(),
                    retryable: false,
                    usage: Usage::default(),
                    iterations: 1,
                }
            } else {
                Event::TurnCompleted {
                    turn_id,
                    usage: Usage::default(),
                    iterations: 1,
                    context: None,
                }
            };
            AgentInput::TurnEnded {
                turn_id,
                ending: Some(ending),
            }
        }
        Happening::Ask { stale } => AgentInput::Authorize {
            ticket: watch.ticket(),
            turn_id: if *stale { 0 } else { running.unwrap_or(0) },
            call: CallAsked {
                call_id: "c".into(),
                tool: "bash".into(),
                args: serde_json::json!({"command": watch.tickets}),
                refused: None,
                preview: None,
            },
            evaluation: Some(Evaluation::AskPerson {
                reason: "asks".into(),
                rule: None,
            }),
            posture: Posture::Suggest,
        },
        Happening::Review => AgentInput::Authorize {
            ticket: watch.ticket(),
            turn_id: running.unwrap_or(0),
            call: CallAsked {
                call_id: "c".into(),
                tool: "bash".into(),
                args: serde_json::json!({}),
                refused: None,
                preview: None,
            },
            evaluation: Some(Evaluation::Review {
                observations: Vec::new(),
            }),
            posture: Posture::Auto,
        },
        Happening::Reviewed(n) => AgentInput::Reviewed {
            review_id: *n,
            decision: Decision::new(Verdict::Deny, Layer::Guardian, "no"),
        },
        Happening::Approve(n, d) => op(Op::Approve {
            id: format!("approval:{n}"),
            decision: match d % 3 {
                0 => ApprovalDecision::AllowOnce,
                1 => ApprovalDecision::AllowSession,
                _ => ApprovalDecision::Deny,
            },
            reason: None,
        }),
        Happening::Cancel => op(Op::Cancel),
        Happening::Shutdown => op(Op::Shutdown),
        Happening::Goal => op(Op::Goal {
            action: Box::new(GoalAction::Set {
                objective: "finish".into(),
                budgets: Default::default(),
                settings: Default::default(),
            }),
        }),
        Happening::Verdict => AgentInput::Verdict {
            turn_id: core.goal().verifying()?,
            outcome: VerifierOutcome::Cancelled,
            usage: Default::default(),
        },
        Happening::Mode(plan) => op(Op::SetMode {
            mode: if *plan { Mode::Plan } else { Mode::Work },
        }),
        Happening::Compact => op(Op::Compact),
        Happening::Status => op(Op::Status),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn one_turn_at_a_time_and_every_request_answered_once(
        happenings in prop::collection::vec((happening(), prop::bool::weighted(0.1)), 1..60),
    ) {
        let mut core = super::core_of(true, true);
        let mut watch = Watch::default();
        for (happening, fail) in &happenings {
            if let Some(input) = input_for(happening, &core, &mut watch) {
                watch.feed(&mut core, input, *fail);
            }
        }
        // Wind down: end what runs, let verifications go, until idle.
        for _ in 0..16 {
            if let Some(turn_id) = core.goal().verifying() {
                let verdict = AgentInput::Verdict {
                    turn_id,
                    outcome: VerifierOutcome::Cancelled,
                    usage: Default::default(),
                };
                watch.feed(&mut core, verdict, false);
            }
            match watch.live.take() {
                Some(turn_id) => {
                    let ended = AgentInput::TurnEnded { turn_id, ending: None };
                    watch.feed(&mut core, ended, false);
                }
                None => break,
            }
        }
        let shutdown = AgentInput::Op { op: Op::Shutdown, cause: None };
        watch.feed(&mut core, shutdown, false);
        if let Some(turn_id) = watch.live.take() {
            watch.feed(&mut core, AgentInput::TurnEnded { turn_id, ending: None }, false);
        }
        prop_assert!(!core.is_waiting());
        // Every call asked about was answered (or withdrawn) exactly once.
        for ticket in 1..=watch.tickets {
            prop_assert_eq!(watch.answers.get(&ticket).copied(), Some(1), "ticket {}", ticket);
        }
    }
}
