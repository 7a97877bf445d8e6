use std::collections::HashMap;

use cadre_runtime::store::RunStatus;
use pretty_assertions::assert_eq;

use super::*;
use crate::diagnostic::Source;
use crate::validate::{Options, validate};

fn workflow(text: &str) -> Workflow {
    let source = Source::file("t.toml", format!("[workflow]\nname = \"t\"\n{text}"));
    match validate(&source, &Options::default()) {
        Ok(v) => v.workflow,
        Err(e) => panic!("invalid: {}", e.render()),
    }
}

/// A run and what it was told to do.
struct Run {
    s: Scheduler,
    /// Instances dispatched and not yet answered, by name.
    live: Vec<(String, InstanceId, String)>,
    /// Every instance ever dispatched, by name, in order.
    dispatched: Vec<String>,
    checks: Vec<String>,
    merges: Vec<String>,
    stopped: Vec<String>,
    report: Option<Report>,
    most_running: usize,
}

impl Run {
    fn new(text: &str, max_parallel: usize) -> Self {
        Self::with(
            text,
            Settings {
                max_parallel,
                ..Settings::default()
            },
        )
    }

    fn with(text: &str, settings: Settings) -> Self {
        let mut run = Run {
            s: Scheduler::new(workflow(text), settings),
            live: Vec::new(),
            dispatched: Vec::new(),
            checks: Vec::new(),
            merges: Vec::new(),
            stopped: Vec::new(),
            report: None,
            most_running: 0,
        };
        run.input(Input::Start);
        run
    }

    fn input(&mut self, input: Input) {
        for effect in self.s.step(input) {
            match effect {
                Effect::Dispatch { id, prompt, .. } => {
                    let name = self.s.name(id);
                    self.dispatched.push(name.clone());
                    self.live.push((name, id, prompt));
                }
                Effect::RunCheck { id, .. } => self.checks.push(self.s.name(id)),
                Effect::Merge { id } => self.merges.push(self.s.name(id)),
                Effect::Stop { id } => {
                    let name = self.s.name(id);
                    self.live.retain(|(n, _, _)| n != &name);
                    self.stopped.push(name);
                }
                Effect::Done(report) => self.report = Some(report),
                Effect::State { .. } | Effect::Expanded { .. } | Effect::Output { .. } => {}
            }
        }
        self.most_running = self.most_running.max(self.s.running());
        assert!(self.s.running() <= self.s.settings.max_parallel);
    }

    fn id(&self, name: &str) -> InstanceId {
        self.live
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, id, _)| *id)
            .unwrap_or_else(|| panic!("{name} is not running; running: {:?}", self.names()))
    }

    fn prompt(&self, name: &str) -> String {
        self.live
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, p)| p.clone())
            .unwrap_or_default()
    }

    fn names(&self) -> Vec<String> {
        self.live.iter().map(|(n, _, _)| n.clone()).collect()
    }

    fn answer(&mut self, name: &str, output: &str) {
        let id = self.id(name);
        self.live.retain(|(n, _, _)| n != name);
        self.input(Input::Answered {
            id,
            output: output.into(),
            calls: vec!["list_dir . → ok".into()],
        });
    }

    fn fail(&mut self, name: &str, why: &str) {
        let id = self.id(name);
        self.live.retain(|(n, _, _)| n != name);
        self.input(Input::AttemptFailed {
            id,
            reason: why.into(),
        });
    }

    fn state(&self, step: &str, index: usize) -> State {
        let s = self.s.workflow().step_id(step).expect("step");
        self.s
            .instance(InstanceId { step: s, index })
            .expect("instance")
            .state
    }

    fn report(&self) -> &Report {
        self.report.as_ref().expect("the run is done")
    }
}

const DIAMOND: &str = r#"
[[steps]]
name = "a"
prompt = "A"
[[steps]]
name = "b"
needs = ["a"]
prompt = "B after {{steps.a.output}}"
[[steps]]
name = "c"
needs = ["a"]
prompt = "C"
[[steps]]
name = "d"
needs = ["b", "c"]
prompt = "D: {{steps.b.output}} {{steps.c.output}}"
"#;

