//! Authority only narrows: a property test over random parents, roles,
//! rules, depths and hop sequences; and the report builder.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::permission::rules::{PermissionRules, RuleKind, RuleSet, Scope};
use crate::permission::{Call, Evaluation, Policy, ProtectedPaths, Verdict, evaluate};
use crate::tool::ToolRegistry;

const DENY: &[&str] = &[
    "bash(git push:*)",
    "bash(rm:*)",
    "write_file(secrets/**)",
    "edit_file(*.lock)",
    "bash(curl:*)",
    "read_file(.env)",
];
const ASK: &[&str] = &[
    "bash(npm:*)",
    "write_file(Cargo.toml)",
    "bash(cargo publish:*)",
];
const ALLOW: &[&str] = &[
    "bash(cargo test:*)",
    "write_file(src/**)",
    "bash(rm -rf target)",
    "bash(git push:*)",
];
const TOOLS: &[&str] = &[
    "read_file",
    "list_dir",
    "grep",
    "write_file",
    "edit_file",
    "bash",
    "agent",
];
const SCOPES: &[&str] = &["src/**", "tests/**", "docs/*.md", "**/*.rs"];

/// Calls to hold every authority against.
fn calls() -> Vec<(&'static str, Value)> {
    vec![
        ("bash", json!({"command": "git push origin main"})),
        ("bash", json!({"command": "ls && git push"})),
        ("bash", json!({"command": "rm -rf target"})),
        ("bash", json!({"command": "curl http://example.com"})),
        ("bash", json!({"command": "cargo test -p x"})),
        ("bash", json!({"command": "npm install"})),
        ("bash", json!({"command": "git status"})),
        ("write_file", json!({"path": "secrets/key", "content": "x"})),
        ("write_file", json!({"path": "src/lib.rs", "content": "x"})),
        ("write_file", json!({"path": "Cargo.toml", "content": "x"})),
        (
            "edit_file",
            json!({"path": "Cargo.lock", "old_string": "a", "new_string": "b"}),
        ),
        ("read_file", json!({"path": ".env"})),
        ("read_file", json!({"path": "src/main.rs"})),
    ]
}

fn pick<'a>(pool: &'a [&'a str], mask: u32) -> Vec<String> {
    pool.iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, r)| r.to_string())
        .collect()
}

fn posture(n: u8) -> Posture {
    [
        Posture::Never,
        Posture::Suggest,
        Posture::Auto,
        Posture::Bypass,
    ][usize::from(n % 4)]
}

fn mode(n: u8) -> Mode {
    [Mode::Plan, Mode::Work, Mode::Operate][usize::from(n % 3)]
}

/// Whether a mode lets a call run at all (the execution gate, M3): Plan
/// runs only what is read-only.
fn mode_admits(mode: Mode, safety: crate::tool::Safety) -> bool {
    mode != Mode::Plan || safety == crate::tool::Safety::ReadOnly
}

/// A random role, from bits.
#[derive(Debug, Clone)]
struct RoleSeed {
    posture: Option<u8>,
    mode: Option<u8>,
    tools: Option<u32>,
    scope: Option<u32>,
    deny: u32,
    ask: u32,
    allow: u32,
    max_depth: Option<u32>,
}

impl RoleSeed {
    fn role(&self) -> RoleConfig {
        RoleConfig {
            posture: self.posture.map(posture),
            mode: self.mode.map(mode),
            allowed_tools: self.tools.map(|m| pick(TOOLS, m)),
            file_scope: self
                .scope
                .map(|m| pick(SCOPES, m))
                .filter(|s| !s.is_empty()),
            permissions: PermissionRules {
                deny: pick(DENY, self.deny),
                ask: pick(ASK, self.ask),
                allow: pick(ALLOW, self.allow),
            },
            max_depth: self.max_depth,
            ..RoleConfig::default()
        }
    }
}

