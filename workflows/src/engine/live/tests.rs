use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn steps(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn answer(id: &str) -> Answer {
    Answer {
        id: id.to_string(),
        decision: ApprovalDecision::AllowOnce,
        reason: None,
    }
}

#[test]
fn an_answer_goes_to_the_one_run_of_its_session_that_has_the_step() {
    let mut live: Delegations<&str> = Delegations::default();
    let a = live.admit("A", steps(&["w", "x"])).expect("admitted");
    let b = live
        .admit("B", steps(&["w"]))
        .expect("another session may reuse names");
    let c = live.admit("A", steps(&["y"])).expect("disjoint names");
    assert!(live.started(a, "run-a").is_empty());
    assert!(live.started(b, "run-b").is_empty());
    assert!(live.started(c, "run-c").is_empty());

    let id = "step:w[0]:approval:1";
    assert_eq!(live.route("A", answer(id)), Routed::To("run-a", answer(id)));
    assert_eq!(live.route("B", answer(id)), Routed::To("run-b", answer(id)));
    let sub = "step:y[2]:agent:1:approval:3";
    assert_eq!(
        live.route("A", answer(sub)),
        Routed::To("run-c", answer(sub))
    );
    // Nobody of B's has `y`, and nobody at all has `z`.
    assert_eq!(live.route("B", answer(sub)), Routed::Nobody(answer(sub)));
    let z = "step:z[0]:approval:1";
    assert_eq!(live.route("A", answer(z)), Routed::Nobody(answer(z)));
    // Not a step's id at all.
    assert_eq!(
        live.route("A", answer("step:w")),
        Routed::Nobody(answer("step:w"))
    );
    live.ended(a);
    assert_eq!(live.route("A", answer(id)), Routed::Nobody(answer(id)));
}

#[test]
fn a_run_sharing_a_step_name_with_one_in_progress_is_refused_until_it_ends() {
    let mut live: Delegations<&str> = Delegations::default();
    let a = live
        .admit("A", steps(&["build", "test"]))
        .expect("admitted");
    let clash = live
        .admit("A", steps(&["test", "lint", "build"]))
        .expect_err("shares names");
    assert_eq!(clash.steps, vec!["build".to_string(), "test".to_string()]);
    let text = clash.to_string();
    assert!(text.contains("'build', 'test'"), "{text}");
    assert!(text.contains("Nothing ran"), "{text}");
    // A run that asks nobody reserves nothing, and is never answered.
    let quiet = live.admit("A", BTreeSet::new()).expect("admitted");
    live.started(quiet, "quiet");
    live.ended(a);
    live.admit("A", steps(&["test"]))
        .expect("the names are free again");
}

#[test]
fn names_a_host_keeps_for_its_own_run_block_delegated_runs_and_are_not_routed() {
    let mut live: Delegations<&str> = Delegations::default();
    let kept = live.reserve("A", steps(&["w"])).expect("reserved");
    let taken = live.admit("A", steps(&["w", "v"])).expect_err("kept");
    assert_eq!(taken.steps, vec!["w".to_string()]);
    live.admit("B", steps(&["w"]))
        .expect("another session's names are its own");
    // The host answers its own run's prompts: nothing is routed or held.
    let id = "step:w[0]:approval:1";
    assert_eq!(live.route("A", answer(id)), Routed::Nobody(answer(id)));
    assert!(live.started(kept, "ignored").is_empty());
    assert_eq!(live.route("A", answer(id)), Routed::Nobody(answer(id)));
    live.ended(kept);
    live.admit("A", steps(&["w"])).expect("given back");
}

#[test]
fn an_answer_before_the_run_is_known_waits_for_it() {
    let mut live: Delegations<&str> = Delegations::default();
    let a = live.admit("A", steps(&["w"])).expect("admitted");
    let id = "step:w[0]:approval:1";
    let second = "step:w[0]:approval:2";
    assert_eq!(live.route("A", answer(id)), Routed::Held);
    assert_eq!(live.route("A", answer(second)), Routed::Held);
    // Delivered once, in the order given.
    assert_eq!(live.started(a, "run-a"), vec![answer(id), answer(second)]);
    assert!(live.started(a, "run-a").is_empty());
    assert_eq!(live.route("A", answer(id)), Routed::To("run-a", answer(id)));
    // A run that ended before it started takes its held answers with it.
    let b = live.admit("A", steps(&["v"])).expect("admitted");
    assert_eq!(
        live.route("A", answer("step:v[0]:approval:1")),
        Routed::Held
    );
    live.ended(b);
    assert!(live.started(b, "late").is_empty());
}

/// What the generated cases do.
#[derive(Debug, Clone)]
enum Act {
    Admit {
        session: u8,
        steps: Vec<u8>,
        elsewhere: bool,
    },
    Start {
        nth: u8,
    },
    End {
        nth: u8,
    },
    Answer {
        session: u8,
        step: u8,
    },
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (
            0..3u8,
            proptest::collection::vec(0..5u8, 0..3),
            any::<bool>()
        )
            .prop_map(|(session, steps, elsewhere)| Act::Admit {
                session,
                steps,
                elsewhere
            }),
        any::<u8>().prop_map(|nth| Act::Start { nth }),
        any::<u8>().prop_map(|nth| Act::End { nth }),
        (0..3u8, 0..5u8).prop_map(|(session, step)| Act::Answer { session, step }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever runs come and go, an answer reaches at most one run, only
    /// one its own session delegated that has the step, and every answer
    /// is delivered, held or refused exactly once.
    #[test]
    fn an_answer_never_reaches_another_sessions_run_or_two_runs(
        acts in proptest::collection::vec(act(), 1..60),
    ) {
        let mut live: Delegations<u64> = Delegations::default();
        // The model: each admitted run's session and steps, by key.
        // The model: each admitted run's session, steps, whether it has
        // started and whether its host answers it, by key.
        let mut runs: BTreeMap<u64, (String, BTreeSet<String>, bool, bool)> = BTreeMap::new();
        let mut held: BTreeMap<u64, usize> = BTreeMap::new();
        for act in acts {
            match act {
                Act::Admit { session, steps, elsewhere } => {
                    let session = format!("s{session}");
                    let names: BTreeSet<String> = steps.iter().map(|s| format!("n{s}")).collect();
                    let clashes = runs
                        .values()
                        .any(|(s, n, _, _)| *s == session && !n.is_disjoint(&names));
                    let admitted = match elsewhere {
                        true => live.reserve(&session, names.clone()),
                        false => live.admit(&session, names.clone()),
                    };
                    match admitted {
                        Ok(key) => {
                            prop_assert!(!clashes, "admitted a clash");
                            runs.insert(key, (session, names, false, elsewhere));
                        }
                        Err(clash) => {
                            prop_assert!(clashes, "refused no clash: {clash}");
                            prop_assert!(!clash.steps.is_empty());
                        }
                    }
                }
                Act::Start { nth } => {
                    let Some(key) = runs.keys().nth(nth as usize % runs.len().max(1)).copied() else {
                        continue;
                    };
                    let was_started = std::mem::replace(&mut runs.get_mut(&key).expect("run").2, true);
                    let delivered = live.started(key, key);
                    let expected = match was_started {
                        true => 0,
                        false => held.remove(&key).unwrap_or(0),
                    };
                    prop_assert_eq!(delivered.len(), expected);
                }
                Act::End { nth } => {
                    let Some(key) = runs.keys().nth(nth as usize % runs.len().max(1)).copied() else {
                        continue;
                    };
                    runs.remove(&key);
                    held.remove(&key);
                    live.ended(key);
                }
                Act::Answer { session, step } => {
                    let session = format!("s{session}");
                    let step = format!("n{step}");
                    let owners: Vec<u64> = runs
                        .iter()
                        .filter(|(_, (s, n, _, _))| *s == session && n.contains(&step))
                        .map(|(key, _)| *key)
                        .collect();
                    prop_assert!(owners.len() <= 1, "two runs of one session share a step");
                    let id = format!("step:{step}[0]:approval:1");
                    let owner = owners.first().filter(|owner| !runs[*owner].3);
                    match (live.route(&session, answer(&id)), owner) {
                        (Routed::To(key, given), Some(owner)) => {
                            prop_assert_eq!(key, *owner);
                            prop_assert!(runs[owner].2, "routed to a run not started");
                            prop_assert_eq!(given.id, id);
                        }
                        (Routed::Held, Some(owner)) => {
                            prop_assert!(!runs[owner].2, "held for a started run");
                            *held.entry(*owner).or_default() += 1;
                        }
                        (Routed::Nobody(_), None) => {}
                        (routed, owner) => {
                            prop_assert!(false, "{routed:?} for owner {owner:?}");
                        }
                    }
                }
            }
        }
    }
}