#[test]
fn a_diamond_runs_its_middle_in_parallel() {
    let mut run = Run::new(DIAMOND, 4);
    assert_eq!(run.names(), ["a"]);
    run.answer("a", "one");
    assert_eq!(run.names(), ["b", "c"]);
    assert_eq!(run.prompt("b"), "B after one");
    run.answer("b", "two");
    assert_eq!(run.names(), ["c"], "d waits for c");
    run.answer("c", "three");
    assert_eq!(run.prompt("d"), "D: two three");
    run.answer("d", "done");
    let report = run.report();
    assert_eq!(report.status, RunStatus::Completed);
    assert!(report.all_ran);
    assert_eq!(report.counts[&State::Finalized], 4);
}

const FAN: &str = r#"
[[steps]]
name = "list"
prompt = "list"
output = "json"
[[steps]]
name = "review"
needs = ["list"]
for_each = "{{steps.list.output}}"
prompt = "Review {{item}} ({{index}})"
[[steps]]
name = "summary"
needs = ["review"]
prompt = "Summarize {{steps.review.outputs}}"
"#;

#[test]
fn a_fan_out_of_a_hundred_runs_eight_at_a_time() {
    let mut run = Run::new(FAN, 8);
    let items: Vec<String> = (0..100).map(|i| format!("f{i}.rs")).collect();
    run.answer("list", &serde_json::to_string(&items).expect("json"));
    assert_eq!(run.names().len(), 8);
    assert_eq!(run.prompt("review[3]"), "Review f3.rs (3)");
    while let Some((name, _, _)) = run
        .live
        .iter()
        .find(|(n, _, _)| n.starts_with("review"))
        .cloned()
    {
        run.answer(&name, &format!("ok {name}"));
    }
    assert_eq!(run.most_running, 8);
    assert_eq!(
        run.dispatched
            .iter()
            .filter(|n| n.starts_with("review["))
            .count(),
        100
    );
    let summary = run.prompt("summary");
    assert!(
        summary.starts_with("Summarize [\"ok review[0]\",\"ok review[1]\""),
        "{summary}"
    );
}

#[test]
fn max_parallel_one_runs_one_at_a_time() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"{{item}}\"\n[[steps]]\nname = \"y\"\nprompt = \"y\"\n",
        1,
    );
    assert_eq!(run.names(), ["x[0]"]);
    for name in ["x[0]", "x[1]", "x[2]", "y"] {
        assert_eq!(run.names(), [name]);
        run.answer(name, "ok");
    }
    assert_eq!(run.most_running, 1);
    assert_eq!(run.report().status, RunStatus::Completed);
}

#[test]
fn a_failing_step_blocks_its_dependents_while_siblings_finish() {
    let mut run = Run::new(DIAMOND, 4);
    run.answer("a", "one");
    run.fail("b", "the model gave up");
    assert_eq!(run.names(), ["c"], "c goes on");
    run.answer("c", "three");
    assert!(run.live.is_empty());
    let report = run.report();
    assert_eq!(report.status, RunStatus::Failed);
    assert_eq!(run.state("c", 0), State::Finalized);
    assert_eq!(run.state("d", 0), State::Blocked);
    let d = &report.steps[3];
    assert_eq!(
        d.reason.as_deref(),
        Some("needs 'b', which failed: the model gave up")
    );
    let text = report.render(100);
    assert!(
        text.contains("- d blocked: needs 'b', which failed"),
        "{text}"
    );
    assert!(
        text.contains("- c (finalized): three\n  calls made: list_dir . → ok\n"),
        "{text}"
    );
}

