//! Rules on real paths, through the runner: the tool layer resolves where a
//! call's paths lead and the decision sees both spellings; a property over
//! every short path through a tree of symlinks; hard links refused for
//! writes.

use pretty_assertions::assert_eq;

use super::*;
use crate::permission::rules::{RuleKind, RuleSet, Scope};
use crate::permission::{
    Call, Decision, Evaluation, Layer, Policy, Posture, ProtectedPaths, Verdict, evaluate,
};

/// Decides with the pure engine, as a session does, with no one to ask.
struct Engine {
    rules: Arc<RuleSet>,
    posture: Posture,
    root: PathBuf,
    plan_file: PathBuf,
}

impl Engine {
    fn decide(&self, request: &Authorization) -> Decision {
        let protected = ProtectedPaths::new();
        let policy = Policy {
            posture: self.posture,
            rules: &self.rules,
            interactive: false,
            plan_file: Some(&self.plan_file),
            protected: &protected,
        };
        let call = Call::new(
            request.tool.definition(),
            &request.args,
            request.safety,
            &self.root,
        )
        .with_real_paths(&request.paths);
        match evaluate(&policy, &call) {
            Evaluation::Decided(decision) => decision,
            Evaluation::AskPerson { reason, .. } => {
                Decision::new(Verdict::Deny, Layer::Posture, reason)
            }
            Evaluation::Review { .. } => Decision::new(Verdict::Deny, Layer::Guardian, "no review"),
        }
    }
}

impl Authorizer for Engine {
    fn authorize(&self, request: Authorization) -> DecisionFuture {
        let decision = self.decide(&request);
        Box::pin(async move { decision })
    }
}

fn rules(deny: &[&str]) -> Arc<RuleSet> {
    let mut set = RuleSet::new();
    for rule in deny {
        set.add(RuleKind::Deny, Scope::User, rule).unwrap();
    }
    Arc::new(set)
}

/// A Work-mode workspace whose calls are decided by `deny` rules under
/// Full Access, with `.env`, `Cargo.toml` and links to both.
fn linked_env(deny: &[&str]) -> Env {
    let mut env = Env::new(Mode::Work);
    env.seed(".env", "SECRET=1\n");
    env.seed("Cargo.toml", "[package]\n");
    env.seed("src/lib.rs", "// SECRET is not here\n");
    std::os::unix::fs::symlink(".env", env.ws().join("l1")).unwrap();
    std::os::unix::fs::symlink("../Cargo.toml", env.ws().join("src/cfg")).unwrap();
    let rules = rules(deny);
    env.ctx.rules = Some(rules.clone());
    env.ctx.authorizer = Some(Arc::new(Engine {
        rules,
        posture: Posture::Bypass,
        root: env.ctx.workspace.root().to_path_buf(),
        plan_file: env.ctx.plan_file.clone().expect("a plan file"),
    }));
    env
}

/// `(tool, arguments, expected)` cases in one environment, compared as a
/// whole, and the files that changed.
async fn check_calls(env: &Env, cases: Vec<(&str, Value, Got)>, expected_changes: &[&str]) {
    let before = env.tree();
    let mut got = Vec::new();
    for (tool, args, expected) in &cases {
        got.push((
            *tool,
            args.clone(),
            seen(env.call(tool, args.clone()).await, expected),
        ));
    }
    let expected: Vec<(&str, Value, Got)> = cases;
    assert_eq!(got, expected);
    let changes: Vec<String> = expected_changes.iter().map(|s| s.to_string()).collect();
    assert_eq!(changed(&before, &env.tree()), changes);
}

#[tokio::test]
async fn regression_a_symlink_to_env_passed_a_read_deny() {
    use ErrorCode::*;
    let env = linked_env(&["read_file(.env)"]);
    check_calls(
        &env,
        vec![
            (
                "read_file",
                json!({"path": "l1"}),
                err(PermissionDenied, "read_file(.env): 'l1' leads to '.env'"),
            ),
            (
                "read_file",
                json!({"path": "src/../l1"}),
                err(PermissionDenied, "'src/../l1' leads to '.env'"),
            ),
            (
                "bash",
                json!({"command": "cat l1"}),
                err(PermissionDenied, "read_file(.env): the command names 'l1'"),
            ),
            (
                "bash",
                json!({"command": "cat .env"}),
                err(
                    PermissionDenied,
                    "read_file(.env): the command names '.env'",
                ),
            ),
            (
                "bash",
                json!({"command": "grep -r SECRET ."}),
                err(PermissionDenied, "read_file(.env): the command walks '.'"),
            ),
            (
                "read_file",
                json!({"path": "Cargo.toml"}),
                ok("[package]\n"),
            ),
        ],
        &[],
    )
    .await;
}

#[tokio::test]
async fn regression_a_write_through_src_cfg_passed_a_deny_on_cargo_toml() {
    use ErrorCode::*;
    let env = linked_env(&["write_file(Cargo.toml)", "edit_file(Cargo.toml)"]);
    check_calls(
        &env,
        vec![
            (
                "write_file",
                json!({"path": "src/cfg", "content": "x"}),
                err(
                    PermissionDenied,
                    "write_file(Cargo.toml): 'src/cfg' leads to 'Cargo.toml'",
                ),
            ),
            (
                "edit_file",
                json!({"path": "src/cfg", "old_string": "[package]", "new_string": "x"}),
                err(PermissionDenied, "'src/cfg' leads to 'Cargo.toml'"),
            ),
            (
                "bash",
                json!({"command": "echo x > src/cfg"}),
                err(PermissionDenied, "the command names 'src/cfg'"),
            ),
            (
                "write_file",
                json!({"path": "src/new.rs", "content": "x"}),
                ok("wrote 1 bytes to src/new.rs"),
            ),
        ],
        &["ws/src/new.rs"],
    )
    .await;
}

