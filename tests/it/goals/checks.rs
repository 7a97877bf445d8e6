//! Checks that can build and test, and still cannot change the project
//! (G5, W4): `--verify-command "cargo test"`, a workflow step's `check`,
//! and the verifier's `run_check`, each on a real Cargo project (and a
//! Python one) made by the test, offline.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::{call, claim, text};
use crate::support::cli::{cadre, events, of_type, s};
use crate::support::hermetic::Hermetic;
use crate::support::mock::MockServer;

/// A crate with no dependencies, one passing test, a lock file and a git
/// repository, so `git status` can say whether a check changed anything.
fn cargo_project(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).expect("src");
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("manifest");
    std::fs::write(
        dir.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\n\
         #[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n}\n",
    )
    .expect("lib");
    std::fs::write(dir.join(".gitignore"), "/target\n").expect("ignore");
    let ok = Command::new("cargo")
        .hermetic()
        .args(["generate-lockfile", "--offline"])
        .current_dir(dir)
        .status()
        .expect("cargo");
    assert!(ok.success());
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(
        dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .hermetic()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `exec --goal` against `mock` in `ws`, with `flags`; its exit code must
/// be `code`.
async fn goal_exits(
    mock: &MockServer,
    ws: &Path,
    data: &Path,
    flags: &[&str],
    code: i32,
) -> Vec<serde_json::Value> {
    let mut args = vec![
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--max-retries",
        "0",
        "--workspace",
        s(ws),
        "--data-dir",
        s(data),
        "--output-format",
        "stream-json",
        "--goal",
        "make the tests pass",
    ];
    args.extend(flags);
    let out = cadre(&args).await;
    assert_eq!(out.code, code, "{}\n{}", out.stdout, out.stderr);
    events(&out)
}

/// `exec --goal` that must succeed.
async fn goal(mock: &MockServer, ws: &Path, data: &Path, flags: &[&str]) -> Vec<serde_json::Value> {
    goal_exits(mock, ws, data, flags, 0).await
}

fn last_status(events: &[serde_json::Value]) -> String {
    let last = of_type(events, "goal.updated")
        .pop()
        .cloned()
        .expect("goal.updated");
    format!(
        "{}({})",
        last["status"].as_str().unwrap_or_default(),
        last["reason"].as_str().unwrap_or_default()
    )
}

#[tokio::test]
async fn verify_command_cargo_test_builds_twice_incrementally_and_changes_nothing() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    cargo_project(ws.path());
    for round in 0..2 {
        let mock = MockServer::start().await;
        mock.push([claim(&format!("c{round}"))]);
        let started = std::time::Instant::now();
        let events = goal(
            &mock,
            ws.path(),
            data.path(),
            &["--verify", "command", "--verify-command", "cargo test"],
        )
        .await;
        assert_eq!(
            last_status(&events),
            "complete(verifier_met)",
            "round {round}"
        );
        // Reported, not asserted: timings belong to benchmarks.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "cargo test as a check, round {}: {:.1} s",
            round + 1,
            started.elapsed().as_secs_f64()
        );
    }
    assert!(
        !ws.path().join("target").exists(),
        "no build output in the tree"
    );
    assert_eq!(git(ws.path(), &["status", "--porcelain", "--ignored"]), "");
    // The outputs persist in the data dir's check cache.
    let cache = data.path().join("checks");
    let built: Vec<_> = std::fs::read_dir(&cache)
        .expect("cache")
        .flatten()
        .collect();
    assert_eq!(built.len(), 1, "one cache for one workspace");
    assert!(built[0].path().join("cargo-target/debug").is_dir());
}