fn role_seed() -> impl Strategy<Value = RoleSeed> {
    (
        (proptest::option::of(0u8..4), proptest::option::of(0u8..3)),
        proptest::option::of(0u32..128),
        proptest::option::of(0u32..16),
        0u32..64,
        0u32..8,
        0u32..16,
        proptest::option::of(0u32..4),
    )
        .prop_map(
            |((posture, mode), tools, scope, deny, ask, allow, max_depth)| RoleSeed {
                posture,
                mode,
                tools,
                scope,
                deny,
                ask,
                allow,
                max_depth,
            },
        )
}

/// One step down or across the tree.
#[derive(Debug, Clone)]
enum Hop {
    /// A new child of the current agent.
    Spawn(RoleSeed),
    /// The parent's posture changes (the user, or the ledger's fallback),
    /// then the current agent gets a follow-up: re-derived from the parent.
    Followup(u8),
    /// The session is resumed: the current agent re-derived as it is.
    Resume,
}

fn hop() -> impl Strategy<Value = Hop> {
    prop_oneof![
        3 => role_seed().prop_map(Hop::Spawn),
        2 => (0u8..4).prop_map(Hop::Followup),
        1 => Just(Hop::Resume),
    ]
}

/// How much an evaluation lets happen without a person: 2 runs, 1 the
/// guardian may run, 0 only a person or nobody.
fn automatic(evaluation: &Evaluation) -> u8 {
    match evaluation {
        Evaluation::Decided(d) if d.verdict == Verdict::Allow => 2,
        Evaluation::Review { .. } => 1,
        Evaluation::Decided(_) | Evaluation::AskPerson { .. } => 0,
    }
}

fn evaluation(
    authority: &Authority,
    registry: &ToolRegistry,
    tool: &str,
    args: &Value,
) -> Evaluation {
    let t = registry.get(tool).expect("tool");
    let protected = ProtectedPaths::new();
    let policy = Policy {
        posture: authority.posture,
        rules: &authority.rules,
        interactive: true,
        plan_file: Some(Path::new("/data/plan.md")),
        protected: &protected,
    };
    evaluate(
        &policy,
        &Call::new(t.definition(), args, t.classify(args), Path::new("/ws")),
    )
}

/// Checks one parent → child hop: the order, and the calls `mask` picks.
fn check_hop(
    parent: &Authority,
    child: &Authority,
    registry: &ToolRegistry,
    mask: u32,
) -> Result<(), TestCaseError> {
    prop_assert!(
        child.within(parent),
        "child {child:?}\nnot within parent {parent:?}"
    );
    let picked = calls()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0);
    for (_, (tool, args)) in picked {
        let safety = registry.get(tool).expect("tool").classify(&args);
        prop_assert!(
            !mode_admits(child.mode, safety) || mode_admits(parent.mode, safety),
            "{tool} {args}: the child's mode {} runs what the parent's {} refuses",
            child.mode,
            parent.mode
        );
        let p = evaluation(parent, registry, tool, &args);
        let c = evaluation(child, registry, tool, &args);
        let t = registry.get(tool).expect("tool");
        let call = Call::new(t.definition(), &args, t.classify(&args), Path::new("/ws"));
        if let Some(m) = parent.rules.decide(&call)
            && m.kind == RuleKind::Deny
        {
            prop_assert!(
                matches!(&c, Evaluation::Decided(d) if d.verdict == Verdict::Deny),
                "{tool} {args}: the parent's deny rule {} does not hold in the child: {c:?}",
                m.rule
            );
        }
        prop_assert!(
            automatic(&c) <= automatic(&p),
            "{tool} {args}: the child ({:?}) may do more than the parent ({:?}): {c:?} vs {p:?}",
            child.posture,
            parent.posture
        );
        if !child.allows_tool(tool) {
            prop_assert!(!parent.allows_tool(tool) || child.allowed_tools.is_some());
        }
    }
    Ok(())
}

