//! Item 2: every subcommand takes its flags (and the global ones) in any
//! position clap allows; the shell's flags before a subcommand are refused
//! with a hint, not ignored.

use super::{Dirs, run, s};

/// `cadre args` exits `code`, and its stderr contains `said`.
async fn check(args: &[&str], (code, said): (i32, &str)) {
    let out = run(args, &[], None).await;
    assert_eq!(out.code, code, "cadre {args:?}\n{}", out.stderr);
    assert!(out.stderr.contains(said), "cadre {args:?}\n{}", out.stderr);
}

#[tokio::test]
async fn global_and_subcommand_flags_work_before_and_after_the_subcommand() {
    let dirs = Dirs::new();
    let (ws, data, config) = (
        s(dirs.ws.path()),
        s(dirs.data.path()),
        s(dirs.config.path()),
    );
    // A session whose plan waits for approval, in this data directory.
    let first = [
        "exec",
        "--mode",
        "plan",
        "--plan-only",
        "--workspace",
        ws,
        "--data-dir",
        data,
        "--config-dir",
        config,
        "Add a greeting module",
    ];
    check(&first, (0, "")).await;

    let ok = (0, "");
    check(&["sessions", "list", "--data-dir", data], ok).await;
    check(&["sessions", "--data-dir", data, "list"], ok).await;
    check(&["-v", "sessions", "list", "--data-dir", data], ok).await;
    check(
        &[
            "sessions",
            "list",
            "-v",
            "--config-dir",
            config,
            "--data-dir",
            data,
        ],
        ok,
    )
    .await;
    check(
        &[
            "--config-dir",
            config,
            "sessions",
            "show",
            "latest",
            "--data-dir",
            data,
        ],
        ok,
    )
    .await;
    check(&["plan", "defer", "latest", "--data-dir", data], ok).await;
    // Answered already: found in that store, and refused there.
    let answered = (2, "has no questionnaire waiting");
    check(&["plan", "--data-dir", data, "defer", "latest"], answered).await;
    check(&["sessions", "fork", "--data-dir", data, "latest"], ok).await;
    check(&["workflow", "list", "--data-dir", data, "-v"], ok).await;
    check(
        &["restore", "list", "--data-dir", data, "--workspace", ws],
        ok,
    )
    .await;
    check(
        &["restore", "--workspace", ws, "list", "--data-dir", data],
        ok,
    )
    .await;
    check(&["config", "list", "--config-dir", config], ok).await;
    check(&["--config-dir", config, "config", "list"], ok).await;
    check(&["mcp", "list", "--workspace", ws, "-v"], ok).await;

    // The shell's own flags before a subcommand would be ignored by it.
    let refused = (2, "is a flag of the shell; put it after the subcommand");
    check(&["--data-dir", data, "sessions", "list"], refused).await;
    check(&["--mode", "plan", "exec", "hi"], refused).await;
}

/// Issue 26, item 8: help shows no internal placeholder, and a command that
/// refuses the session flags `--resume`/`--continue` does not offer them.
#[tokio::test]
async fn help_shows_plain_placeholders_and_only_the_flags_a_command_takes() {
    for command in [
        &["sessions", "--help"][..],
        &["goal", "--help"],
        &["trust", "--help"],
        &["workflow", "run", "--help"],
        &["workflow", "resume", "--help"],
        &["node", "--help"],
        &["exec", "--help"],
    ] {
        let out = run(command, &[], None).await;
        assert_eq!(out.code, 0, "{command:?}: {}", out.stderr);
        let internal = ["sessions_data_dir", "goal_data_dir", "trust_workspace"];
        for id in internal {
            assert!(!out.stdout.contains(id), "{command:?} shows <{id}>");
        }
        let flag = |name: &str| out.stdout.lines().any(|l| l.trim_start().starts_with(name));
        let offers_resume = flag("--resume") || flag("--continue");
        let takes_resume = command[0] == "exec";
        // `goal --help` names `exec --resume` in prose; that is no flag.
        assert_eq!(offers_resume, takes_resume, "{command:?}:\n{}", out.stdout);
    }
}
