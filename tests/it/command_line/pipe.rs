//! Item 7: a reader that goes away early (`cadre sessions list | head -1`)
//! ends cadre quietly: exit 0, no panic, no message.

use std::process::Stdio;

use super::{Dirs, clean, run, s, strs};
use crate::support::cli::Output;

/// Which of cadre's outputs has no reader.
#[derive(Debug, Clone, Copy)]
enum Closed {
    Stdout,
    Stderr,
}

/// Runs `args` with `closed` connected to a pipe whose reader has already
/// gone: cadre's first write there fails with EPIPE, every time.
async fn with_reader_gone(args: &[&str], closed: Closed) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut command = clean(tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre")));
    command.args(args).stdin(Stdio::null());
    match closed {
        Closed::Stdout => command.stdout(Stdio::from(writer)).stderr(Stdio::piped()),
        Closed::Stderr => command.stdout(Stdio::piped()).stderr(Stdio::from(writer)),
    };
    // Not `output()`, which would pipe both streams whatever was set.
    let child = command.spawn().expect("spawn cadre");
    let out = child.wait_with_output().await.expect("run cadre");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `args` with `closed` gone ends with exit 0 and says nothing on the
/// other stream.
async fn check(args: &[&str], closed: Closed) {
    let out = with_reader_gone(args, closed).await;
    assert_eq!(
        out.code, 0,
        "{args:?} {closed:?}\n{}{}",
        out.stdout, out.stderr
    );
    let other = match closed {
        Closed::Stdout => &out.stderr,
        Closed::Stderr => &out.stdout,
    };
    assert!(!other.contains("panicked"), "{args:?} {closed:?}\n{other}");
    assert!(
        !other.contains("Broken pipe"),
        "{args:?} {closed:?}\n{other}"
    );
}

#[tokio::test]
async fn a_closed_reader_is_a_quiet_exit_for_every_kind_of_output() {
    let dirs = Dirs::new();
    let mut exec: Vec<String> = vec!["exec".into()];
    exec.extend(dirs.flags());
    exec.extend([
        "--mode".into(),
        "plan".into(),
        "Add a greeting module".into(),
    ]);
    let first = run(&strs(&exec), &[], None).await;
    assert_eq!(first.code, 0, "{}", first.stderr);

    let data = s(dirs.data.path());
    let config = s(dirs.config.path());
    check(&["sessions", "list", "--data-dir", data], Closed::Stdout).await;
    check(
        &["sessions", "show", "latest", "--data-dir", data],
        Closed::Stdout,
    )
    .await;
    check(&["config", "list", "--config-dir", config], Closed::Stdout).await;
    check(
        &["config", "get", "nope", "--config-dir", config],
        Closed::Stderr,
    )
    .await;
    check(&["--help"], Closed::Stdout).await;
    check(&strs(&exec), Closed::Stdout).await;
    check(&strs(&exec), Closed::Stderr).await;
    let mut json = exec.clone();
    json.insert(1, "--output-format".into());
    json.insert(2, "stream-json".into());
    check(&strs(&json), Closed::Stdout).await;
}