/// The built-ins, compiled once for all cases.
fn registry() -> &'static ToolRegistry {
    static REGISTRY: std::sync::OnceLock<ToolRegistry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(ToolRegistry::with_builtins)
}

fn root(
    (posture_n, mode_n): (u8, u8),
    deny: u32,
    ask: u32,
    allow: u32,
    tools: Option<u32>,
) -> Authority {
    let mut rules = RuleSet::new();
    let table = PermissionRules {
        deny: pick(DENY, deny),
        ask: pick(ASK, ask),
        allow: pick(ALLOW, allow),
    };
    rules.extend_from(Scope::Project, &table).expect("rules");
    let mut authority = Authority::root(
        mode(mode_n),
        posture(posture_n),
        Arc::new(rules),
        DEFAULT_MAX_DEPTH,
    );
    authority.allowed_tools = tools.map(|m| pick(TOOLS, m).into_iter().collect::<BTreeSet<_>>());
    authority
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn authority_only_narrows_at_every_hop(
        posture_n in 0u8..4,
        mode_n in 0u8..3,
        deny in 0u32..64,
        ask in 0u32..8,
        allow in 0u32..16,
        tools in proptest::option::of(0u32..128),
        hops in proptest::collection::vec(hop(), 1..6),
        // Each case holds a few of the calls against every hop; across ten
        // thousand cases every call meets every kind of hop many times.
        mask in proptest::bits::u32::sampled(1..5, 0..13),
    ) {
        let registry = registry();
        // The chain from the session down to the current agent, with the
        // role each one was spawned with.
        let mut chain: Vec<(Authority, RoleConfig)> = vec![(root((posture_n, mode_n), deny, ask, allow, tools), RoleConfig::default())];
        for hop in hops {
            match hop {
                Hop::Spawn(seed) => {
                    let parent = &chain.last().expect("chain").0;
                    let role = seed.role();
                    match parent.narrow("r", &role) {
                        Ok(child) => {
                            check_hop(parent, &child, registry, mask)?;
                            chain.push((child, role));
                        }
                        Err(SpawnRefusal::TooDeep { depth, max_depth }) => {
                            prop_assert!(depth >= max_depth && parent.depth == depth);
                        }
                        Err(other) => prop_assert!(false, "unexpected refusal {other}"),
                    }
                }
                Hop::Followup(new_posture) => {
                    if chain.len() < 2 {
                        continue;
                    }
                    let at = chain.len() - 2;
                    // The parent's posture changes; it can only be as wide as
                    // its own parent allows.
                    let ceiling = if at == 0 { Posture::Bypass } else { chain[at - 1].0.posture };
                    chain[at].0.posture = posture(new_posture).narrower(ceiling);
                    let (parent, role) = (&chain[at].0, &chain[at + 1].1);
                    let child = parent.narrow("r", role).expect("re-derivable");
                    check_hop(parent, &child, registry, mask)?;
                    chain[at + 1].0 = child;
                }
                Hop::Resume => {
                    if chain.len() < 2 {
                        continue;
                    }
                    let at = chain.len() - 2;
                    let child = chain[at].0.narrow("r", &chain[at + 1].1).expect("re-derivable");
                    check_hop(&chain[at].0, &child, registry, mask)?;
                    chain[at + 1].0 = child;
                }
            }
        }
        // Every descendant is within every ancestor, not only its parent.
        for (i, (ancestor, _)) in chain.iter().enumerate() {
            for (descendant, _) in &chain[i + 1..] {
                prop_assert!(descendant.posture <= ancestor.posture);
                prop_assert!(descendant.mode.within(ancestor.mode));
                prop_assert!(descendant.rules.contains_all(&ancestor.rules));
                prop_assert!(ancestor.file_scopes.iter().all(|s| descendant.file_scopes.contains(s)));
            }
        }
    }
}

