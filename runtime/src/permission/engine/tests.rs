//! The order of the layers, data-driven: one `check` per case.

use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::permission::ProtectedPaths;
use crate::permission::call::Call;
use crate::permission::rules::{PermissionRules, RuleSet, Scope};
use crate::tool::{Tool, ToolRegistry};

const ROOT: &str = "/work/ws";
const PLAN: &str = "/data/sessions/s/artifacts/plan.md";

fn rules(user: &[&str], project: &[&str], session: &[&str]) -> RuleSet {
    let mut set = RuleSet::new();
    for (scope, texts) in [
        (Scope::User, user),
        (Scope::Project, project),
        (Scope::Session, session),
    ] {
        let mut table = PermissionRules::default();
        for text in texts {
            let (kind, rule) = text.split_once(' ').expect("'<kind> <rule>'");
            match kind {
                "allow" => table.allow.push(rule.into()),
                "ask" => table.ask.push(rule.into()),
                "deny" => table.deny.push(rule.into()),
                other => panic!("unknown kind {other}"),
            }
        }
        set.extend_from(scope, &table).expect("rules parse");
    }
    set
}

/// What an evaluation comes to, in one comparable string.
fn outcome(evaluation: &Evaluation) -> String {
    match evaluation {
        Evaluation::Decided(d) => {
            let verdict = match d.verdict {
                Verdict::Allow => "allow",
                Verdict::Deny => "deny",
            };
            let by = match (&d.rule, d.scope) {
                (Some(rule), Some(scope)) => format!("rule {scope} {rule}"),
                _ => d.layer.label().to_string(),
            };
            format!("{verdict} by {by}")
        }
        Evaluation::AskPerson { rule: Some(m), .. } => {
            format!("ask by rule {} {}", m.scope, m.rule)
        }
        Evaluation::AskPerson { rule: None, .. } => "ask".into(),
        Evaluation::Review { .. } => "review".into(),
    }
}

fn check(
    posture: &str,
    interactive: bool,
    rules: &RuleSet,
    tool: &str,
    args: Value,
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
    let got = evaluate(&policy, &call);
    assert_eq!(outcome(&got), expected, "{posture} {tool} {args}");
}

#[test]
fn read_only_calls_are_proven_safe_in_every_posture_unless_a_rule_says_otherwise() {
    let none = RuleSet::new();
    for posture in ["suggest", "auto", "bypass", "never"] {
        check(
            posture,
            false,
            &none,
            "read_file",
            json!({"path": "a.rs"}),
            "allow by deterministic floor",
        );
        check(
            posture,
            false,
            &none,
            "bash",
            json!({"command": "git status"}),
            "allow by deterministic floor",
        );
    }
    let deny_reads = rules(&["deny read_file(secrets/**)"], &[], &[]);
    check(
        "bypass",
        true,
        &deny_reads,
        "read_file",
        json!({"path": "secrets/key"}),
        "deny by rule user read_file(secrets/**)",
    );
    let ask_cat = rules(&[], &["ask bash(cat:*)"], &[]);
    check(
        "suggest",
        true,
        &ask_cat,
        "bash",
        json!({"command": "cat notes"}),
        "ask by rule project bash(cat:*)",
    );
}

#[test]
fn the_posture_decides_what_the_floor_cannot_prove() {
    let none = RuleSet::new();
    let write = json!({"path": "src/a.rs", "content": "x"});
    check("suggest", true, &none, "write_file", write.clone(), "ask");
    check(
        "suggest",
        false,
        &none,
        "write_file",
        write.clone(),
        "deny by posture",
    );
    check("auto", true, &none, "write_file", write.clone(), "review");
    check("auto", false, &none, "write_file", write.clone(), "review");
    check(
        "bypass",
        false,
        &none,
        "write_file",
        write.clone(),
        "allow by posture",
    );
    check("never", true, &none, "write_file", write, "deny by posture");
    check(
        "bypass",
        false,
        &none,
        "bash",
        json!({"command": "cargo build"}),
        "allow by posture",
    );
}

#[test]
fn rules_come_before_the_posture_and_deny_beats_ask_beats_allow() {
    let set = rules(
        &["allow write_file(src/**)", "allow bash(cargo test:*)"],
        &["ask write_file(src/main.rs)"],
        &["deny bash(cargo test --release:*)"],
    );
    let write = |p: &str| json!({"path": p, "content": "x"});
    check(
        "suggest",
        false,
        &set,
        "write_file",
        write("src/lib.rs"),
        "allow by rule user write_file(src/**)",
    );
    check(
        "suggest",
        true,
        &set,
        "write_file",
        write("src/main.rs"),
        "ask by rule project write_file(src/main.rs)",
    );
    check(
        "auto",
        true,
        &set,
        "write_file",
        write("src/main.rs"),
        "deny by rule project write_file(src/main.rs)",
    );
    check(
        "suggest",
        false,
        &set,
        "write_file",
        write("src/main.rs"),
        "deny by rule project write_file(src/main.rs)",
    );
    check(
        "suggest",
        false,
        &set,
        "bash",
        json!({"command": "cargo test -p x"}),
        "allow by rule user bash(cargo test:*)",
    );
    check(
        "bypass",
        false,
        &set,
        "bash",
        json!({"command": "cargo test --release"}),
        "deny by rule session bash(cargo test --release:*)",
    );
    check(
        "never",
        false,
        &set,
        "write_file",
        write("src/lib.rs"),
        "deny by posture",
    );
}

