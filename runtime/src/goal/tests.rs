use std::time::Duration;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

fn goal(verify: VerifyMode) -> Goal {
    Goal::new(
        "make the tests pass",
        Budgets::default(),
        GoalSettings {
            verify,
            ..GoalSettings::default()
        },
    )
}

fn trace(reply: &str, calls: usize, digest: &str) -> TurnTrace {
    TurnTrace {
        reply: reply.into(),
        calls,
        calls_digest: digest.into(),
    }
}

/// A turn's usage of `tokens` prompt tokens.
fn spent(tokens: u64) -> crate::protocol::Usage {
    crate::protocol::Usage {
        prompt_tokens: tokens,
        ..Default::default()
    }
}

fn facts(proposal: Option<Proposal>) -> TurnFacts {
    TurnFacts {
        kind: TurnKind::Continuation,
        revision: 1,
        end: TurnEnd::Completed,
        usage: spent(100),
        seconds: 2,
        trace: trace("worked", 1, "a"),
        proposal,
        dependencies: Dependencies::default(),
    }
}

fn complete() -> Option<Proposal> {
    Some(Proposal::Complete {
        claim: "done".into(),
    })
}

// ---- settlement: the whole table ------------------------------------------

/// One row: a tweak of the goal, of the turn, and what settlement does.
fn check(
    tweak_goal: impl FnOnce(&mut Goal),
    tweak_turn: impl FnOnce(&mut TurnFacts),
    expected: (Settlement, &str),
) {
    let mut g = goal(VerifyMode::Subagent);
    tweak_goal(&mut g);
    let mut f = facts(None);
    tweak_turn(&mut f);
    let settlement = settle(&mut g, &f);
    assert_eq!((settlement, g.label().as_str()), expected);
}

fn done(next: Settled) -> Settlement {
    Settlement::Done(next)
}

#[test]
fn settlement_table() {
    let none = |_: &mut Goal| {};
    let keep = |_: &mut TurnFacts| {};
    // A turn of progress continues.
    check(none, keep, (done(Settled::Continue), "active(created)"));
    // Usage over the token budget: budget-limited, summary due, even with a claim.
    check(
        |g| g.budgets.tokens = Some(50),
        |f| f.proposal = complete(),
        (done(Settled::Summary), "budget_limited(tokens)"),
    );
    check(
        |g| g.budgets.turns = Some(1),
        keep,
        (done(Settled::Summary), "budget_limited(main_turns)"),
    );
    check(
        |g| g.budgets.seconds = Some(2),
        keep,
        (done(Settled::Summary), "budget_limited(time)"),
    );
    // Staleness: the goal was edited during the turn, the claim is dropped.
    check(
        |g| g.revision = 2,
        |f| f.proposal = complete(),
        (done(Settled::Continue), "active(created)"),
    );
    // Exception classification.
    for (end, label) in [
        (TurnEnd::Failed, "paused(turn_failed)"),
        (TurnEnd::Cancelled, "paused(user_requested)"),
        (TurnEnd::Withdrawn, "paused(withdrawn)"),
        (TurnEnd::Provider, "usage_limited(provider_failure)"),
    ] {
        check(
            none,
            |f| {
                f.end = end;
                f.proposal = complete();
            },
            (done(Settled::Stop), label),
        );
    }
    // Dependencies: wait, and the claim waits too.
    check(
        none,
        |f| {
            f.dependencies.background = 2;
            f.proposal = complete();
        },
        (
            done(Settled::Wait("2 background sub-agent(s) still run".into())),
            "active(created)",
        ),
    );
    check(
        none,
        |f| f.dependencies.questionnaire = true,
        (
            done(Settled::Wait(
                "a plan questionnaire waits for an answer".into(),
            )),
            "active(created)",
        ),
    );
    // Verification: a claim goes to the verifier; blocked needs none.
    check(
        none,
        |f| f.proposal = complete(),
        (
            Settlement::Verify {
                claim: "done".into(),
            },
            "active(created)",
        ),
    );
    check(
        |g| g.settings.verify = VerifyMode::Command,
        |f| f.proposal = complete(),
        (
            Settlement::Verify {
                claim: "done".into(),
            },
            "active(created)",
        ),
    );
    check(
        |g| g.settings.verify = VerifyMode::None,
        |f| f.proposal = complete(),
        (done(Settled::Stop), "complete(worker_proposal)"),
    );
    check(
        none,
        |f| {
            f.proposal = Some(Proposal::Blocked {
                reason: "no access".into(),
            })
        },
        (done(Settled::Stop), "blocked(worker_reported)"),
    );
    // Breaker: at the limit the goal pauses, after a claim with its own reason.
    check(
        |g| g.breaker.count = 2,
        |f| f.trace.calls = 0,
        (done(Settled::Stop), "paused(no_progress)"),
    );
    check(
        |g| {
            g.breaker.count = 2;
            g.claimed = true;
        },
        |f| f.trace.calls = 0,
        (
            done(Settled::Stop),
            "paused(no_progress_after_completion_claim)",
        ),
    );
    // A goal paused during the turn only counts the usage.
    check(
        |g| g.set(GoalStatus::Paused, StatusReason::UserRequested),
        |f| f.proposal = complete(),
        (done(Settled::Stop), "paused(user_requested)"),
    );
}

