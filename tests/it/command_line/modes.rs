//! Item 1: the shell's `/mode` saves the startup mode and says so; every
//! run states its mode and where it came from.

use serde_json::Value;

use super::{Dirs, run, s, strs};
use crate::shell::{exits_0, expect, start_in};

/// A model that answers every request with a line of text.
pub(crate) const HELLO: &str = "[[response]]\nrepeat = true\ntext = \"hello\"\n";

/// What chooses the mode before a run.
#[derive(Debug, Clone, Copy)]
enum Chooser {
    /// `cadre config set default_mode …`.
    Settings(&'static str),
    /// `mode = …` in the project's `.cadre/config.toml`.
    Project(&'static str),
    /// `CADRE_MODE=…`.
    Env(&'static str),
    /// `--mode …`.
    Flag(&'static str),
    /// The run resumes a session that was started with `--mode …`.
    ResumeOf(&'static str),
}

/// Runs `exec` in fresh directories with `choosers` applied; returns its
/// `session.started` line and its stderr (text output, when `text`).
async fn started(choosers: &[Chooser], text: bool) -> (Value, String) {
    let dirs = Dirs::new();
    let script = dirs.data.path().join("hello.toml");
    std::fs::write(&script, HELLO).expect("script");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend(["--script".into(), s(&script).into()]);
    let mut env = Vec::new();
    for chooser in choosers {
        match *chooser {
            Chooser::Settings(mode) => {
                let mut set = vec!["config", "set", "default_mode", mode];
                set.extend(["--config-dir", s(dirs.config.path())]);
                let out = run(&set, &[], None).await;
                assert_eq!(out.code, 0, "{}", out.stderr);
            }
            Chooser::Project(mode) => {
                let dir = dirs.ws.path().join(".cadre");
                std::fs::create_dir_all(&dir).expect("dir");
                std::fs::write(dir.join("config.toml"), format!("mode = \"{mode}\"\n"))
                    .expect("project config");
            }
            Chooser::Env(mode) => env.push(("CADRE_MODE", mode)),
            Chooser::Flag(mode) => args.extend(["--mode".into(), mode.into()]),
            Chooser::ResumeOf(mode) => {
                let mut first = args.clone();
                first.extend(["--mode".into(), mode.into(), "Say hello".into()]);
                let out = run(&strs(&first), &[], None).await;
                assert_eq!(out.code, 0, "{}", out.stderr);
                args.extend(["--resume".into(), "latest".into()]);
            }
        }
    }
    if !text {
        args.extend(["--output-format".into(), "stream-json".into()]);
    }
    args.push("Say hello again".into());
    let out = run(&strs(&args), &env, None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    if text {
        return (Value::Null, out.stderr);
    }
    let events = crate::support::cli::events(&out);
    (events[0].clone(), out.stderr)
}

/// A run set up by `choosers` starts in `mode`, and says it came from `source`.
async fn check(choosers: &[Chooser], (mode, source): (&str, &str)) {
    let (first, _) = started(choosers, false).await;
    assert_eq!(
        (first["mode"].as_str(), first["mode_source"].as_str()),
        (Some(mode), Some(source)),
        "{choosers:?}"
    );
}

#[tokio::test]
async fn session_started_says_where_the_mode_came_from() {
    use Chooser::*;
    check(&[], ("work", "default")).await;
    check(&[Settings("plan")], ("plan", "settings")).await;
    // A project's mode narrows the user's, never widens it.
    check(
        &[Settings("plan"), Project("operate")],
        ("plan", "settings"),
    )
    .await;
    check(&[Settings("operate"), Project("plan")], ("plan", "config")).await;
    check(&[Project("operate"), Env("plan")], ("plan", "env")).await;
    check(&[Env("plan"), Flag("work")], ("work", "flag")).await;
    // A resume keeps the session's mode over every default…
    check(
        &[Settings("operate"), ResumeOf("plan")],
        ("plan", "resumed"),
    )
    .await;
    // …and a flag switches it.
    check(&[ResumeOf("plan"), Flag("operate")], ("operate", "flag")).await;
}

#[tokio::test]
async fn a_text_run_not_in_work_says_why_on_one_stderr_line() {
    let (_, stderr) = started(&[Chooser::Settings("plan")], true).await;
    let why: Vec<&str> = stderr.lines().filter(|l| l.contains("mode from")).collect();
    assert_eq!(
        why,
        [
            "  plan mode from default_mode in settings.toml, saved by the shell's /mode \
          (--mode overrides it; `cadre config set default_mode work` resets it)"
        ],
        "{stderr}"
    );
    let (_, stderr) = started(&[], true).await;
    assert!(!stderr.contains("mode from"), "{stderr}");
}

// The shell part blocks on the terminal; nothing else runs meanwhile.
#[tokio::test]
async fn mode_in_the_shell_prints_a_receipt_and_a_later_exec_says_why_it_starts_in_plan() {
    let dirs = Dirs::new();
    let config = dirs.config.path().to_path_buf();
    let mut shell = start_in((dirs.ws, dirs.data, dirs.config), HELLO, &[], &[]);
    shell.pty.send_line("/mode plan").expect("send");
    expect(&mut shell.pty, "mode: plan");
    expect(&mut shell.pty, "saved as the startup mode for new sessions");
    // Choosing the mode already active saves it again, and says so.
    shell.pty.send_line("/mode plan").expect("send");
    expect(&mut shell.pty, "saved as the startup mode for new sessions");
    shell.pty.send_line("/quit").expect("send");
    exits_0(&mut shell.pty);

    let settings = std::fs::read_to_string(config.join("settings.toml")).expect("settings");
    assert!(settings.contains("default_mode = \"plan\""), "{settings}");
    // A headless run later on comes up in Plan and says why.
    let script = shell.data.path().join("shell.toml");
    let args = [
        "exec",
        "--config-dir",
        s(&config),
        "--workspace",
        s(shell.ws.path()),
        "--data-dir",
        s(shell.data.path()),
        "--script",
        s(&script),
        "Say hello",
    ];
    let out = run(&args, &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("plan mode from default_mode in settings.toml"),
        "{}",
        out.stderr
    );
}