#[test]
fn a_check_failure_keeps_the_output_from_dependents() {
    let mut run = Run::new(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\ncheck = \"cargo test\"\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nprompt = \"use {{steps.a.output}}\"\n",
        2,
    );
    run.answer("a", "SECRET-UNVERIFIED");
    assert_eq!(run.checks, ["a"]);
    assert_eq!(run.state("a", 0), State::Finalized);
    assert!(run.live.is_empty(), "b waits for the check");
    let id = InstanceId { step: 0, index: 0 };
    run.input(Input::Checked {
        id,
        passed: false,
        detail: "exit 101".into(),
    });
    assert_eq!(run.state("a", 0), State::Failed);
    assert_eq!(run.state("b", 0), State::Blocked);
    assert!(!run.dispatched.contains(&"b".to_string()));
    assert!(!run.report().all_checks_passed);
}

#[test]
fn a_passed_check_verifies_and_hands_forward() {
    let mut run = Run::new(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\ncheck = \"true\"\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nprompt = \"use {{steps.a.output}}\"\n",
        2,
    );
    run.answer("a", "good");
    run.input(Input::Checked {
        id: InstanceId { step: 0, index: 0 },
        passed: true,
        detail: String::new(),
    });
    assert_eq!(run.state("a", 0), State::Verified);
    assert_eq!(run.prompt("b"), "use good");
}

#[test]
fn a_claim_without_a_tool_call_fails_its_check() {
    let mut run = Run::new(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\ncheck = \"true\"\n",
        1,
    );
    let id = run.id("a");
    run.live.clear();
    run.input(Input::Answered {
        id,
        output: "all tests pass".into(),
        calls: Vec::new(),
    });
    assert!(run.checks.is_empty(), "the check does not even run");
    assert_eq!(run.state("a", 0), State::Failed);
    assert_eq!(
        run.report().steps[0].reason.as_deref(),
        Some("check failed: the step claims a result with no tool call behind it")
    );
}

#[test]
fn retries_run_a_failed_attempt_again() {
    let mut run = Run::new(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\noutput = \"json\"\nretries = 1\n",
        1,
    );
    run.answer("a", "not json at all");
    assert_eq!(run.names(), ["a"], "retried");
    run.answer("a", "```json\n[1, 2]\n```");
    assert_eq!(run.state("a", 0), State::Finalized);
    assert_eq!(
        run.report().steps[0].instances[0].output.as_deref(),
        Some("[1,2]")
    );
}

#[test]
fn fail_fast_cancels_what_can_no_longer_help() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3, 4]\nprompt = \"{{item}}\"\non_failure = \"fail_fast\"\nmin_success = 3\n",
        2,
    );
    run.answer("x[0]", "ok");
    run.fail("x[1]", "no");
    assert_eq!(run.names(), ["x[2]", "x[3]"]);
    run.fail("x[2]", "no");
    assert_eq!(run.stopped, ["x[3]"], "one can no longer reach 3");
    let report = run.report();
    assert_eq!(report.status, RunStatus::Failed);
    assert_eq!(run.state("x", 0), State::Finalized, "finished work is kept");
    assert_eq!(run.state("x", 3), State::Cancelled);
}

#[test]
fn min_success_lets_a_fan_out_succeed_with_failures() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [\"a\", \"b\", \"c\"]\nprompt = \"{{item}}\"\nmin_success = 2\n[[steps]]\nname = \"y\"\nneeds = [\"x\"]\nprompt = \"{{steps.x.outputs}}\"\n",
        3,
    );
    run.answer("x[0]", "A");
    run.fail("x[1]", "no");
    run.answer("x[2]", "C");
    assert_eq!(run.prompt("y"), "[\"A\",\"C\"]");
}

#[test]
fn a_for_each_over_something_not_a_list_fails_the_step() {
    let mut run = Run::new(FAN, 2);
    run.answer("list", "{\"not\": \"a list\"}");
    let report = run.report();
    assert_eq!(report.steps[1].status, StepOutcome::Failed);
    assert_eq!(
        report.steps[1].reason.as_deref(),
        Some("for_each: step 'list' answered an object, not a JSON list")
    );
    assert_eq!(report.steps[2].status, StepOutcome::Blocked);
}