#[test]
fn a_role_cannot_widen_posture_tools_or_rules() {
    let parent = root((1, 1), 0b1, 0, 0, Some(0b1001)); // suggest; deny git push; read_file + write_file
    let greedy = RoleConfig {
        posture: Some(Posture::Bypass),
        allowed_tools: Some(vec!["bash".into(), "read_file".into()]),
        permissions: PermissionRules {
            allow: vec!["bash(git push:*)".into()],
            ..PermissionRules::default()
        },
        ..RoleConfig::default()
    };
    let child = parent.narrow("greedy", &greedy).expect("spawns");
    assert_eq!(child.posture, Posture::Suggest);
    assert_eq!(
        child.allowed_tools,
        Some(BTreeSet::from(["read_file".to_string()]))
    );
    assert!(
        !child.rules.iter().any(|r| r.kind() == RuleKind::Allow),
        "a role's allow rule was kept"
    );
    assert!(child.within(&parent));
}

#[test]
fn a_work_session_can_start_a_plan_child_but_a_plan_parent_never_a_work_one() {
    let work = root((1, 1), 0, 0, 0, None);
    let reader = RoleConfig {
        mode: Some(Mode::Plan),
        ..RoleConfig::default()
    };
    let child = work.narrow("verifier", &reader).expect("spawns");
    assert_eq!(child.mode, Mode::Plan);
    assert!(child.within(&work));
    let plan = root((1, 0), 0, 0, 0, None);
    let widening = RoleConfig {
        mode: Some(Mode::Operate),
        ..RoleConfig::default()
    };
    let child = plan.narrow("worker", &widening).expect("spawns");
    assert_eq!(child.mode, Mode::Plan, "a role cannot widen the mode");
    let mut forged = child.clone();
    forged.mode = Mode::Work;
    assert!(!forged.within(&plan));
}

#[test]
fn the_depth_limit_refuses_with_the_numbers() {
    let mut agent = root((3, 1), 0, 0, 0, None);
    for expected in 1..=DEFAULT_MAX_DEPTH {
        agent = agent
            .narrow("w", &RoleConfig::default())
            .expect("within the limit");
        assert_eq!(agent.depth, expected);
    }
    let refused = agent
        .narrow("w", &RoleConfig::default())
        .expect_err("too deep");
    assert_eq!(
        refused.to_string(),
        "the sub-agent depth limit (3) is reached: an agent at depth 3 cannot start another"
    );
}

#[test]
fn reports_come_from_what_happened() {
    use crate::protocol::{Event, ToolStatus, Usage};
    let call = |id: &str, name: &str, arguments: Value| Event::ToolCall {
        turn_id: 1,
        call_id: id.into(),
        name: name.into(),
        arguments,
    };
    let result = |id: &str, name: &str, status: ToolStatus, output: &str| Event::ToolResult {
        turn_id: 1,
        call_id: id.into(),
        name: name.into(),
        status,
        error_code: None,
        output: output.into(),
    };
    let mut builder = ReportBuilder::new("2", "fixer");
    let events = vec![
        call(
            "a",
            "write_file",
            json!({"path": "src/a.rs", "content": "x"}),
        ),
        result(
            "a",
            "write_file",
            ToolStatus::Ok,
            "wrote 1 bytes to src/a.rs",
        ),
        call(
            "b",
            "write_file",
            json!({"path": "src/b.rs", "content": "x"}),
        ),
        result("b", "write_file", ToolStatus::Error, "denied"),
        call("c", "bash", json!({"command": "cargo test"})),
        result("c", "bash", ToolStatus::Error, "exit code: 101\nfailures"),
        Event::AssistantMessage {
            turn_id: 1,
            text: "Fixed a.rs.\n\n## Risks\n- b.rs untouched\n\n## Blockers\n- none\n".into(),
        },
    ];
    for event in &events {
        assert_eq!(builder.push(event), None);
    }
    let report = builder
        .push(&Event::TurnCompleted {
            turn_id: 1,
            usage: Usage::default(),
            iterations: 3,
            context: None,
        })
        .expect("the run ended");
    assert_eq!(report.changes, ["src/a.rs"]);
    assert_eq!(
        report.evidence,
        [Evidence {
            command: "cargo test".into(),
            exit_code: Some(101)
        }]
    );
    assert_eq!(report.risks, ["b.rs untouched"]);
    assert!(report.blockers.is_empty());
    assert!(report.verified);
    assert!(report.render().contains("- `cargo test` → exit 101"));

    let mut claims = ReportBuilder::new("3", "fixer");
    claims.push(&call("w", "edit_file", json!({"path": "src/c.rs"})));
    claims.push(&result("w", "edit_file", ToolStatus::Ok, "replaced"));
    let report = claims
        .push(&Event::TurnCompleted {
            turn_id: 1,
            usage: Usage::default(),
            iterations: 2,
            context: None,
        })
        .expect("ended");
    assert!(!report.verified, "a change without a check is a claim");
    assert!(report.render().contains("UNVERIFIED"));
}