#[test]
fn the_floor_hard_blocks_in_every_posture_even_against_an_allow_rule() {
    let allow_push = rules(&[], &[], &["allow bash(git push:*)", "allow bash(nohup:*)"]);
    for posture in ["suggest", "auto", "bypass"] {
        for command in [
            "git push origin main",
            "nohup ./server &",
            "ls && cargo publish",
        ] {
            let args = json!({ "command": command });
            let got = {
                let registry = ToolRegistry::with_builtins();
                let bash = registry.get("bash").expect("bash");
                let protected = ProtectedPaths::new();
                let policy = Policy {
                    posture: posture.parse().expect("posture"),
                    rules: &allow_push,
                    interactive: true,
                    plan_file: Some(Path::new(PLAN)),
                    protected: &protected,
                };
                let call = Call::new(
                    bash.definition(),
                    &args,
                    bash.classify(&args),
                    Path::new(ROOT),
                );
                evaluate(&policy, &call)
            };
            assert_eq!(
                outcome(&got),
                "deny by deterministic floor",
                "{posture}: {command}"
            );
        }
    }
}

#[test]
fn the_agents_own_plan_file_and_task_list_need_no_approval() {
    let none = RuleSet::new();
    check(
        "suggest",
        false,
        &none,
        "write_file",
        json!({"path": PLAN, "content": "## Summary\n"}),
        "allow by deterministic floor",
    );
    check(
        "never",
        false,
        &none,
        "todo_write",
        json!({"todos": [{"content": "x", "status": "pending"}]}),
        "allow by deterministic floor",
    );
    check(
        "suggest",
        false,
        &none,
        "write_file",
        json!({"path": "plan.md", "content": "x"}),
        "deny by posture",
    );
}

#[test]
fn decision_lines_name_the_posture_the_layer_and_the_reason() {
    let guardian = Decision {
        risk: Some(Risk::Low),
        ..Decision::new(Verdict::Allow, Layer::Guardian, "lists files")
    };
    assert_eq!(
        guardian.line(Posture::Auto, "bash"),
        "Auto-Review allowed 'bash' (low risk, model guardian): lists files"
    );
    let floor = Decision::new(Verdict::Deny, Layer::Floor, "publishes");
    assert_eq!(
        floor.line(Posture::Bypass, "bash"),
        "Full Access denied 'bash' (deterministic floor): publishes"
    );
}

#[test]
fn decisions_say_how_the_call_reached_a_denied_or_protected_path() {
    let registry = ToolRegistry::with_builtins();
    let deny_env = rules(&["deny read_file(.env)"], &[], &[]);
    let protected = ProtectedPaths::new()
        .config_dir("/home/u/.config/cadre")
        .home("/home/u");
    let policy = Policy {
        posture: Posture::Bypass,
        rules: &deny_env,
        interactive: false,
        plan_file: Some(Path::new(PLAN)),
        protected: &protected,
    };
    let mut real = crate::permission::RealPaths::new();
    real.insert(Path::new(ROOT).join("l1"), Path::new(ROOT).join(".env"));
    let line = |tool: &str, args: Value| {
        let t = registry.get(tool).expect("tool");
        let call = Call::new(t.definition(), &args, t.classify(&args), Path::new(ROOT))
            .with_real_paths(&real);
        match evaluate(&policy, &call) {
            Evaluation::Decided(d) => d.line(Posture::Bypass, tool),
            other => format!("{other:?}"),
        }
    };
    assert_eq!(
        line("read_file", json!({"path": "l1"})),
        "Full Access denied 'read_file' (user rule read_file(.env)): denied by the user rule \
         read_file(.env): 'l1' leads to '.env'"
    );
    assert_eq!(
        line("bash", json!({"command": "tail -n 1 .env"})),
        "Full Access denied 'bash' (user rule read_file(.env)): denied by the user rule \
         read_file(.env): the command names '.env'"
    );
    assert_eq!(
        line(
            "bash",
            json!({"command": "echo 'posture = \"bypass\"' > ~/.config/cadre/config.toml"})
        ),
        "Full Access denied 'bash' (deterministic floor): the command names \
         '~/.config/cadre/config.toml', in cadre's configuration directory \
         (/home/u/.config/cadre), and is not proven read-only: protected in every posture, \
         and no rule lets a shell command write there"
    );
}

mod hooks;
