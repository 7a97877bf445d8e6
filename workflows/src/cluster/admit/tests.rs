use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, Authority};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::permission::Posture;
use cadre_runtime::permission::rules::{PermissionRules, RuleKind, RuleSet, Scope};

use super::*;
use crate::cluster::wire::Order;

fn caller(mode: Mode, posture: Posture, deny: &[&str]) -> Authority {
    let mut rules = RuleSet::new();
    for rule in deny {
        rules.add(RuleKind::Deny, Scope::User, rule).expect("rule");
    }
    Authority::root(mode, posture, Arc::new(rules), 3)
}

fn step_of(caller: &Authority) -> Authority {
    caller
        .narrow("step", &RoleConfig::default())
        .expect("narrow")
}

fn order(caller: &Authority, step: &Authority, live: (Mode, Posture), workspace: &str) -> Order {
    Order {
        coordinator: "c".into(),
        attempt: 1,
        run_id: "run".into(),
        path: AgentPath::root().child(1),
        role: "step".into(),
        caller: caller.into(),
        authority: step.into(),
        live,
        model: None,
        system_prompt: None,
        max_iterations: 5,
        workspace: PathBuf::from(workspace),
        interactive: false,
        prompt: "do it".into(),
        hooks: Default::default(),
        step: None,
    }
}

fn served() -> Vec<Mapping> {
    vec![Mapping {
        coordinator: PathBuf::from("/coord/ws"),
        local: PathBuf::from("/node/ws"),
    }]
}

fn rules_of(authority: &Authority) -> Vec<String> {
    authority
        .rules
        .iter()
        .map(|r| format!("{} {}", r.kind(), r.text()))
        .collect()
}

/// What a node makes of an order: the posture, mode, workspace and rules
/// it would run it with, or why it refuses.
fn check(
    order: &Order,
    ceiling: &Ceiling,
    expected: Result<(Mode, Posture, &str, &[&str]), Refusal>,
) {
    let got = admit(order, ceiling, &served()).map(|a| {
        (
            a.authority.mode,
            a.authority.posture,
            a.workspace.display().to_string(),
            rules_of(&a.authority),
        )
    });
    let expected = expected.map(|(m, p, w, r)| {
        (
            m,
            p,
            w.to_string(),
            r.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    });
    assert_eq!(got, expected);
}

#[test]
fn a_step_within_its_caller_runs_as_sent_in_the_mapped_workspace() {
    let c = caller(Mode::Work, Posture::Bypass, &[]);
    let o = order(
        &c,
        &step_of(&c),
        (Mode::Work, Posture::Bypass),
        "/coord/ws/proj",
    );
    check(
        &o,
        &Ceiling::none(),
        Ok((Mode::Work, Posture::Bypass, "/node/ws/proj", &[])),
    );
}

#[test]
fn the_nodes_ceiling_narrows_mode_posture_and_adds_its_deny_rules_never_its_allow_rules() {
    let c = caller(Mode::Operate, Posture::Bypass, &[]);
    let o = order(
        &c,
        &step_of(&c),
        (Mode::Operate, Posture::Bypass),
        "/coord/ws",
    );
    let ceiling = Ceiling {
        mode: Mode::Work,
        posture: Posture::Never,
        rules: PermissionRules {
            allow: vec!["bash".into()],
            ask: vec![],
            deny: vec!["bash(git push:*)".into()],
        },
    };
    check(
        &o,
        &ceiling,
        Ok((
            Mode::Work,
            Posture::Never,
            "/node/ws",
            &["deny bash(git push:*)"],
        )),
    );
    let admitted = admit(&o, &ceiling, &served()).expect("admitted");
    assert_eq!(admitted.live, (Mode::Work, Posture::Never));
}

#[test]
fn a_step_wider_than_its_caller_is_refused() {
    let narrow = caller(Mode::Work, Posture::Never, &[]);
    let wide = step_of(&caller(Mode::Work, Posture::Bypass, &[]));
    let o = order(&narrow, &wide, (Mode::Work, Posture::Never), "/coord/ws");
    check(&o, &Ceiling::none(), Err(Refusal::Wider));
}

#[test]
fn a_step_that_dropped_its_callers_deny_rule_is_refused() {
    let c = caller(Mode::Work, Posture::Bypass, &["write_file(secret/**)"]);
    let stripped = step_of(&caller(Mode::Work, Posture::Bypass, &[]));
    let o = order(&c, &stripped, (Mode::Work, Posture::Bypass), "/coord/ws");
    check(&o, &Ceiling::none(), Err(Refusal::Wider));
}

#[test]
fn a_live_authority_wider_than_the_callers_is_refused() {
    let c = caller(Mode::Plan, Posture::Suggest, &[]);
    let o = order(
        &c,
        &step_of(&c),
        (Mode::Operate, Posture::Bypass),
        "/coord/ws",
    );
    check(&o, &Ceiling::none(), Err(Refusal::WiderLive));
}

#[test]
fn a_workspace_the_node_does_not_serve_is_refused() {
    let c = caller(Mode::Work, Posture::Bypass, &[]);
    // Elsewhere, and under a served root but climbing out of it again.
    for workspace in ["/elsewhere", "/coord/ws/../../etc", "/coord/ws/sub/../../x"] {
        let o = order(&c, &step_of(&c), (Mode::Work, Posture::Bypass), workspace);
        check(
            &o,
            &Ceiling::none(),
            Err(Refusal::Workspace(PathBuf::from(workspace))),
        );
    }
}

#[test]
fn an_absolute_rule_on_the_coordinators_tree_also_holds_on_the_nodes() {
    let c = caller(
        Mode::Work,
        Posture::Bypass,
        &["write_file(/coord/ws/secret/**)"],
    );
    let o = order(&c, &step_of(&c), (Mode::Work, Posture::Bypass), "/coord/ws");
    check(
        &o,
        &Ceiling::none(),
        Ok((
            Mode::Work,
            Posture::Bypass,
            "/node/ws",
            &[
                "deny write_file(/coord/ws/secret/**)",
                "deny write_file(/node/ws/secret/**)",
            ],
        )),
    );
}

/// The run id names the agent's scratch directory on the node: an order
/// whose run id is anything but a plain name is refused.
#[test]
fn a_run_id_that_is_not_a_plain_name_is_refused() {
    let check = |run_id: &str, admitted: bool| {
        let caller = caller(Mode::Work, Posture::Suggest, &[]);
        let step = step_of(&caller);
        let mut order = order(&caller, &step, (Mode::Work, Posture::Suggest), "/coord/ws");
        order.run_id = run_id.into();
        let got = admit(&order, &Ceiling::none(), &served());
        match admitted {
            true => assert!(got.is_ok(), "{run_id}: {got:?}"),
            false => assert_eq!(got.err(), Some(Refusal::RunId(run_id.into())), "{run_id}"),
        }
    };
    check("0b9c3f52-5d1e-4c57-9a0e-2f1d5c7b8a90", true);
    check("run_1", true);
    check("../../etc", false);
    check("..", false);
    check("/abs", false);
    check("a/b", false);
    check("", false);
    check(&"x".repeat(129), false);
}