#[test]
fn the_summary_turn_counts_tokens_but_no_main_turn_and_clears_the_summary() {
    let mut g = goal(VerifyMode::Subagent);
    g.set(GoalStatus::BudgetLimited, StatusReason::Tokens);
    g.summary_due = true;
    let mut f = facts(None);
    f.kind = TurnKind::Summary;
    assert_eq!(settle(&mut g, &f), done(Settled::Stop));
    assert_eq!(
        (g.usage.tokens, g.usage.turns, g.summary_due),
        (100, 0, false)
    );
}

// ---- verdicts -----------------------------------------------------------------

fn check_verdict(answer: &str, expected: Verdict) {
    assert_eq!(parse_verdict(answer), expected, "{answer:?}");
}

#[test]
fn verdict_parsing() {
    let gaps = |g: &[&str]| g.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    check_verdict("All good.\nVERDICT: PASS", Verdict::Pass);
    check_verdict("ok\n\n**VERDICT: pass**\n\n", Verdict::Pass);
    check_verdict(
        "GAP: tests fail\n- GAP: no docs\nVERDICT: FAIL",
        Verdict::Fail(gaps(&["tests fail", "no docs"])),
    );
    check_verdict(
        "VERDICT: FAIL",
        Verdict::Fail(gaps(&[
            "the verifier found the objective unmet but listed no gaps",
        ])),
    );
    check_verdict(
        "GAP: half done\nVERDICT: PARTIAL",
        Verdict::Partial(gaps(&["half done"])),
    );
    // The verdict must be the last line: a PASS followed by more is no verdict.
    check_verdict("VERDICT: PASS\nbut wait", Verdict::Unparseable);
    check_verdict("looks fine to me", Verdict::Unparseable);
    check_verdict("", Verdict::Unparseable);
    check_verdict("VERDICT: MAYBE", Verdict::Unparseable);
}

// ---- after the verdict ----------------------------------------------------------

/// The verifier's tokens count toward the budget, and its cached and
/// reasoning tokens and its cost are shown with the turns'.
#[test]
fn the_verifiers_cached_tokens_and_cost_join_the_goals_usage() {
    let mut g = goal(VerifyMode::Subagent);
    g.usage.cached_tokens = 5;
    g.usage.cost = crate::model::Cost(1_000);
    let verifier = crate::protocol::Usage {
        prompt_tokens: 900,
        completion_tokens: 100,
        cached_tokens: 600,
        reasoning_tokens: 40,
        cost: crate::model::Cost(2_500),
    };
    after_verdict(&mut g, 1, &Verdict::Pass, verifier, 0);
    let u = &g.usage;
    assert_eq!(
        (
            u.tokens,
            u.verifier_tokens,
            u.cached_tokens,
            u.reasoning_tokens,
            u.cost
        ),
        (1_000, 1_000, 605, 40, crate::model::Cost(3_500))
    );
}