#[tokio::test]
async fn a_check_that_fails_or_writes_the_tree_fails_the_claim() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    cargo_project(ws.path());
    std::fs::write(
        ws.path().join("src/lib.rs"),
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn fails() { assert_eq!(1, 2, \"one is not two\"); }\n}\n",
    )
    .expect("a failing test");
    let mock = MockServer::start().await;
    // The claim fails its check; the worker gives up on the gap.
    mock.push([
        claim("c1"),
        call(
            "b1",
            "update_goal",
            json!({"status": "blocked", "reason": "tests fail"}),
        ),
    ]);
    goal_exits(
        &mock,
        ws.path(),
        data.path(),
        &["--verify", "command", "--verify-command", "cargo test"],
        1,
    )
    .await;
    // The worker was told what failed, cargo's own words included.
    let requests = mock.requests();
    let told = requests[1].to_string();
    assert!(told.contains("one is not two"), "{told}");

    // A check that writes a tracked file is refused by the kernel, or
    // caught by the comparison where it cannot be.
    let mock = MockServer::start().await;
    mock.push([
        claim("c2"),
        call(
            "b2",
            "update_goal",
            json!({"status": "blocked", "reason": "x"}),
        ),
    ]);
    goal_exits(
        &mock,
        ws.path(),
        data.path(),
        &[
            "--verify",
            "command",
            "--verify-command",
            "echo x >> Cargo.toml",
        ],
        1,
    )
    .await;
    assert!(
        !std::fs::read_to_string(ws.path().join("Cargo.toml"))
            .expect("manifest")
            .contains('x')
    );
}

#[tokio::test]
async fn the_verifier_runs_the_projects_tests_with_run_check() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    cargo_project(ws.path());
    let mock = MockServer::start().await;
    mock.push([
        claim("c1"),
        call("v1", "run_check", json!({"command": "cargo test"})),
        text("the tests pass\nVERDICT: PASS"),
    ]);
    let events = goal(&mock, ws.path(), data.path(), &[]).await;
    assert_eq!(last_status(&events), "complete(verifier_met)");
    let requests = mock.requests();
    let result = requests[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the check's result")
        .to_string();
    assert!(result.contains("check passed"), "{result}");
    assert!(result.contains("test result: ok. 1 passed"), "{result}");
    // The worker is never offered it.
    let offered: Vec<String> = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(!offered.iter().any(|n| n == "run_check"), "{offered:?}");
    assert!(!ws.path().join("target").exists());
}

#[tokio::test]
async fn a_python_projects_tests_run_as_a_check_and_leave_no_bytecode() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    std::fs::write(
        ws.path().join("calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .expect("calc");
    std::fs::write(
        ws.path().join("test_calc.py"),
        "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n",
    )
    .expect("test");
    let pytest = Command::new("python3")
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    let mut commands = vec!["python3 -m unittest"];
    if pytest {
        commands.push("python3 -m pytest");
    }
    for command in commands {
        let mock = MockServer::start().await;
        mock.push([claim("c1")]);
        let events = goal(
            &mock,
            ws.path(),
            data.path(),
            &["--verify", "command", "--verify-command", command],
        )
        .await;
        assert_eq!(last_status(&events), "complete(verifier_met)", "{command}");
    }
    let left: Vec<String> = std::fs::read_dir(ws.path())
        .expect("ws")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["calc.py", "test_calc.py"]);
}

#[tokio::test]
async fn a_workflow_steps_check_runs_cargo_check_and_cargo_test_as_written() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    cargo_project(ws.path());
    let file = data.path().join("w.toml");
    std::fs::write(
        &file,
        "[workflow]\nname = \"w\"\n\n\
         [[steps]]\nname = \"build\"\nprompt = \"Look at the crate.\"\ncheck = \"cargo check\"\n\n\
         [[steps]]\nname = \"test\"\nneeds = [\"build\"]\nprompt = \"Look again.\"\ncheck = \"cargo test\"\n",
    )
    .expect("workflow");
    let mock = MockServer::start().await;
    mock.push([
        call("l1", "list_dir", json!({"path": "."})),
        text("looked"),
        call("l2", "list_dir", json!({"path": "src"})),
        text("looked again"),
    ]);
    let out = cadre(&[
        "workflow",
        "run",
        s(&file),
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
    ])
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!ws.path().join("target").exists());
    assert_eq!(git(ws.path(), &["status", "--porcelain", "--ignored"]), "");
}

#[tokio::test]
async fn a_model_chosen_check_has_its_own_cache_and_the_shells_deny_rules() {
    let ws = tempfile::TempDir::new().expect("ws");
    let data = tempfile::TempDir::new().expect("data");
    cargo_project(ws.path());
    // The verifier plants a file in its cache, and tries a denied command.
    let mock = MockServer::start().await;
    let plant = "mkdir -p \"$CARGO_TARGET_DIR\" && touch \"$CARGO_TARGET_DIR/forged\"";
    mock.push([
        claim("c1"),
        call("v1", "run_check", json!({"command": plant})),
        call(
            "v2",
            "run_check",
            json!({"command": "curl -s http://127.0.0.1:9/"}),
        ),
        text("VERDICT: PASS"),
    ]);
    let events = goal(&mock, ws.path(), data.path(), &["--deny", "bash(curl:*)"]).await;
    assert_eq!(last_status(&events), "complete(verifier_met)");
    let results: Vec<String> = mock.requests()[3]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(results[0].contains("check passed"), "{results:?}");
    assert!(results[1].contains("bash(curl:*)"), "{results:?}");
    // A configured check does not see what the model's check planted.
    let mock = MockServer::start().await;
    mock.push([claim("c1")]);
    let events = goal(
        &mock,
        ws.path(),
        data.path(),
        &[
            "--verify",
            "command",
            "--verify-command",
            "test ! -e \"$CARGO_TARGET_DIR/forged\"",
        ],
    )
    .await;
    assert_eq!(last_status(&events), "complete(verifier_met)");
}
