//! Item 3: the commands cadre prints are copy-paste exact: pasted into a
//! shell with none of the run's environment, they act on the same store
//! and session, never on whatever `latest` means elsewhere.

use std::path::Path;

use tempfile::TempDir;

use super::{clean, s};
use crate::support::cli::Output;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/scripts/plan-and-implement.toml"
);

/// A home of its own, so the default store is a temporary one too.
struct Home {
    dir: TempDir,
}

impl Home {
    /// `line` run by `sh`, with cadre on the PATH, in this home, with `env`.
    async fn sh(&self, line: &str, env: &[(&str, &str)]) -> Output {
        let bin = Path::new(env!("CARGO_BIN_EXE_cadre"))
            .parent()
            .expect("the binary's directory");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let home = self.dir.path();
        let out = clean(tokio::process::Command::new("sh"))
            .args(["-c", line])
            .env("PATH", path)
            .env("HOME", home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .expect("run sh");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// The command after `label` in `text`, up to the end of its line or a
/// ` (or …)` aside.
fn command_after(text: &str, label: &str) -> String {
    let rest = text
        .split(label)
        .nth(1)
        .unwrap_or_else(|| panic!("no {label:?} in:\n{text}"));
    let line = rest.lines().next().unwrap_or_default();
    line.split(" (or ")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[tokio::test]
async fn printed_commands_find_the_store_the_run_used_when_pasted_without_its_environment() {
    let home = Home {
        dir: TempDir::new().expect("home"),
    };
    let (decoy_ws, ws, store) = (
        TempDir::new().expect("decoy"),
        TempDir::new().expect("workspace"),
        TempDir::new().expect("store"),
    );
    let plan = |ws: &Path| {
        format!(
            "cadre exec --mode plan --plan-only --script {SCRIPT} --workspace {} 'Add a greeting module'",
            s(ws)
        )
    };
    // A session waiting for approval in the default store: `latest` there
    // is not the session below.
    let decoy = home.sh(&plan(decoy_ws.path()), &[]).await;
    assert_eq!(decoy.code, 0, "{}", decoy.stderr);

    let run = home
        .sh(&plan(ws.path()), &[("CADRE_HOME", s(store.path()))])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer = command_after(&run.stderr, "answer with: ");
    let then = command_after(&run.stderr, "then run it with: ");
    assert!(
        answer.contains(&format!("--data-dir {}", s(store.path()))),
        "{answer}"
    );
    assert!(!answer.contains("latest"), "{answer}");
    assert!(then.contains(&format!("--script {SCRIPT}")), "{then}");

    let approved = home.sh(&answer, &[]).await;
    assert_eq!(approved.code, 0, "{answer}\n{}", approved.stderr);
    assert!(approved.stdout.contains("approved"), "{}", approved.stdout);
    // `plan approve` prints the same way to run it, but for the model,
    // which only the run knew.
    let offline = command_after(&approved.stdout, "run it with: ");
    assert!(then.starts_with(&offline), "{offline}\n{then}");

    // Under the session's posture (suggest) exec could not ask: the
    // command says --posture auto, and the script's guardian reviews.
    assert!(then.contains("--posture auto"), "{then}");
    let implemented = home.sh(&then, &[]).await;
    assert_eq!(implemented.code, 0, "{then}\n{}", implemented.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("greeting.txt")).expect("implemented"),
        "hello\n"
    );
    // The decoy still waits, untouched.
    let decoy = home.sh("cadre sessions show latest", &[]).await;
    assert!(decoy.stdout.contains("waiting: plan-"), "{}", decoy.stdout);
    assert!(!decoy_ws.path().join("greeting.txt").exists());
}

/// The README's first command, then the two commands it prints, pasted:
/// the built-in demo implements its approved plan (its guardian reviews
/// the write), instead of ending with "that is all the demo does".
#[tokio::test]
async fn following_the_demos_printed_steps_implements_its_plan() {
    let home = Home {
        dir: TempDir::new().expect("home"),
    };
    let ws = TempDir::new().expect("workspace");
    let run = home
        .sh(
            &format!(
                "cadre exec --mode plan --workspace {} 'Add a greeting module'",
                s(ws.path())
            ),
            &[],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!ws.path().join("src/greeting.rs").exists(), "Plan wrote");
    let answer = command_after(&run.stderr, "answer with: ");
    let then = command_after(&run.stderr, "then run it with: ");
    let approved = home.sh(&answer, &[]).await;
    assert_eq!(approved.code, 0, "{answer}\n{}", approved.stderr);
    let implemented = home
        .sh(&format!("cd {} && {then}", s(ws.path())), &[])
        .await;
    assert_eq!(implemented.code, 0, "{then}\n{}", implemented.stderr);
    assert!(
        implemented
            .stderr
            .contains("Auto-Review allowed 'write_file' (low risk, model guardian)"),
        "{}",
        implemented.stderr
    );
    let module = std::fs::read_to_string(ws.path().join("src/greeting.rs")).expect("implemented");
    assert!(module.contains("pub fn greet()"), "{module}");
    assert!(
        !implemented
            .stdout
            .contains("That is all the built-in demo script does"),
        "{}",
        implemented.stdout
    );
}