fn check_after(tweak: impl FnOnce(&mut Goal), verdict: Verdict, expected: (Settled, &str, u64)) {
    let mut g = goal(VerifyMode::Subagent);
    tweak(&mut g);
    let next = after_verdict(&mut g, 1, &verdict, spent(40), 1);
    assert_eq!(
        (next, g.label().as_str(), g.usage.verifier_tokens),
        expected
    );
}

#[test]
fn after_verdict_table() {
    let none = |_: &mut Goal| {};
    let gaps = vec!["no tests".to_string()];
    check_after(
        none,
        Verdict::Pass,
        (Settled::Stop, "complete(verifier_met)", 40),
    );
    check_after(
        none,
        Verdict::Fail(gaps.clone()),
        (Settled::Continue, "active(created)", 40),
    );
    check_after(
        none,
        Verdict::Partial(gaps.clone()),
        (Settled::Stop, "paused(verifier_partial)", 40),
    );
    check_after(
        none,
        Verdict::Unparseable,
        (Settled::Stop, "paused(verifier_unavailable)", 40),
    );
    check_after(
        none,
        Verdict::Unavailable("crashed".into()),
        (Settled::Stop, "paused(verifier_unavailable)", 40),
    );
    // The verifier's tokens can spend the budget: a FAIL then stops the goal.
    check_after(
        |g| g.budgets.tokens = Some(30),
        Verdict::Fail(gaps.clone()),
        (Settled::Summary, "budget_limited(tokens)", 40),
    );
    // A goal edited while the verifier worked discards the verdict.
    check_after(
        |g| g.revision = 2,
        Verdict::Pass,
        (Settled::Continue, "active(created)", 40),
    );
}

#[test]
fn the_same_gaps_five_times_pause_the_goal() {
    let mut g = goal(VerifyMode::Subagent);
    let gaps = vec!["the README has no example".to_string()];
    for _ in 0..4 {
        assert_eq!(
            after_verdict(&mut g, 1, &Verdict::Fail(gaps.clone()), spent(1), 0),
            Settled::Continue
        );
    }
    // Different gaps in between start the count again.
    let mut h = g.clone();
    after_verdict(&mut h, 1, &Verdict::Fail(vec!["other".into()]), spent(1), 0);
    assert_eq!((h.status, h.gaps.repeats), (GoalStatus::Active, 1));
    assert_eq!(
        after_verdict(&mut g, 1, &Verdict::Fail(gaps), spent(1), 0),
        Settled::Stop
    );
    assert_eq!(g.label(), "paused(no_progress)");
}

// ---- breaker ----------------------------------------------------------------------

#[test]
fn breaker_counts_repeats_nudges_and_trips_at_the_limit() {
    let check = |turns: &[TurnTrace], expected: &[BreakerVerdict]| {
        let mut b = Breaker::default();
        let got: Vec<_> = turns.iter().map(|t| b.observe(t, 3)).collect();
        assert_eq!(got, expected);
    };
    use BreakerVerdict::*;
    // Identical replies with different calls.
    check(
        &[trace("x", 1, "a"), trace("x", 1, "b"), trace("x", 1, "c")],
        &[Progress, Nudge(1), Nudge(2)],
    );
    // No tool calls at all.
    check(
        &[trace("a", 0, ""), trace("b", 0, ""), trace("c", 0, "")],
        &[Nudge(1), Nudge(2), Trip],
    );
    // The same calls and results as the turn before.
    check(
        &[
            trace("a", 2, "d"),
            trace("b", 2, "d"),
            trace("c", 2, "d"),
            trace("e", 2, "d"),
        ],
        &[Progress, Nudge(1), Nudge(2), Trip],
    );
    // Progress in between clears the count.
    check(
        &[trace("a", 0, ""), trace("b", 1, "x"), trace("c", 0, "")],
        &[Nudge(1), Progress, Nudge(1)],
    );
}

