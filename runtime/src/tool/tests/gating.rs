//! The definition gate and the execution gate in Plan mode.

use pretty_assertions::assert_eq;

use super::*;

/// The tools offered in `mode`, each with whether its description names the
/// plan file.
fn check_offered(mode: Mode, expected: &[(&str, bool)]) {
    let registry = ToolRegistry::with_builtins();
    let plan_file = Path::new("/data/sessions/s1/artifacts/plan.md");
    let offered: Vec<(String, bool)> = definition_gate(&registry, mode, None, Some(plan_file))
        .into_iter()
        .map(|spec| {
            let def = registry.get(&spec.name).unwrap().definition();
            assert_eq!(spec.parameters, def.input_schema, "{}", spec.name);
            assert!(
                spec.description.contains(&def.description),
                "{}",
                spec.description
            );
            (
                spec.name,
                spec.description
                    .contains("/data/sessions/s1/artifacts/plan.md"),
            )
        })
        .collect();
    let expected: Vec<(String, bool)> = expected.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    assert_eq!(offered, expected, "{mode}");
}

#[test]
fn definition_gate_offers_plan_only_readers_plan_file_writers_and_read_only_bash() {
    check_offered(
        Mode::Plan,
        &[
            ("read_file", false),
            ("list_dir", false),
            ("glob", false),
            ("grep", false),
            ("write_file", true),
            ("edit_file", true),
            ("bash", false),
            // `list`, `output` and `wait` only read.
            ("process", false),
            // Delegating changes nothing itself; a sub-agent inherits Plan.
            ("agent", false),
            // The plan lifecycle: submit the plan for approval.
            ("exit_plan_mode", false),
            // The goal tools change nothing in the workspace; they are
            // left out where there is no goal (`Offer::goals`).
            ("create_goal", false),
            ("get_goal", false),
            ("update_goal", false),
        ],
    );
    let registry = ToolRegistry::with_builtins();
    let plan_file = Path::new("/data/sessions/s1/artifacts/plan.md");
    let bash = definition_gate(&registry, Mode::Plan, None, Some(plan_file))
        .into_iter()
        .find(|spec| spec.name == "bash")
        .unwrap();
    assert!(
        bash.description
            .starts_with("Plan mode: read-only commands only (ls, cat,"),
        "{}",
        bash.description
    );
    let process = definition_gate(&registry, Mode::Plan, None, Some(plan_file))
        .into_iter()
        .find(|spec| spec.name == "process")
        .unwrap();
    assert!(
        process
            .description
            .starts_with("Plan mode: only `list`, `output` and `wait`;"),
        "{}",
        process.description
    );
    // exit_plan_mode exists only in Plan, enter_plan_mode only in Work,
    // workflow only in Operate.
    let work: Vec<(&str, bool)> = BUILTINS
        .iter()
        .filter(|n| **n != "exit_plan_mode" && **n != "workflow")
        .map(|n| (*n, false))
        .collect();
    check_offered(Mode::Work, &work);
    let operate: Vec<(&str, bool)> = BUILTINS
        .iter()
        .filter(|n| **n != "exit_plan_mode" && **n != "enter_plan_mode")
        .map(|n| (*n, false))
        .collect();
    check_offered(Mode::Operate, &operate);
}

/// A fresh Plan-mode session whose workspace holds `seed.txt`.
fn plan_env() -> Env {
    let env = Env::new(Mode::Plan);
    env.seed("seed.txt", "seeded\n");
    env
}

/// One call in `env`: the outcome and what changed under the temporary
/// root. `{plan}` stands for the plan file's path.
async fn check_plan(env: Env, tool: &str, args: Value, expected: Got, expected_changes: &[&str]) {
    let plan = env.plan_file().display().to_string();
    let args: Value = serde_json::from_str(&args.to_string().replace("{plan}", &plan)).unwrap();
    let before = env.tree();
    let expected = expected.map(|out| out.replace("{plan}", &plan));
    let got = seen(env.call(tool, args.clone()).await, &expected);
    let expected_changes: Vec<String> = expected_changes.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        (got, changed(&before, &env.tree())),
        (expected, expected_changes),
        "{tool} {args}"
    );
}