#[test]
fn cancelling_one_item_lets_its_siblings_run_on() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"{{item}}\"\nmin_success = 2\n",
        3,
    );
    let id = run.id("x[1]");
    run.input(Input::Cancel(Target::Instance(id)));
    assert_eq!(run.stopped, ["x[1]"]);
    assert_eq!(run.names(), ["x[0]", "x[2]"]);
    run.answer("x[0]", "a");
    run.answer("x[2]", "c");
    assert_eq!(run.report().status, RunStatus::Completed);
}

#[test]
fn cancelling_the_run_stops_everything() {
    let mut run = Run::new(DIAMOND, 4);
    run.answer("a", "one");
    run.input(Input::Cancel(Target::Run));
    assert_eq!(run.stopped, ["b", "c"]);
    let report = run.report();
    assert_eq!(report.status, RunStatus::Cancelled);
    assert_eq!(run.state("d", 0), State::Cancelled);
}

#[test]
fn the_token_budget_stops_the_run() {
    let mut run = Run::new(
        "[workflow.budget]\ntokens = 100\n[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"{{item}}\"\n",
        1,
    );
    run.input(Input::Tokens(60));
    assert_eq!(run.names(), ["x[0]"]);
    run.input(Input::Tokens(60));
    let report = run.report();
    assert_eq!(
        report.halted.as_deref(),
        Some("the run's token budget (100) is spent")
    );
    assert_eq!(report.counts[&State::Cancelled], 3);
}

/// Token counts come from the step's agent, on a node from another
/// machine: a count near `u64::MAX` saturates the run's total instead of
/// overflowing (a panic here would take the run down).
#[test]
fn tokens_reported_past_u64_max_saturate() {
    let mut run = Run::new(
        "[workflow.budget]\ntokens = 100\n[[steps]]\nname = \"x\"\nprompt = \"a\"\n",
        1,
    );
    run.input(Input::Tokens(u64::MAX));
    run.input(Input::Tokens(u64::MAX));
    let report = run.report();
    assert_eq!(report.tokens, u64::MAX);
    assert_eq!(
        report.halted.as_deref(),
        Some("the run's token budget (100) is spent")
    );
}

#[test]
fn the_agent_budget_stops_starting_agents() {
    let text = "[workflow.budget]\nagents = 2\n[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"{{item}}\"\n";
    let mut run = Run::new(text, 3);
    assert_eq!(run.names(), ["x[0]", "x[1]"]);
    run.answer("x[0]", "a");
    run.answer("x[1]", "b");
    assert_eq!(run.state("x", 2), State::Cancelled);
    assert_eq!(
        run.report().halted.as_deref(),
        Some("the run's agent budget (2) is spent")
    );
}

#[test]
fn resume_takes_stored_results_and_runs_only_the_rest() {
    let mut first = Run::new(DIAMOND, 4);
    first.answer("a", "one");
    first.answer("b", "two");
    let key = |run: &Run, step: &str| {
        let s = run.s.workflow().step_id(step).expect("step");
        run.s
            .instance(InstanceId { step: s, index: 0 })
            .and_then(|i| i.key.clone())
            .expect("key")
    };
    let stored: HashMap<String, Stored> = [("a", "one"), ("b", "two")]
        .into_iter()
        .map(|(step, out)| {
            (
                key(&first, step),
                Stored {
                    state: State::Finalized,
                    output: Some(out.into()),
                    reason: None,
                },
            )
        })
        .collect();
    // The crash came with c dispatched: it runs again; a and b do not.
    let mut again = Run::with(
        DIAMOND,
        Settings {
            max_parallel: 4,
            stored: stored.clone(),
            ..Settings::default()
        },
    );
    assert_eq!(again.dispatched, ["c"]);
    again.answer("c", "three");
    assert_eq!(again.prompt("d"), "D: two three");
    // An edited step runs again, and so does what builds on it.
    let edited = DIAMOND.replace("prompt = \"B after", "prompt = \"B (edited) after");
    let mut changed = Run::with(
        &edited,
        Settings {
            max_parallel: 4,
            stored,
            ..Settings::default()
        },
    );
    assert_eq!(changed.dispatched, ["b", "c"]);
    changed.answer("b", "TWO");
    changed.answer("c", "three");
    assert_eq!(changed.prompt("d"), "D: TWO three");
}