#[test]
fn a_trace_digests_replies_calls_and_results() {
    use crate::message::{Message, ToolCall};
    use std::sync::Arc;
    let turn = |result: &str| {
        vec![
            Arc::new(Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            }),
            Arc::new(Message::Tool {
                call_id: "c1".into(),
                content: result.into(),
            }),
            Arc::new(Message::Assistant {
                content: "done".into(),
                tool_calls: Vec::new(),
            }),
        ]
    };
    let (a, b, c) = (
        TurnTrace::of(&turn("x")),
        TurnTrace::of(&turn("x")),
        TurnTrace::of(&turn("y")),
    );
    assert_eq!(a, b);
    assert_eq!(a.calls, 1);
    assert_ne!(a.calls_digest, c.calls_digest);
    assert_eq!(a.reply, c.reply);
}

// ---- budget guard ---------------------------------------------------------------

#[test]
fn budget_guard_grants_grace_steps_then_disables_tools() {
    let budgets = Budgets {
        tokens: Some(1000),
        ..Budgets::default()
    };
    let used = GoalUsage {
        tokens: 900,
        ..GoalUsage::default()
    };
    let mut guard = BudgetGuard::new(&budgets, &used, 2);
    let zero = Duration::ZERO;
    assert_eq!(guard.before_call(99, zero), GuardDecision::Allow);
    assert!(matches!(
        guard.before_call(100, zero),
        GuardDecision::Summarize(_)
    ));
    assert!(matches!(
        guard.before_call(150, zero),
        GuardDecision::Summarize(_)
    ));
    assert!(
        matches!(guard.before_call(150, zero), GuardDecision::Disabled(m) if m.starts_with("tools are disabled"))
    );
    // Time budgets too.
    let timed = Budgets {
        seconds: Some(60),
        ..Budgets::default()
    };
    let mut guard = BudgetGuard::new(&timed, &GoalUsage::default(), 1);
    assert_eq!(
        guard.before_call(0, Duration::from_secs(59)),
        GuardDecision::Allow
    );
    assert!(matches!(
        guard.before_call(0, Duration::from_secs(60)),
        GuardDecision::Summarize(_)
    ));
    assert!(!BudgetGuard::new(&Budgets::default(), &used, 1).limits_anything());
}

// ---- continuations ----------------------------------------------------------------

#[test]
fn continuation_texts_carry_a_header_and_say_what_changed() {
    let mut g = goal(VerifyMode::Subagent);
    let first = g.take_continuation();
    assert!(first.contains("Objective:\nmake the tests pass"), "{first}");
    assert_eq!(
        ContinuationHeader::parse(&first),
        Some(ContinuationHeader {
            revision: 1,
            n: 1,
            kind: ContinuationKind::Continue
        })
    );
    let second = g.take_continuation();
    assert!(second.contains("Continue working on the goal") && !second.contains("Objective:"));
    g.command(GoalCommand::Edit {
        objective: "make the tests pass and document it".into(),
    })
    .unwrap();
    let edited = g.take_continuation();
    assert!(edited.contains("The goal was updated"), "{edited}");
    // Regression: `n` was read from the end of `revision="…"`.
    assert_eq!(
        ContinuationHeader::parse(&edited),
        Some(ContinuationHeader {
            revision: 2,
            n: 3,
            kind: ContinuationKind::Continue
        })
    );
    after_verdict(
        &mut g,
        2,
        &Verdict::Fail(vec!["no docs".into()]),
        spent(0),
        0,
    );
    g.breaker.count = 1;
    let next = g.take_continuation();
    assert!(
        next.contains("- no docs") && next.contains("Do not spin"),
        "{next}"
    );
    // Gaps are reported once.
    assert!(!g.take_continuation().contains("- no docs"));
    // The fifth continuation after the first is a status audit.
    let audit = g.take_continuation();
    assert_eq!(g.continuations, 6);
    assert!(audit.contains("Status audit"), "{audit}");
    g.command(GoalCommand::Pause).unwrap();
    g.command(GoalCommand::Resume).unwrap();
    assert!(g.take_continuation().contains("Call get_goal first"));
    let summary = g.take_summary();
    assert_eq!(
        ContinuationHeader::parse(&summary).map(|h| h.kind),
        Some(ContinuationKind::Summary)
    );
    assert_eq!(
        ContinuationHeader::parse("<cadre_internal_context source=\"goal\">"),
        None
    );
    assert_eq!(ContinuationHeader::parse("hello"), None);
}

