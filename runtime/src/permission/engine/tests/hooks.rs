//! The `pre_tool_use` layer in the order: after the rules, before the
//! floor; it denies or asks, and its "allow" lifts nothing.

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::hooks::HookVerdict;

fn deny() -> HookVerdict {
    HookVerdict::Deny {
        hook: "guard".into(),
        reason: "no".into(),
    }
}

fn ask() -> HookVerdict {
    HookVerdict::Ask {
        hook: "guard".into(),
        reason: "look".into(),
    }
}

fn check_hooked(
    posture: &str,
    interactive: bool,
    rules: &RuleSet,
    (tool, args): (&str, Value),
    hook: HookVerdict,
    expected: &str,
) {
    let registry = ToolRegistry::with_builtins();
    let tool_ref: &Arc<dyn Tool> = registry.get(tool).expect("tool");
    let safety = tool_ref.classify(&args);
    let protected = ProtectedPaths::new();
    let policy = Policy {
        posture: posture.parse().expect("posture"),
        rules,
        interactive,
        plan_file: Some(Path::new(PLAN)),
        protected: &protected,
    };
    let call = Call::new(tool_ref.definition(), &args, safety, Path::new(ROOT));
    let got = evaluate_with_hook(&policy, &call, &hook);
    assert_eq!(outcome(&got), expected, "{posture} {tool} {args} {hook:?}");
}

#[test]
fn a_hook_denies_after_the_rules_and_before_the_floor() {
    let none = RuleSet::new();
    let write = || ("write_file", json!({"path": "a.rs", "content": ""}));
    let read = || ("read_file", json!({"path": "a.rs"}));
    // Past an allow rule, Full Access, and the floor's proof.
    check_hooked("bypass", true, &none, write(), deny(), "deny by hook");
    let allow = rules(&["allow write_file(**)"], &[], &[]);
    check_hooked("suggest", true, &allow, write(), deny(), "deny by hook");
    check_hooked("never", false, &none, read(), deny(), "deny by hook");
    // A deny rule decides first.
    let denied = rules(&["deny write_file(a.rs)"], &[], &[]);
    check_hooked(
        "bypass",
        true,
        &denied,
        write(),
        deny(),
        "deny by rule user write_file(a.rs)",
    );
    // The plan file and the task list too.
    check_hooked(
        "bypass",
        true,
        &none,
        ("write_file", json!({"path": PLAN, "content": ""})),
        deny(),
        "deny by hook",
    );
}

#[test]
fn a_hook_ask_asks_a_person_where_one_can_answer() {
    let none = RuleSet::new();
    let read = || ("read_file", json!({"path": "a.rs"}));
    let write = || ("write_file", json!({"path": "a.rs", "content": ""}));
    check_hooked("bypass", true, &none, read(), ask(), "ask");
    check_hooked("bypass", false, &none, write(), ask(), "deny by hook");
    check_hooked("auto", true, &none, write(), ask(), "deny by hook");
    let allow = rules(&["allow write_file(**)"], &[], &[]);
    check_hooked("suggest", true, &allow, write(), ask(), "ask");
    // The floor's blocks still win.
    check_hooked(
        "bypass",
        true,
        &none,
        ("bash", json!({"command": "git push"})),
        ask(),
        "deny by deterministic floor",
    );
    check_hooked(
        "bypass",
        true,
        &none,
        ("write_file", json!({"path": ".git/config", "content": ""})),
        ask(),
        "deny by deterministic floor",
    );
}

fn tool_call() -> impl Strategy<Value = (&'static str, Value)> {
    let path = prop::sample::select(vec![
        "a.rs",
        "src/x.rs",
        ".git/config",
        ".cadre/config.toml",
        "../out",
        PLAN,
        "migrations/1.sql",
    ]);
    let command = prop::sample::select(vec![
        "ls",
        "git status",
        "git push",
        "rm -rf /",
        "touch a",
        "cargo test",
        "curl x | sh",
        "echo hi > .git/HEAD",
        "nohup sleep 1 &",
    ]);
    prop_oneof![
        path.clone().prop_map(|p| ("read_file", json!({"path": p}))),
        path.clone()
            .prop_map(|p| ("write_file", json!({"path": p, "content": ""}))),
        path.prop_map(|p| (
            "edit_file",
            json!({"path": p, "old_string": "a", "new_string": "b"})
        )),
        command
            .clone()
            .prop_map(|c| ("bash", json!({"command": c}))),
        command.prop_map(|c| ("process", json!({"action": "start", "command": c}))),
        Just(("process", json!({"action": "list"}))),
    ]
}

fn rule_set() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "allow write_file(**)",
            "allow bash(git push:*)",
            "allow bash(touch:*)",
            "ask read_file(src/**)",
            "deny bash(rm:*)",
            "deny write_file(a.rs)",
            "allow process(*)",
        ]),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Whatever the posture, rules and call: a hook's "allow" changes
    /// nothing, its deny always denies, its ask never allows.
    #[test]
    fn a_hook_only_narrows(
        posture in prop::sample::select(vec!["suggest", "auto", "bypass", "never"]),
        interactive in any::<bool>(),
        rule_texts in rule_set(),
        (tool, args) in tool_call(),
    ) {
        let rules = rules(&rule_texts, &[], &[]);
        let registry = ToolRegistry::with_builtins();
        let tool_ref: &Arc<dyn Tool> = registry.get(tool).expect("tool");
        let safety = tool_ref.classify(&args);
        let protected = ProtectedPaths::new();
        let policy = Policy {
            posture: posture.parse().expect("posture"),
            rules: &rules,
            interactive,
            plan_file: Some(Path::new(PLAN)),
            protected: &protected,
        };
        let call = Call::new(tool_ref.definition(), &args, safety, Path::new(ROOT));
        let without = evaluate(&policy, &call);
        prop_assert_eq!(
            outcome(&evaluate_with_hook(&policy, &call, &HookVerdict::NoObjection)),
            outcome(&without)
        );
        let denied = evaluate_with_hook(&policy, &call, &deny());
        prop_assert!(matches!(&denied, Evaluation::Decided(d) if d.verdict == Verdict::Deny));
        let asked = evaluate_with_hook(&policy, &call, &ask());
        let allowed = |e: &Evaluation| matches!(e, Evaluation::Decided(d) if d.verdict == Verdict::Allow);
        prop_assert!(!allowed(&asked), "{:?}", asked);
        // What the other layers refuse, no hook answer lets through.
        if matches!(&without, Evaluation::Decided(d) if d.verdict == Verdict::Deny) {
            prop_assert!(!allowed(&denied) && !allowed(&asked));
        }
    }
}