#[test]
fn a_failed_runs_report_names_a_cancel_and_a_pause_and_is_failed_otherwise() {
    use crate::protocol::{Event, FailureCategory, Usage};
    for (category, status) in [
        (FailureCategory::Agent, "failed"),
        (FailureCategory::Infrastructure, "failed"),
        (FailureCategory::Cancelled, "cancelled"),
        (FailureCategory::PausedByDenials, "paused_by_denials"),
    ] {
        let report = ReportBuilder::new("2", "fixer")
            .push(&Event::TurnFailed {
                turn_id: 1,
                category,
                message: "it stopped".into(),
                retryable: false,
                usage: Usage::default(),
                iterations: 1,
            })
            .expect("the run ended");
        assert_eq!(report.status, status, "{category:?}");
        assert_eq!(report.blockers, ["it stopped"], "{category:?}");
    }
}

#[test]
fn host_tools_marked_shell_or_path_writer_count_as_evidence_and_changes() {
    use crate::protocol::{Event, ToolStatus, Usage};
    use crate::tool::{Safety, ToolDefinition};
    let tools = [
        ToolDefinition::new("mcp_sh_run", "", json!({}), Safety::SideEffect).as_shell(),
        ToolDefinition::new("mcp_fs_put", "", json!({}), Safety::SideEffect)
            .taking_path("file")
            .writing_path_only(),
        ToolDefinition::new("mcp_fs_read", "", json!({}), Safety::ReadOnly).taking_path("file"),
    ];
    let mut builder = ReportBuilder::for_tools("4", "porter", &tools);
    let events = [
        (
            "a",
            "mcp_fs_put",
            json!({"file": "src/x.rs"}),
            ToolStatus::Ok,
            "put",
        ),
        (
            "b",
            "mcp_fs_read",
            json!({"file": "src/y.rs"}),
            ToolStatus::Ok,
            "text",
        ),
        (
            "c",
            "mcp_sh_run",
            json!({"command": "make check"}),
            ToolStatus::Ok,
            "exit code: 0\n",
        ),
        (
            "d",
            "bash",
            json!({"command": "ls"}),
            ToolStatus::Ok,
            "exit code: 0\n",
        ),
    ];
    for (id, name, arguments, status, output) in events {
        builder.push(&Event::ToolCall {
            turn_id: 1,
            call_id: id.into(),
            name: name.into(),
            arguments,
        });
        builder.push(&Event::ToolResult {
            turn_id: 1,
            call_id: id.into(),
            name: name.into(),
            status,
            error_code: None,
            output: output.into(),
        });
    }
    let report = builder
        .push(&Event::TurnCompleted {
            turn_id: 1,
            usage: Usage::default(),
            iterations: 2,
            context: None,
        })
        .expect("ended");
    // `bash` is not among this agent's tools: its name alone makes it nothing.
    assert_eq!(
        (report.changes, report.evidence),
        (
            vec!["src/x.rs".to_string()],
            vec![Evidence {
                command: "make check".into(),
                exit_code: Some(0)
            }]
        )
    );
}
