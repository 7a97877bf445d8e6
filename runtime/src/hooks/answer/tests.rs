use pretty_assertions::assert_eq;

use super::*;

fn check(code: Option<i32>, stdout: &str, stderr: &str, expected: HookOutcome) {
    assert_eq!(read_answer(code, stdout, stderr), expected);
}

fn answered(decision: Option<HookDecision>, reason: Option<&str>) -> HookOutcome {
    HookOutcome::Answered(HookAnswer {
        decision,
        reason: reason.map(str::to_string),
        ..HookAnswer::default()
    })
}

#[test]
fn exit_codes_and_json() {
    check(Some(0), "", "", answered(None, None));
    check(Some(0), " \n", "noise", answered(None, None));
    check(
        Some(0),
        r#"{"decision": "deny", "reason": "no migrations"}"#,
        "",
        answered(Some(HookDecision::Deny), Some("no migrations")),
    );
    check(
        Some(0),
        r#"{"decision": "allow"}"#,
        "",
        answered(Some(HookDecision::Allow), None),
    );
    check(
        Some(2),
        "",
        "edits under migrations/ are refused\n",
        answered(
            Some(HookDecision::Deny),
            Some("edits under migrations/ are refused"),
        ),
    );
    check(
        Some(2),
        "",
        "",
        answered(Some(HookDecision::Deny), Some("it exited with code 2")),
    );
    check(
        Some(1),
        "",
        "boom\nmore",
        HookOutcome::Failed("it exited with code 1: boom".into()),
    );
    check(
        None,
        "",
        "",
        HookOutcome::Failed("it was killed by a signal".into()),
    );
}

#[test]
fn unreadable_output_is_a_failure() {
    for stdout in [
        "yes",
        r#"{"decision": "maybe"}"#,
        r#"{"verdict": "deny"}"#,
        "[1]",
    ] {
        assert!(
            matches!(read_answer(Some(0), stdout, ""), HookOutcome::Failed(_)),
            "{stdout}"
        );
    }
}

fn named(outcomes: Vec<HookOutcome>) -> Vec<(String, HookOutcome)> {
    outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| (format!("h{i}"), o))
        .collect()
}

#[test]
fn the_first_deny_wins_then_the_first_ask() {
    let ask = answered(Some(HookDecision::Ask), Some("look"));
    let deny = answered(Some(HookDecision::Deny), Some("no"));
    let allow = answered(Some(HookDecision::Allow), None);
    assert_eq!(
        verdict(&named(vec![allow.clone(), ask.clone(), deny])),
        HookVerdict::Deny {
            hook: "h2".into(),
            reason: "no".into()
        }
    );
    assert_eq!(
        verdict(&named(vec![allow.clone(), ask])),
        HookVerdict::Ask {
            hook: "h1".into(),
            reason: "look".into()
        }
    );
    assert_eq!(verdict(&named(vec![allow])), HookVerdict::NoObjection);
    assert_eq!(verdict(&[]), HookVerdict::NoObjection);
}

#[test]
fn a_failure_denies_a_call() {
    assert_eq!(
        verdict(&named(vec![HookOutcome::Failed(
            "it did not answer within 1 s and was killed".into()
        )])),
        HookVerdict::Deny {
            hook: "h0".into(),
            reason: "the hook failed (it did not answer within 1 s and was killed); a \
                     pre_tool_use hook fails closed"
                .into()
        }
    );
}

#[test]
fn stop_hooks_continue_with_their_messages() {
    let keep = |message: Option<&str>| {
        HookOutcome::Answered(HookAnswer {
            keep_going: Some(true),
            message: message.map(str::to_string),
            ..HookAnswer::default()
        })
    };
    assert_eq!(
        continuation(&named(vec![
            keep(Some("cargo test fails: fix it")),
            answered(None, None),
            HookOutcome::Failed("x".into()),
            keep(None),
        ])),
        Some("cargo test fails: fix it\n\nThe hook `h3` asks you to keep working.".into())
    );
    assert_eq!(
        continuation(&named(vec![
            answered(None, None),
            HookOutcome::Failed("x".into())
        ])),
        None
    );
}

#[test]
fn context_and_reported_failures() {
    let context = HookOutcome::Answered(HookAnswer {
        additional_context: Some("formatted src/lib.rs".into()),
        ..HookAnswer::default()
    });
    let outcomes = named(vec![
        context,
        HookOutcome::Failed("it exited with code 1".into()),
    ]);
    assert_eq!(
        additional_context(&outcomes),
        Some("formatted src/lib.rs".into())
    );
    assert_eq!(
        report_failures(HookEvent::PostToolUse, &outcomes),
        ["the post_tool_use hook `h1` failed: it exited with code 1"]
    );
}
