//! No call at any depth skips a matching `pre_tool_use` hook: over
//! generated trees of agents (sub-agents, verifiers, workflow steps, steps
//! sent to a node as an order) and generated calls, every agent runs
//! exactly the hooks its root would for the same call.

use std::sync::Arc;

use cadre_actors::hooks::AgentHooks;
use cadre_actors::kernel::{AgentSpec, Child};
use cadre_runtime::Mode;
use cadre_runtime::agent::{Authority, LiveAuthority};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::hooks::{HookSet, HookSpec, matching};
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::permission::rules::RuleSet;
use cadre_runtime::permission::{Call, Posture};
use cadre_runtime::tool::{Safety, Workspace, builtin_definitions};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::cluster::wire::Order;

#[derive(Debug, Clone, Copy)]
enum Hop {
    SubAgent(Mode, Posture),
    Verifier,
    Step(Mode),
    Node,
}

fn hop() -> impl Strategy<Value = Hop> {
    let mode = prop::sample::select(vec![Mode::Plan, Mode::Work, Mode::Operate]);
    let posture = prop::sample::select(vec![
        Posture::Suggest,
        Posture::Auto,
        Posture::Bypass,
        Posture::Never,
    ]);
    prop_oneof![
        (mode.clone(), posture).prop_map(|(m, p)| Hop::SubAgent(m, p)),
        Just(Hop::Verifier),
        mode.prop_map(Hop::Step),
        Just(Hop::Node),
    ]
}

fn hooks() -> HookSet {
    let hook = |matcher: Option<&str>| HookSpec {
        matcher: matcher.map(str::to_string),
        command: format!("guard {matcher:?}"),
        timeout: None,
    };
    HookSet {
        pre_tool_use: vec![
            hook(Some("write_file(migrations/**)")),
            hook(Some("bash(cargo test:*)")),
            hook(Some("read_file")),
            hook(None),
        ],
        ..HookSet::default()
    }
}

fn call() -> impl Strategy<Value = (&'static str, Value)> {
    prop_oneof![
        prop::sample::select(vec![
            "migrations/1.sql",
            "./migrations/../migrations/x",
            "src/a.rs"
        ])
        .prop_map(|p| ("write_file", json!({"path": p, "content": ""}))),
        prop::sample::select(vec!["cargo test", "cd a && cargo test -q", "ls"])
            .prop_map(|c| ("bash", json!({"command": c}))),
        Just(("read_file", json!({"path": "a"}))),
        Just(("process", json!({"action": "list"}))),
    ]
}

/// The agent one hop below `parent`, built the way each hop builds it.
fn below(parent: &AgentSpec, hop: Hop, n: u32) -> AgentSpec {
    let role = |mode: Option<Mode>, posture: Option<Posture>| RoleConfig {
        mode,
        posture,
        ..RoleConfig::default()
    };
    let (name, narrowed) = match hop {
        Hop::SubAgent(mode, posture) => ("worker", role(Some(mode), Some(posture))),
        Hop::Verifier => ("verifier", role(Some(Mode::Plan), Some(Posture::Never))),
        Hop::Step(mode) => ("step", role(Some(mode), None)),
        Hop::Node => ("remote", role(None, None)),
    };
    let mut authority = parent.authority.clone();
    authority.max_depth = authority.max_depth.max(authority.depth + 1);
    let authority = authority
        .narrow(name, &narrowed)
        .unwrap_or_else(|_| parent.authority.clone());
    let path = parent.path.child(n);
    let mut spec = parent.child(Child {
        path: path.clone(),
        role: name.into(),
        authority,
        live: LiveAuthority::root(parent.authority.mode, parent.authority.posture),
        model: None,
        prompt: None,
        dir: parent.paths.dir.join(path.to_string()),
    });
    match hop {
        Hop::SubAgent(..) | Hop::Verifier => {}
        Hop::Step(_) => {
            spec.session_id = format!("run-{n}");
            spec.step = Some(format!("step{n}"));
        }
        Hop::Node => {
            // What crosses to the node, and what the node runs the agent with.
            let order = Order {
                coordinator: "c".into(),
                attempt: u64::from(n),
                run_id: spec.session_id.clone(),
                path: spec.path.clone(),
                role: spec.role.clone(),
                caller: (&parent.authority).into(),
                authority: (&spec.authority).into(),
                live: (parent.authority.mode, parent.authority.posture),
                model: None,
                system_prompt: None,
                max_iterations: 5,
                workspace: spec.workspace.root().to_path_buf(),
                interactive: false,
                prompt: "go".into(),
                hooks: (*spec.hooks).clone(),
                step: spec.step.clone(),
            };
            let wire = serde_json::to_string(&order).expect("an order serializes");
            let received: Order = serde_json::from_str(&wire).expect("and reads back");
            let mut template = AgentSpec::session(
                "node",
                spec.workspace.clone(),
                SessionPaths {
                    dir: spec.paths.dir.clone(),
                },
                Authority::root(Mode::Work, Posture::Suggest, Arc::new(RuleSet::new()), 4),
            );
            template.hooks = Arc::default();
            let mut remote = template.child(Child {
                path: received.path.clone(),
                role: received.role.clone(),
                authority: spec.authority.clone(),
                live: LiveAuthority::root(received.live.0, received.live.1),
                model: None,
                prompt: None,
                dir: spec.paths.dir.clone(),
            });
            remote.hooks = Arc::new(received.hooks.clone());
            remote.step = received.step.clone();
            spec = remote;
        }
    }
    spec
}

fn matched<'a>(spec: &'a AgentSpec, tool: &str, args: &'a Value) -> Vec<&'a str> {
    let def = builtin_definitions()
        .iter()
        .find(|d| d.name == tool)
        .expect("a built-in tool");
    let call = Call::new(def, args, Safety::SideEffect, spec.workspace.root());
    matching(&spec.hooks.pre_tool_use, &call)
        .into_iter()
        .map(|h| h.command.as_str())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_call_at_any_depth_skips_a_matching_pre_tool_hook(
        hops in prop::collection::vec(hop(), 1..7),
        calls in prop::collection::vec(call(), 1..5),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let mut root = AgentSpec::session(
            "s",
            workspace,
            SessionPaths { dir: dir.path().join("data") },
            Authority::root(Mode::Operate, Posture::Bypass, Arc::new(RuleSet::new()), 8),
        );
        root.hooks = Arc::new(hooks());
        let mut specs = vec![root.clone()];
        for (n, hop) in hops.iter().enumerate() {
            let parent = specs.last().expect("a parent");
            specs.push(below(parent, *hop, n as u32 + 1));
        }
        for (tool, args) in &calls {
            let at_root = matched(&root, tool, args);
            prop_assert!(!at_root.is_empty());
            for (depth, spec) in specs.iter().enumerate() {
                prop_assert_eq!(&matched(spec, tool, args), &at_root, "depth {} {:?}", depth, hops);
                prop_assert!(AgentHooks::of(spec).has_pre_tool_use());
            }
        }
    }
}