fn check_recheck(
    tweak: impl FnOnce(&mut Goal),
    kind: ContinuationKind,
    user_waiting: bool,
    dependency: Option<&str>,
    expected: Recheck,
) {
    let mut g = goal(VerifyMode::Subagent);
    tweak(&mut g);
    let header = ContinuationHeader {
        revision: 1,
        n: 2,
        kind,
    };
    let got = recheck(RecheckInput {
        goal: Some(&g),
        header,
        user_waiting,
        dependency,
    });
    assert_eq!(got, expected);
}

#[test]
fn recheck_table() {
    use ContinuationKind::{Continue, Summary};
    let none = |_: &mut Goal| {};
    check_recheck(none, Continue, false, None, Recheck::Run);
    check_recheck(
        |g| g.revision = 3,
        Continue,
        false,
        None,
        Recheck::Drop("the goal changed after this continuation was written"),
    );
    check_recheck(
        |g| g.set(GoalStatus::Paused, StatusReason::UserRequested),
        Continue,
        false,
        None,
        Recheck::Drop("the goal is not active"),
    );
    check_recheck(
        |g| {
            g.budgets.turns = Some(1);
            g.usage.turns = 1;
        },
        Continue,
        false,
        None,
        Recheck::BudgetLimited(BudgetKind::Turns),
    );
    check_recheck(
        none,
        Continue,
        true,
        None,
        Recheck::Drop("a message from the user goes first"),
    );
    check_recheck(
        none,
        Continue,
        false,
        Some("an approval"),
        Recheck::Wait("an approval".into()),
    );
    check_recheck(
        |g| {
            g.set(GoalStatus::BudgetLimited, StatusReason::Tokens);
            g.summary_due = true;
        },
        Summary,
        false,
        None,
        Recheck::RunSummary,
    );
    check_recheck(
        none,
        Summary,
        false,
        None,
        Recheck::Drop("no summary is due"),
    );
    assert_eq!(
        recheck(RecheckInput {
            goal: None,
            header: ContinuationHeader {
                revision: 1,
                n: 1,
                kind: Continue
            },
            user_waiting: false,
            dependency: None,
        }),
        Recheck::Drop("the goal was cleared")
    );
}

// ---- a person's commands ----------------------------------------------------------

fn check_command(
    tweak: impl FnOnce(&mut Goal),
    command: GoalCommand,
    expected: Result<&str, GoalRefusal>,
) {
    let mut g = goal(VerifyMode::Subagent);
    tweak(&mut g);
    let before = g.revision;
    let got = g.command(command).map(|()| g.label());
    assert_eq!(got.as_deref().map_err(Clone::clone), expected);
    assert_eq!(g.revision, before + u64::from(expected.is_ok()));
}

