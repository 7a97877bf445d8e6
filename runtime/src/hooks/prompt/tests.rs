use pretty_assertions::assert_eq;

use super::*;
use crate::hooks::answer::HookAnswer;

fn answered(decision: Option<HookDecision>, context: Option<&str>) -> HookOutcome {
    HookOutcome::Answered(HookAnswer {
        decision,
        reason: decision.map(|_| "a reason".to_string()),
        additional_context: context.map(str::to_string),
        ..HookAnswer::default()
    })
}

fn check(outcomes: &[HookOutcome], expected: PromptVerdict) {
    let named: Vec<(String, HookOutcome)> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| (format!("hook{i}"), o.clone()))
        .collect();
    assert_eq!(prompt_verdict(&named), expected);
}

#[test]
fn a_deny_or_a_failure_refuses_and_context_adds_up() {
    check(&[], PromptVerdict::Admit { context: None });
    check(
        &[
            answered(None, Some("branch: main")),
            answered(Some(HookDecision::Allow), None),
            answered(Some(HookDecision::Ask), Some("ticket 12")),
        ],
        PromptVerdict::Admit {
            context: Some("branch: main\nticket 12".into()),
        },
    );
    check(
        &[
            answered(None, Some("branch: main")),
            answered(Some(HookDecision::Deny), None),
            HookOutcome::Failed("boom".into()),
        ],
        PromptVerdict::Refuse {
            hook: "hook1".into(),
            reason: "a reason".into(),
        },
    );
    check(
        &[
            answered(None, None),
            HookOutcome::Failed("it timed out".into()),
        ],
        PromptVerdict::Refuse {
            hook: "hook1".into(),
            reason: "the hook failed (it timed out); a user_prompt_submit hook fails closed".into(),
        },
    );
}

#[test]
fn context_follows_the_text_under_its_event() {
    assert_eq!(with_context("fix it", "session_start", None), "fix it");
    assert_eq!(
        with_context("fix it", "session_start", Some(" \n")),
        "fix it"
    );
    assert_eq!(
        with_context("fix it", "user_prompt_submit", Some("branch: main\n")),
        "fix it\n\n[user_prompt_submit hook]\nbranch: main"
    );
}
