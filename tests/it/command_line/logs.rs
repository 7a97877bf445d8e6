//! Item 4: no log lines unless asked for (`-v`, `RUST_LOG`); colour only
//! on a terminal, and never under `NO_COLOR`.

use rexpect::session::spawn_command;

use super::{Dirs, run, strs};
use crate::support::hermetic::Hermetic;
use crate::support::mock::{MockServer, Reply, text_chunks};

/// A server whose first answer is a 503, then text: the retry makes
/// cadre's own line and a log warning.
async fn flaky() -> MockServer {
    let mock = MockServer::start().await;
    mock.push([
        Reply::error(503, "overloaded"),
        Reply::sse(&text_chunks("hello")),
    ]);
    mock
}

fn exec_args(dirs: &Dirs, url: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    args.push("exec".into());
    args.extend(dirs.flags());
    args.extend([
        "--base-url".into(),
        url.into(),
        "--model".into(),
        "m".into(),
    ]);
    args.push("Say hello".into());
    args
}

/// Runs exec with `extra` flags (and `env`) against a flaky server;
/// returns its stderr.
async fn stderr_of(extra: &[&str], env: &[(&str, &str)]) -> String {
    let (dirs, mock) = (Dirs::new(), flaky().await);
    let out = run(&strs(&exec_args(&dirs, &mock.url, extra)), env, None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stderr
}

#[tokio::test]
async fn a_retried_request_shows_cadres_line_and_no_log_line_unless_asked() {
    let quiet = stderr_of(&[], &[]).await;
    assert!(quiet.contains("model request 1 failed"), "{quiet}");
    assert!(!quiet.contains("WARN"), "{quiet}");
    assert!(!quiet.contains('\u{1b}'), "{quiet}");

    // Asked for, on a pipe: the log line, without colour codes.
    for (extra, env) in [(&["-v"][..], &[][..]), (&[], &[("RUST_LOG", "warn")])] {
        let logged = stderr_of(extra, env).await;
        assert!(logged.contains("WARN"), "{extra:?} {env:?}\n{logged}");
        assert!(!logged.contains('\u{1b}'), "{logged}");
    }
}

#[tokio::test]
async fn stream_json_leaves_stderr_empty() {
    let (dirs, mock) = (Dirs::new(), flaky().await);
    let mut args = exec_args(&dirs, &mock.url, &[]);
    args.insert(1, "--output-format".into());
    args.insert(2, "stream-json".into());
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    crate::support::cli::events(&out);
}

/// What `cadre -v exec` prints on a terminal, with `env`.
fn on_a_terminal(url: &str, env: &[(&str, &str)]) -> String {
    let dirs = Dirs::new();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"));
    command.hermetic();
    for var in [
        "RUST_LOG",
        "NO_COLOR",
        "CADRE_HOME",
        "CADRE_MODE",
        "CADRE_CONFIG_DIR",
    ] {
        command.env_remove(var);
    }
    command
        .args(exec_args(&dirs, url, &["-v"]))
        .env("TERM", "xterm")
        .envs(env.iter().copied());
    let mut pty = spawn_command(command, Some(20_000)).expect("spawn");
    pty.exp_eof().expect("cadre exits")
}

// The terminal blocks one worker while the server answers on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colour_only_on_a_terminal_and_never_under_no_color() {
    let mock = flaky().await;
    let url = mock.url.clone();
    let coloured = tokio::task::spawn_blocking(move || on_a_terminal(&url, &[]))
        .await
        .expect("terminal");
    assert!(coloured.contains("WARN"), "{coloured}");
    assert!(coloured.contains("\u{1b}["), "{coloured}");

    let mock = flaky().await;
    let url = mock.url.clone();
    let plain = tokio::task::spawn_blocking(move || on_a_terminal(&url, &[("NO_COLOR", "1")]))
        .await
        .expect("terminal");
    assert!(plain.contains("WARN"), "{plain}");
    assert!(!plain.contains('\u{1b}'), "{plain}");
}