#[test]
fn command_table() {
    let none = |_: &mut Goal| {};
    let limited = |kind: BudgetKind| {
        move |g: &mut Goal| {
            g.budgets.tokens = Some(10);
            g.usage.tokens = 10;
            g.set(GoalStatus::BudgetLimited, StatusReason::for_budget(kind));
            g.summary_due = true;
        }
    };
    check_command(none, GoalCommand::Pause, Ok("paused(user_requested)"));
    check_command(
        |g| g.set(GoalStatus::Paused, StatusReason::NoProgress),
        GoalCommand::Resume,
        Ok("active(user_resumed)"),
    );
    check_command(
        |g| g.set(GoalStatus::Blocked, StatusReason::WorkerReported),
        GoalCommand::Resume,
        Ok("active(user_resumed)"),
    );
    check_command(none, GoalCommand::Resume, Err(GoalRefusal::AlreadyActive));
    check_command(
        |g| g.set(GoalStatus::Paused, StatusReason::UserRequested),
        GoalCommand::Pause,
        Err(GoalRefusal::NotActive(GoalStatus::Paused)),
    );
    check_command(
        limited(BudgetKind::Tokens),
        GoalCommand::Resume,
        Err(GoalRefusal::BudgetSpent(Some(BudgetKind::Tokens))),
    );
    // Raising the spent budget reactivates; raising it too little does not.
    check_command(
        limited(BudgetKind::Tokens),
        GoalCommand::Budget(Budgets {
            tokens: Some(20),
            ..Budgets::default()
        }),
        Ok("active(budget_raised)"),
    );
    check_command(
        limited(BudgetKind::Tokens),
        GoalCommand::Budget(Budgets {
            tokens: Some(10),
            ..Budgets::default()
        }),
        Ok("budget_limited(tokens)"),
    );
    check_command(
        limited(BudgetKind::Tokens),
        GoalCommand::Budget(Budgets::default()),
        Ok("active(budget_raised)"),
    );
    check_command(
        limited(BudgetKind::Tokens),
        GoalCommand::TokenBudget(None),
        Ok("active(budget_raised)"),
    );
    check_command(none, GoalCommand::Complete, Ok("complete(user_marked)"));
    check_command(none, GoalCommand::Blocked, Ok("blocked(user_marked)"));
    check_command(
        |g| g.set(GoalStatus::Complete, StatusReason::VerifierMet),
        GoalCommand::Resume,
        Err(GoalRefusal::Complete),
    );
    check_command(
        none,
        GoalCommand::Edit {
            objective: "  ".into(),
        },
        Err(GoalRefusal::EmptyObjective),
    );
}

#[test]
fn token_counts_read_as_people_write_them() {
    let check =
        |text: &str, expected: Option<u64>| assert_eq!(parse_tokens(text), expected, "{text}");
    check("50000", Some(50_000));
    check("50K", Some(50_000));
    check("1.5m", Some(1_500_000));
    check("k", None);
    check("-3", None);
    check("", None);
}

#[test]
fn the_stored_form_round_trips() {
    let mut g = goal(VerifyMode::Command);
    g.settings.verify_command = Some("cargo test".into());
    g.take_continuation();
    let text = serde_json::to_string(&g).unwrap();
    assert_eq!(serde_json::from_str::<Goal>(&text).unwrap(), g);
}

// ---- generated sequences ----------------------------------------------------------

#[derive(Debug, Clone)]
enum Step {
    Turn {
        proposal: u8,
        end: u8,
        tokens: u64,
        calls: usize,
    },
    Verdict(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, 0u8..6, 0u64..400, 0usize..3).prop_map(|(proposal, end, tokens, calls)| {
            Step::Turn {
                proposal,
                end,
                tokens,
                calls,
            }
        }),
        (0u8..5).prop_map(Step::Verdict),
    ]
}