#[test]
fn a_stored_failure_is_kept_unless_retry_failed() {
    let mut first = Run::new("[[steps]]\nname = \"a\"\nprompt = \"A\"\n", 1);
    let key = first
        .s
        .instance(InstanceId { step: 0, index: 0 })
        .and_then(|i| i.key.clone())
        .expect("key");
    first.fail("a", "boom");
    let stored: HashMap<String, Stored> = [(
        key,
        Stored {
            state: State::Failed,
            output: None,
            reason: Some("boom".into()),
        },
    )]
    .into();
    let kept = Run::with(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\n",
        Settings {
            max_parallel: 1,
            stored: stored.clone(),
            ..Settings::default()
        },
    );
    assert!(kept.dispatched.is_empty());
    assert_eq!(
        kept.report().steps[0].reason.as_deref(),
        Some("failed in an earlier run: boom")
    );
    let retried = Run::with(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\n",
        Settings {
            max_parallel: 1,
            stored,
            retry_failed: true,
            ..Settings::default()
        },
    );
    assert_eq!(retried.dispatched, ["a"]);
}

#[test]
fn large_outputs_are_capped_and_referenced_by_file() {
    let mut run = Run::with(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\nmax_output_bytes = 10\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nprompt = \"{{steps.a.output}}\"\n",
        Settings {
            max_parallel: 1,
            outputs_dir: PathBuf::from("/runs/r1/outputs"),
            ..Settings::default()
        },
    );
    let big = "x".repeat(2000);
    run.answer("a", &big);
    assert_eq!(
        run.prompt("b"),
        format!(
            "{}…\n[cadre: the output of a is 2000 bytes; the whole of it is in /runs/r1/outputs/a-0.txt]",
            "x".repeat(10)
        )
    );
}

#[test]
fn a_terminal_model_error_stops_dispatching_and_says_so() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"{{item}}\"\n[[steps]]\nname = \"y\"\nprompt = \"y\"\n",
        2,
    );
    assert_eq!(run.names(), ["x[0]", "x[1]"]);
    run.input(Input::Halt("the model server refused: HTTP 401".into()));
    run.fail("x[0]", "HTTP 401");
    assert_eq!(run.names(), ["x[1]"], "nothing new starts");
    run.answer("x[1]", "b");
    let report = run.report();
    assert_eq!(
        report.halted.as_deref(),
        Some("the model server refused: HTTP 401")
    );
    assert_eq!(run.state("x", 2), State::Cancelled);
    assert_eq!(run.state("y", 0), State::Cancelled);
}

#[test]
fn an_answer_that_breaks_its_schema_is_not_accepted() {
    let mut run = Run::new(
        "[[steps]]\nname = \"a\"\nprompt = \"A\"\noutput = \"json\"\noutput_schema = { type = \"array\", items = { type = \"string\" } }\n",
        1,
    );
    run.answer("a", "[1, 2]");
    assert_eq!(run.state("a", 0), State::Failed);
    let reason = run.report().steps[0].reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("the answer does not match output_schema: 1 is not of type"),
        "{reason}"
    );
}

#[test]
fn a_transient_model_failure_requeues_behind_what_waits_without_spending_a_retry() {
    let mut run = Run::new(
        "[[steps]]\nname = \"x\"\nfor_each = [0, 1, 2]\nprompt = \"{{item}}\"\n",
        1,
    );
    assert_eq!(run.names(), ["x[0]"]);
    let requeue = |run: &mut Run, name: &str| {
        let id = run.id(name);
        run.live.retain(|(n, _, _)| n != name);
        run.input(Input::Requeue {
            id,
            reason: "HTTP 429: slow down".into(),
        });
    };
    requeue(&mut run, "x[0]");
    // x[0] waits behind x[1] and x[2], which had not run yet.
    assert_eq!(run.state("x", 0), State::Pending);
    assert_eq!(run.names(), ["x[1]"]);
    run.answer("x[1]", "one");
    run.answer("x[2]", "two");
    assert_eq!(run.names(), ["x[0]"]);
    // Re-queues spend no attempt; past the limit, it is a failed attempt
    // (no retries left: failed).
    for _ in 1..MAX_REQUEUES {
        requeue(&mut run, "x[0]");
        assert_eq!(run.names(), ["x[0]"]);
    }
    let x0 = run.s.instance(run.id("x[0]")).expect("x[0]");
    assert_eq!((x0.attempts, x0.requeues), (1, MAX_REQUEUES));
    requeue(&mut run, "x[0]");
    assert_eq!(run.state("x", 0), State::Failed);
    assert_eq!(
        run.report().steps[0].instances[0].reason.as_deref(),
        Some("HTTP 429: slow down")
    );
}