#[tokio::test]
async fn regression_a_hard_link_let_write_file_change_a_file_outside_the_workspace() {
    use ErrorCode::*;
    let env = linked_env(&[]);
    std::fs::write(env.outside().join("target"), "outside\n").unwrap();
    std::fs::hard_link(env.outside().join("target"), env.ws().join("hl")).unwrap();
    check_calls(
        &env,
        vec![
            (
                "write_file",
                json!({"path": "hl", "content": "changed"}),
                err(PermissionDenied, "'hl' has 2 hard links"),
            ),
            (
                "edit_file",
                json!({"path": "hl", "old_string": "outside", "new_string": "changed"}),
                err(PermissionDenied, "'hl' has 2 hard links"),
            ),
            ("read_file", json!({"path": "hl"}), ok("outside\n")),
        ],
        &[],
    )
    .await;
}

#[tokio::test]
async fn regression_grep_over_the_workspace_showed_a_read_denied_env() {
    let env = linked_env(&["read_file(.env)"]);
    env.seed("notes/.env", "SECRET=2\n");
    check_calls(
        &env,
        vec![
            // The rule names the top-level `.env` only.
            (
                "grep",
                json!({"pattern": "SECRET="}),
                ok("notes/.env:1:SECRET=2\n[1 file withheld: a permission rule denies reading it]"),
            ),
            (
                "grep",
                json!({"pattern": "SECRET", "path": ".", "glob": "*.rs"}),
                ok("src/lib.rs:1:// SECRET is not here"),
            ),
            (
                "grep",
                json!({"pattern": "SECRET=1"}),
                ok("no matches for 'SECRET=1'\n[1 file withheld: a permission rule denies reading it]"),
            ),
            (
                "grep",
                json!({"pattern": "SECRET", "path": ".env"}),
                ok("no matches for 'SECRET'\n[1 file withheld: a permission rule denies reading it]"),
            ),
            (
                "glob",
                json!({"pattern": "**/.env"}),
                ok("notes/.env\n[1 file withheld: a permission rule denies reading it]"),
            ),
            (
                "list_dir",
                json!({}),
                ok("Cargo.toml\nl1\nnotes/\nsrc/\n[1 file withheld: a permission rule denies reading it]"),
            ),
        ],
        &[],
    )
    .await;
}

/// Every relative path of up to four components through a tree of
/// symlinks: a `read_file` call is denied by `read_file(.env)` exactly when
/// the path is `.env` as written or as the tool would open it, and a
/// `cat` of it whenever the kernel would open `.env`.
#[tokio::test]
async fn every_short_path_through_links_to_env_is_denied_on_both_routes() {
    let env = linked_env(&["read_file(.env)"]);
    let ws = env.ws();
    std::fs::create_dir_all(ws.join("a/c")).unwrap();
    std::fs::create_dir_all(ws.join("b")).unwrap();
    std::fs::write(ws.join("a/x"), "x").unwrap();
    std::os::unix::fs::symlink("../.env", ws.join("a/l2")).unwrap();
    std::os::unix::fs::symlink("../a", ws.join("b/l3")).unwrap();
    std::os::unix::fs::symlink("../../b", ws.join("a/c/l4")).unwrap();
    std::os::unix::fs::symlink("a/c", ws.join("l5")).unwrap();
    let parts = [
        "a", "b", "c", "l1", "l2", "l3", "l4", "l5", "..", ".", ".env", "x",
    ];
    let mut paths: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
    let mut last = paths.clone();
    for _ in 1..4 {
        last = last
            .iter()
            .flat_map(|p| parts.iter().map(move |q| format!("{p}/{q}")))
            .collect();
        paths.extend(last.iter().cloned());
    }
    let real_root = env.ctx.workspace.root().to_path_buf();
    let secret = real_root.join(".env");
    let registry = ToolRegistry::with_builtins();
    let engine = Engine {
        rules: rules(&["read_file(.env)"]),
        posture: Posture::Bypass,
        root: real_root.clone(),
        plan_file: env.ctx.plan_file.clone().expect("a plan file"),
    };
    let denied = |tool: &str, args: Value| {
        let tool = registry.get(tool).unwrap().clone();
        let def = tool.definition().clone();
        let safety = tool.classify(&args);
        let request = Authorization {
            call_id: "c".into(),
            paths: env.ctx.real_paths(&def, &args, safety),
            tool,
            args,
            safety,
            refused: None,
            preview: None,
        };
        engine.decide(&request).verdict == Verdict::Deny
    };
    let mut wrong = Vec::new();
    let (mut through_links, mut by_kernel) = (0, 0);
    for path in &paths {
        let written = crate::permission::call::normalize(&real_root.join(path)) == secret;
        let opened = env.ctx.resolve(path).is_ok_and(|p| p == secret);
        through_links += usize::from(opened && !written);
        let read = denied("read_file", json!({ "path": path }));
        if read != (written || opened) {
            wrong.push(format!(
                "read_file {path}: denied {read}, opens .env {opened}"
            ));
        }
        let kernel = real_root
            .join(path)
            .canonicalize()
            .is_ok_and(|p| p == secret);
        by_kernel += usize::from(kernel && !written);
        if kernel && !denied("bash", json!({ "command": format!("cat {path}") })) {
            wrong.push(format!("cat {path} reads .env and was not denied"));
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "of {} paths", paths.len());
    // The links are exercised: many paths reach `.env` only through them.
    assert!(
        paths.len() > 20_000 && through_links > 100 && by_kernel > 20,
        "{through_links} {by_kernel}"
    );
}