proptest! {
    /// No sequence of the worker's proposals completes a goal verified by
    /// a sub-agent or a command unless a verdict was PASS; and a goal over
    /// its budget never continues.
    #[test]
    fn no_completion_without_a_pass(
        command_mode in any::<bool>(),
        budget in proptest::option::of(100u64..3000),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mode = if command_mode { VerifyMode::Command } else { VerifyMode::Subagent };
        let mut g = goal(mode);
        g.budgets.tokens = budget;
        let mut passed = false;
        let mut pending_claim = false;
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Step::Turn { proposal, end, tokens, calls } => {
                    let proposal = match proposal {
                        0 => None,
                        1 => complete(),
                        _ => Some(Proposal::Blocked { reason: "stuck".into() }),
                    };
                    let end = [TurnEnd::Completed, TurnEnd::Completed, TurnEnd::Failed,
                        TurnEnd::Cancelled, TurnEnd::Withdrawn, TurnEnd::Provider][usize::from(end)];
                    let f = TurnFacts {
                        usage: spent(tokens),
                        end,
                        proposal,
                        trace: trace(&i.to_string(), calls, &i.to_string()),
                        ..facts(None)
                    };
                    let outcome = settle(&mut g, &f);
                    pending_claim = matches!(outcome, Settlement::Verify { .. });
                    if outcome == Settlement::Done(Settled::Continue) {
                        prop_assert!(g.spent().is_none());
                        prop_assert_eq!(g.status, GoalStatus::Active);
                    }
                }
                Step::Verdict(v) if pending_claim => {
                    let verdict = match v {
                        0 => { passed = true; Verdict::Pass }
                        1 => Verdict::Partial(vec![]),
                        2 => Verdict::Unparseable,
                        _ => Verdict::Fail(vec!["gap".into()]),
                    };
                    let revision = g.revision;
                    let next = after_verdict(&mut g, revision, &verdict, spent(50), 0);
                    pending_claim = false;
                    if next == Settled::Continue {
                        prop_assert!(g.spent().is_none());
                    }
                }
                Step::Verdict(_) => {}
            }
            if g.status == GoalStatus::Complete {
                prop_assert!(passed);
                prop_assert_eq!(g.reason, StatusReason::VerifierMet);
            }
        }
    }

    /// Once the budget is spent, no tool call runs, and after the grace
    /// steps the guard says tools are disabled.
    #[test]
    fn the_guard_never_lets_a_call_past_a_spent_budget(
        limit in 1u64..2000,
        grace in 1u32..4,
        spends in proptest::collection::vec(0u64..300, 1..30),
    ) {
        let budgets = Budgets { tokens: Some(limit), ..Budgets::default() };
        let mut guard = BudgetGuard::new(&budgets, &GoalUsage::default(), grace);
        let mut tokens = 0;
        let mut refusals = 0u32;
        for spend in spends {
            tokens += spend;
            match guard.before_call(tokens, Duration::ZERO) {
                GuardDecision::Allow => prop_assert!(tokens < limit),
                GuardDecision::Summarize(_) => {
                    refusals += 1;
                    prop_assert!(tokens >= limit && refusals <= grace);
                }
                GuardDecision::Disabled(_) => {
                    refusals += 1;
                    prop_assert!(tokens >= limit && refusals > grace);
                }
            }
        }
    }
}

#[test]
fn the_verifier_gets_the_objective_the_claim_and_the_calls_with_their_results() {
    use crate::message::{Message, ToolCall};
    use std::sync::Arc;
    let messages = vec![
        Arc::new(Message::user("go")),
        Arc::new(Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"cargo test\"}".into(),
            }],
        }),
        Arc::new(Message::Tool {
            call_id: "c1".into(),
            content: "exit 0\nok".into(),
        }),
    ];
    let text = verifier_request("tests pass", "ran the tests", &messages);
    assert!(text.starts_with("Objective:\ntests pass\n\nThe worker's claim:\nran the tests"));
    assert!(
        text.contains("- bash({\"command\":\"cargo test\"}) → exit 0 ⏎ ok"),
        "{text}"
    );
    assert!(verifier_request("x", "", &[]).contains("(no claim given)"));
}
mod session;
