//! The command line as a new user meets it: where a run's mode comes from,
//! flags in every position, copy-paste exact follow-up commands, quiet
//! logs, prompts from stdin and files, a closed pipe, continuing turn ids,
//! a wrong base URL, the README walked from a clean directory, and the
//! smaller courtesies (issue 11). Every test runs the binary.

mod answer;
mod base_url;
mod courtesies;
mod escapes;
mod examples;
mod flags;
mod followups;
mod logs;
mod model_choice;
mod modes;
mod pipe;
mod pipelines;
mod prompts;
mod readme;
mod resume;
mod walk;

use std::path::Path;

use tempfile::TempDir;

use crate::support::cli::Output;

/// `cadre` with `args` in a clean environment (nothing of the caller's
/// cadre, model or log settings), `env` set, and `stdin` fed (empty when
/// `None`).
pub(crate) async fn run(args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut child = clean(tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre")))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn cadre");
    let mut input = child.stdin.take().expect("stdin");
    let feed = stdin.unwrap_or_default().to_vec();
    // Fed alongside the run, so a large prompt cannot fill the pipe and
    // stall both sides; a process that never reads it closes it early.
    let feeding = tokio::spawn(async move {
        let _ = input.write_all(&feed).await;
    });
    let output = child.wait_with_output().await.expect("run cadre");
    let _ = feeding.await;
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Removes every variable through which the caller's own setup could leak
/// into a run.
pub(crate) fn clean(mut command: tokio::process::Command) -> tokio::process::Command {
    use crate::support::hermetic::Hermetic;
    command.hermetic().kill_on_drop(true);
    command
}

/// A workspace, a data directory and a configuration directory, fresh.
pub(crate) struct Dirs {
    pub ws: TempDir,
    pub data: TempDir,
    pub config: TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        Self {
            ws: TempDir::new().expect("workspace"),
            data: TempDir::new().expect("data"),
            config: TempDir::new().expect("config"),
        }
    }

    /// The three, for the shell's tests.
    pub fn tuple(self) -> (TempDir, TempDir, TempDir) {
        (self.ws, self.data, self.config)
    }

    /// `--workspace`, `--data-dir` and `--config-dir` for these.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--workspace".into(),
            s(self.ws.path()).into(),
            "--data-dir".into(),
            s(self.data.path()).into(),
            "--config-dir".into(),
            s(self.config.path()).into(),
        ]
    }
}

pub(crate) fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Borrows owned arguments as `&str`s.
pub(crate) fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