#[tokio::test]
async fn plan_mode_runs_readers_and_read_only_bash_and_writes_only_the_plan_file() {
    use ErrorCode::*;
    let plan_written = ["session/artifacts/", "session/artifacts/plan.md"];
    check_plan(
        plan_env(),
        "read_file",
        json!({"path": "seed.txt"}),
        ok("seeded\n"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "glob",
        json!({"pattern": "*"}),
        ok("seed.txt"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "write_file",
        json!({"path": "{plan}", "content": "## Summary\n"}),
        ok("wrote 11 bytes to {plan}"),
        &plan_written,
    )
    .await;
    check_plan(
        plan_env(),
        "write_file",
        json!({"path": "notes.md", "content": "x"}),
        err(ToolNotAllowed, "may only write the plan file"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "write_file",
        json!({"path": "seed.txt", "content": "x"}),
        err(ToolNotAllowed, "Plan mode is read-only"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "write_file",
        json!({"path": "{plan}/../plan.md", "content": "x"}),
        err(ToolNotAllowed, "exactly that path"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "edit_file",
        json!({"path": "seed.txt", "old_string": "seeded", "new_string": "x"}),
        err(ToolNotAllowed, "may only write the plan file"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "bash",
        json!({"command": "touch forged"}),
        err(
            ToolNotAllowed,
            "this 'bash' call is not proven read-only and is not allowed; run only known \
             read-only commands (no redirection to files, no substitution, no `&`) or use \
             the read-only tools (why: `touch` is not a known read-only program)",
        ),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "bash",
        json!({"command": "cat seed.txt > copy.txt"}),
        err(ToolNotAllowed, "(why: output redirection to 'copy.txt')"),
        &[],
    )
    .await;
    check_plan(
        plan_env(),
        "bash",
        json!({"command": "cat seed.txt | wc -l && ls"}),
        ok("exit code: 0\n1\nseed.txt\n"),
        // The session's private temp dir, the command's $TMPDIR.
        &["session/tmp/"],
    )
    .await;
    check_plan(
        plan_env(),
        "todo_write",
        json!({"todos": []}),
        err(ToolNotAllowed, "'todo_write' can change things"),
        &[],
    )
    .await;
}

#[tokio::test]
async fn plan_mode_refuses_a_symlink_planted_in_place_of_the_plan_file() {
    use std::os::unix::fs::symlink;
    let write = || json!({"path": "{plan}", "content": "pwned"});
    let refused = || err(ErrorCode::OutsideWorkspace, "is a symlink");

    let env = plan_env();
    std::fs::create_dir(env.session().join("artifacts")).unwrap();
    symlink(env.ws().join("seed.txt"), env.plan_file()).unwrap();
    check_plan(env, "write_file", write(), refused(), &[]).await;

    let env = plan_env();
    symlink(env.ws(), env.session().join("artifacts")).unwrap();
    check_plan(env, "write_file", write(), refused(), &[]).await;
}

/// A read-only sub-agent has no plan file: Plan offers it no writer and
/// refuses every write, its session's plan file included.
#[tokio::test]
async fn a_plan_mode_agent_without_a_plan_file_writes_nothing() {
    let registry = ToolRegistry::with_builtins();
    let offered: Vec<String> = definition_gate(&registry, Mode::Plan, None, None)
        .into_iter()
        .map(|spec| spec.name)
        .collect();
    assert!(
        !offered
            .iter()
            .any(|n| n == "write_file" || n == "edit_file"),
        "offered {offered:?}"
    );
    let session_plan = plan_env().plan_file().display().to_string();
    for path in ["notes.md", "seed.txt", session_plan.as_str()] {
        let mut env = plan_env();
        env.ctx.plan_file = None;
        let before = env.tree();
        let got = seen(
            env.call("write_file", json!({"path": path, "content": "x"}))
                .await,
            &err(ErrorCode::ToolNotAllowed, "has no plan file"),
        );
        assert_eq!(
            (got, changed(&before, &env.tree())),
            (err(ErrorCode::ToolNotAllowed, "has no plan file"), vec![]),
            "{path}"
        );
    }
}

/// S2: a parent that switches to Plan narrows its child's next call, with
/// no message in between; widening the parent again restores only what the
/// child had.
#[tokio::test]
async fn a_parents_switch_to_plan_refuses_the_childs_next_write() {
    let parent = crate::agent::LiveAuthority::root(Mode::Work, crate::permission::Posture::Bypass);
    let mut env = Env::new(Mode::Work);
    env.ctx.authority =
        crate::agent::LiveAuthority::child(&parent, Mode::Work, crate::permission::Posture::Bypass);
    env.ctx.plan_file = None;
    let write = || json!({"path": "a.txt", "content": "x"});
    assert!(env.call("write_file", write()).await.is_ok());
    parent.set_mode(Mode::Plan);
    let refused = env
        .call("write_file", json!({"path": "b.txt", "content": "x"}))
        .await;
    assert_eq!(
        refused.map_err(|e| e.code),
        Err(ErrorCode::ToolNotAllowed),
        "the child wrote after its parent entered Plan"
    );
    assert_eq!(env.read("b.txt"), None);
    parent.set_mode(Mode::Work);
    assert!(env.call("write_file", write()).await.is_ok());
}

#[tokio::test]
async fn plan_control_tools_are_refused_where_there_is_no_plan_lifecycle() {
    for (mode, tool) in [
        (Mode::Plan, "exit_plan_mode"),
        (Mode::Work, "enter_plan_mode"),
    ] {
        let env = Env::new(mode);
        let got = seen(
            env.call(tool, json!({})).await,
            &err(ErrorCode::ToolNotAllowed, "drives the plan lifecycle"),
        );
        assert_eq!(
            got,
            err(ErrorCode::ToolNotAllowed, "drives the plan lifecycle"),
            "{tool}"
        );
    }
}

#[tokio::test]
async fn goal_tools_are_refused_where_there_is_no_goal() {
    // A sub-agent, a verifier or a workflow step has no goal host: even a
    // forged call cannot read or touch the session's goal.
    for (tool, args) in [
        ("get_goal", json!({})),
        (
            "update_goal",
            json!({"status": "complete", "claim": "done"}),
        ),
        ("create_goal", json!({"objective": "x"})),
    ] {
        let env = Env::new(Mode::Plan);
        let got = seen(
            env.call(tool, args).await,
            &err(ErrorCode::ToolNotAllowed, "works on the session's goal"),
        );
        assert_eq!(
            got,
            err(ErrorCode::ToolNotAllowed, "works on the session's goal"),
            "{tool}"
        );
    }
}

#[test]
fn goal_tools_are_offered_only_where_the_goal_is() {
    let registry = ToolRegistry::with_builtins();
    let offer = |goals: bool| Offer {
        mode: Mode::Work,
        allow: None,
        plan_file: None,
        agents: false,
        plans: true,
        plan_entry: false,
        workflows: false,
        goals,
    };
    let names = |goals| -> Vec<String> {
        offered_tools(&registry, &offer(goals))
            .into_iter()
            .map(|s| s.name)
            .filter(|n| n.contains("goal"))
            .collect()
    };
    assert_eq!(names(true), ["create_goal", "get_goal", "update_goal"]);
    assert_eq!(names(false), Vec::<String>::new());
}