#[test]
fn a_merging_step_holds_its_slot_and_counts_only_once_merged() {
    let text = "[[steps]]\nname = \"a\"\nprompt = \"A\"\nisolation = \"worktree\"\nmerge = true\n[[steps]]\nname = \"b\"\nprompt = \"B\"\nisolation = \"worktree\"\nmerge = true\ncheck = \"true\"\n[[steps]]\nname = \"c\"\nneeds = [\"a\"]\nprompt = \"C\"\n[[steps]]\nname = \"d\"\nneeds = [\"b\"]\nprompt = \"D\"\n";
    let mut run = Run::new(text, 1);
    let a = run.id("a");
    run.input(Input::Answered {
        id: a,
        output: "done".into(),
        calls: vec!["write_file x → ok".into()],
    });
    // Merging: still dispatched, the slot held, nothing after it started.
    assert_eq!(run.merges, ["a"]);
    assert_eq!(run.state("a", 0), State::Dispatched);
    assert_eq!(run.s.running(), 1);
    run.input(Input::Merged {
        id: a,
        result: Ok(vec!["x".into()]),
    });
    assert_eq!(run.state("a", 0), State::Finalized);
    // b: answered, checked, then merged; a conflict fails it at once.
    let b = InstanceId { step: 1, index: 0 };
    run.input(Input::Answered {
        id: b,
        output: "done".into(),
        calls: vec!["write_file x → ok".into()],
    });
    run.input(Input::Checked {
        id: b,
        passed: true,
        detail: String::new(),
    });
    assert_eq!(run.merges, ["a", "b"]);
    assert_eq!(run.state("b", 0), State::Finalized);
    run.input(Input::Merged {
        id: b,
        result: Err(MergeFailure::Conflict {
            files: vec!["x".into()],
            kept: "/tmp/wt".into(),
            branch: "cadre/step".into(),
        }),
    });
    assert_eq!(run.state("b", 0), State::Failed);
    let d = run.s.workflow().step_id("d").expect("d");
    assert_eq!(run.s.steps()[d].instances[0].state, State::Blocked);
}

#[test]
fn a_worktree_steps_key_says_so_and_other_keys_stay_as_stored() {
    let key = |extra: &str| {
        let w = workflow(&format!("[[steps]]\nname = \"a\"\nprompt = \"A\"\n{extra}"));
        instance_key(&w.steps[0], None, "A", &[], &[])
    };
    let plain = key("");
    let isolated = key("isolation = \"worktree\"\n");
    let merged = key("isolation = \"worktree\"\nmerge = true\n");
    assert!(plain != isolated && isolated != merged && plain != merged);
    assert_eq!(key("isolation = \"none\"\n"), plain);
}

#[test]
fn an_unaccepted_answer_reads_as_it_always_did() {
    let not_json = outputs::parse_json("nope").unwrap_err();
    assert!(matches!(&not_json, outputs::OutputError::NotJson(Some(_))));
    assert!(
        not_json
            .to_string()
            .starts_with("the answer is not JSON (expected ident"),
        "{not_json}"
    );
    let schema = serde_json::json!({"type": "string"});
    assert_eq!(
        outputs::check_schema(&schema, &serde_json::json!(1))
            .unwrap_err()
            .to_string(),
        "the answer does not match output_schema: 1 is not of type \"string\""
    );
}
