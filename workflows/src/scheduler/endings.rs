//! Generated runs: every way an attempt can end, under retries, fan-outs
//! and dependents, ends the run (`Effect::Done`) with every instance
//! settled, counts that add up, and no step actor left waiting.
//!
//! The driver plays the supervisor and its step actors as the engine does:
//! an actor works until it answers or fails; after its answer it waits for
//! a check, a merge or its end, and it ends only on its own failure, on its
//! merge's end, or when an effect ends its attempt
//! ([`Effect::ends_attempt`], what the supervisor applies). A run whose
//! actors all wait with nothing sent to them is the hang this pins.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::diagnostic::Source;
use crate::validate::{Options, validate};

/// One generated step.
#[derive(Debug, Clone)]
struct GenStep {
    /// Bits over the earlier steps it needs.
    needs: u8,
    /// `None`: a single step; `Some(n)`: a literal fan-out of `n` items.
    items: Option<usize>,
    check: bool,
    merge: bool,
    json: bool,
    retries: u32,
    fail_fast: bool,
    /// `min_success` of a fan-out, cut to its items.
    min_success: Option<u32>,
}

fn gen_step() -> impl Strategy<Value = GenStep> {
    (
        any::<u8>(),
        proptest::option::of(1usize..4),
        any::<bool>(),
        proptest::bool::weighted(0.25),
        proptest::bool::weighted(0.3),
        0u32..3,
        any::<bool>(),
        proptest::option::of(0u32..4),
    )
        .prop_map(
            |(needs, items, check, merge, json, retries, fail_fast, min_success)| GenStep {
                needs,
                items,
                check,
                merge,
                json,
                retries,
                fail_fast,
                min_success,
            },
        )
}

/// The workflow file of `steps`, validated as a person's would be.
fn workflow_of(steps: &[GenStep]) -> Workflow {
    let mut text = String::from("[workflow]\nname = \"g\"\nmax_parallel = 3\n");
    for (i, step) in steps.iter().enumerate() {
        text.push_str(&format!(
            "[[steps]]\nname = \"s{i}\"\nprompt = \"do {i}\"\nretries = {}\n",
            step.retries
        ));
        let needs: Vec<String> = (0..i)
            .filter(|j| step.needs & (1 << j) != 0)
            .map(|j| format!("\"s{j}\""))
            .collect();
        if !needs.is_empty() {
            text.push_str(&format!("needs = [{}]\n", needs.join(", ")));
        }
        if let Some(n) = step.items {
            let items: Vec<String> = (0..n).map(|k| format!("\"i{k}\"")).collect();
            text.push_str(&format!("for_each = [{}]\n", items.join(", ")));
            if let Some(m) = step.min_success {
                text.push_str(&format!("min_success = {}\n", m.min(n as u32)));
            }
            if step.fail_fast {
                text.push_str("on_failure = \"fail_fast\"\n");
            }
        }
        if step.check {
            text.push_str("check = \"true\"\n");
        }
        if step.merge {
            text.push_str("isolation = \"worktree\"\nmerge = true\n");
        }
        if step.json {
            text.push_str("output = \"json\"\n");
        }
    }
    let source = Source::file("g.toml", text);
    match validate(&source, &Options::default()) {
        Ok(v) => v.workflow,
        Err(e) => panic!("the generated workflow is invalid: {}", e.render()),
    }
}

/// Where a simulated step actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its agent works: it will answer or fail.
    Working,
    /// It answered, or its check came back: it waits to be told.
    Waiting,
    /// Its check runs.
    Checking,
    /// Its worktree merges.
    Merging,
}

/// Reads choices off the generated dice, cycling.
struct Dice {
    rolls: Vec<u8>,
    next: usize,
}

impl Dice {
    fn roll(&mut self, sides: u8) -> u8 {
        let r = self.rolls[self.next % self.rolls.len()];
        self.next += 1;
        r % sides
    }
}

/// The supervisor and its actors, simulated.
struct Sim {
    s: Scheduler,
    actors: BTreeMap<InstanceId, Phase>,
    report: Option<Report>,
    /// Cancels and halts so far: a few per run, so the run's own moves
    /// decide its end.
    outside: u32,
}

impl Sim {
    fn input(&mut self, input: Input) {
        let effects = self.s.step(input);
        for effect in effects {
            if let Some(id) = effect.ends_attempt(self.s.workflow()) {
                self.actors.remove(&id);
            }
            match effect {
                Effect::Dispatch { id, .. } => {
                    assert!(
                        !self.actors.contains_key(&id),
                        "{} dispatched again while its last attempt's actor lives",
                        self.s.name(id)
                    );
                    self.actors.insert(id, Phase::Working);
                }
                Effect::RunCheck { id, .. } => {
                    assert_eq!(
                        self.actors.get(&id),
                        Some(&Phase::Waiting),
                        "check of a non-waiting actor"
                    );
                    self.actors.insert(id, Phase::Checking);
                }
                Effect::Merge { id } => match self.actors.get(&id) {
                    Some(Phase::Waiting) => {
                        self.actors.insert(id, Phase::Merging);
                    }
                    other => panic!("merge of {} asked of an actor {other:?}", self.s.name(id)),
                },
                Effect::Done(report) => {
                    assert!(self.report.is_none(), "done twice");
                    self.report = Some(report);
                }
                Effect::Stop { .. }
                | Effect::State { .. }
                | Effect::Expanded { .. }
                | Effect::Output { .. } => {}
            }
        }
        let live = self
            .s
            .steps()
            .iter()
            .enumerate()
            .flat_map(|(step, run)| {
                (0..run.instances.len()).map(move |index| InstanceId { step, index })
            })
            .filter(|&id| self.s.attempt_live(id))
            .count();
        assert_eq!(
            self.s.running(),
            live,
            "the slots held are the live attempts"
        );
        assert!(self.s.running() <= 3);
    }

    /// One actor does one thing, chosen by the dice; or something from
    /// outside happens. False when nothing can happen (every actor waits).
    fn act(&mut self, dice: &mut Dice) -> bool {
        if self.outside < 4 && dice.roll(40) == 0 {
            self.outside += 1;
            let target = match dice.roll(3) {
                0 => Target::Run,
                1 => Target::Step(usize::from(dice.roll(8)) % self.s.workflow().steps.len()),
                _ => {
                    let step = usize::from(dice.roll(8)) % self.s.workflow().steps.len();
                    Target::Instance(InstanceId {
                        step,
                        index: usize::from(dice.roll(3)),
                    })
                }
            };
            self.input(Input::Cancel(target));
            return true;
        }
        if self.outside < 4 && dice.roll(60) == 0 {
            self.outside += 1;
            self.input(Input::Halt("the endpoint refused".into()));
            return true;
        }
        let movable: Vec<(InstanceId, Phase)> = self
            .actors
            .iter()
            .filter(|(_, p)| **p != Phase::Waiting)
            .map(|(id, p)| (*id, *p))
            .collect();
        if movable.is_empty() {
            return false;
        }
        let (id, phase) = movable[usize::from(dice.roll(255)) % movable.len()];
        // A crash ends the actor in any phase (the supervision event).
        if dice.roll(12) == 0 {
            self.actors.remove(&id);
            self.input(Input::AttemptFailed {
                id,
                reason: "the step crashed".into(),
            });
            return true;
        }
        let json = self.s.workflow().steps[id.step].output == OutputKind::Json;
        match phase {
            Phase::Working => match dice.roll(9) {
                0..=3 => {
                    self.actors.insert(id, Phase::Waiting);
                    let output = match (json, dice.roll(4)) {
                        (true, 0) => "not json".to_string(),
                        (true, _) => "[1, 2]".to_string(),
                        (false, _) => "done".to_string(),
                    };
                    let calls = match dice.roll(3) {
                        0 => Vec::new(),
                        _ => vec!["bash `true` → ok".to_string()],
                    };
                    self.input(Input::Answered { id, output, calls });
                    self.input(Input::Tokens(10));
                }
                4 => {
                    self.actors.remove(&id);
                    self.input(Input::Requeue {
                        id,
                        reason: "HTTP 503".into(),
                    });
                }
                n => {
                    self.actors.remove(&id);
                    let reason = ["timed out", "no progress", "node lost", "could not start"]
                        [usize::from(n - 5)];
                    self.input(Input::AttemptFailed {
                        id,
                        reason: reason.into(),
                    });
                }
            },
            Phase::Checking => {
                self.actors.insert(id, Phase::Waiting);
                let passed = dice.roll(3) != 0;
                self.input(Input::Checked {
                    id,
                    passed,
                    detail: "exit 1".into(),
                });
            }
            Phase::Merging => {
                self.actors.remove(&id);
                let result = match dice.roll(4) {
                    0 => Err(MergeFailure::Conflict {
                        files: vec!["a.txt".into()],
                        kept: "/tmp/wt".into(),
                        branch: "cadre/step".into(),
                    }),
                    _ => Ok(vec!["a.txt".into()]),
                };
                self.input(Input::Merged { id, result });
            }
            Phase::Waiting => unreachable!("filtered out"),
        }
        true
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Whatever each attempt does, the run ends, and ends whole.
    #[test]
    fn every_run_ends_with_its_counts_adding_up(
        steps in proptest::collection::vec(gen_step(), 1..6),
        rolls in proptest::collection::vec(any::<u8>(), 1..300),
    ) {
        let workflow = workflow_of(&steps);
        let mut sim = Sim {
            s: Scheduler::new(workflow, Settings { max_parallel: 3, ..Settings::default() }),
            actors: BTreeMap::new(),
            report: None,
            outside: 0,
        };
        let mut dice = Dice { rolls, next: 0 };
        sim.input(Input::Start);
        let mut moves = 0;
        while sim.report.is_none() {
            prop_assert!(
                sim.act(&mut dice),
                "the run waits forever: actors {:?} wait with nothing sent to them; steps {:?}",
                sim.actors, sim.s.steps()
            );
            moves += 1;
            prop_assert!(moves < 20_000, "the run does not end");
        }
        let report = sim.report.clone().unwrap_or_else(|| unreachable!());
        prop_assert!(sim.actors.is_empty(), "actors left when the run ended: {:?}", sim.actors);
        prop_assert_eq!(sim.s.running(), 0);
        let made: usize = sim.s.steps().iter().map(|r| r.instances.len()).sum();
        prop_assert_eq!(report.counts.values().sum::<usize>(), made);
        prop_assert_eq!(report.counts[&State::Pending], 0);
        prop_assert_eq!(report.counts[&State::Dispatched], 0);
        for (s, run) in sim.s.steps().iter().enumerate() {
            let def = &sim.s.workflow().steps[s];
            prop_assert!(
                !matches!(run.status, StepStatus::Waiting | StepStatus::Running),
                "step {} is still {:?}", def.name, run.status
            );
            for inst in &run.instances {
                prop_assert!(
                    inst.state.is_terminal() || (inst.state == State::Finalized && def.check.is_none()),
                    "an instance of {} ended {:?}", def.name, inst.state
                );
            }
            // A literal fan-out is made whole, or not at all (blocked or
            // cancelled before it opened).
            if let (Some(n), false) = (steps[s].items, run.instances.is_empty()) {
                prop_assert_eq!(run.instances.len(), n);
            }
        }
    }
}
