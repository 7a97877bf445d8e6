//! Item 5: every example file's commented command, run as shown, does what
//! the comment says.

use std::collections::BTreeMap;
use std::path::Path;

use super::walk::{Documented, Walk, commands};

/// The commands in the leading comment of `file` (relative to the
/// repository), each expected to exit `code`.
fn commented(file: &str, code: i32) -> Vec<Documented> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).expect("example file");
    let comment = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#'));
    commands(comment, code)
}

/// Every example file with a command in its leading comment.
fn with_commands() -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["examples/scripts", "examples/workflows"] {
        let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(full).expect("examples") {
            let name = entry.expect("entry").file_name();
            let file = format!("{dir}/{}", name.to_string_lossy());
            if !commented(&file, 0).is_empty() {
                found.push(file);
            }
        }
    }
    found.sort();
    found
}

/// Runs `file`'s commands in a fresh walk; `then` checks what they did.
async fn check(file: &str, code: i32, then: impl FnOnce(&Walk, &[crate::support::cli::Output])) {
    let walk = Walk::new();
    let documented = commented(file, code);
    assert!(!documented.is_empty(), "{file} shows no command");
    let outputs = walk.all(&documented).await;
    then(&walk, &outputs);
}

#[tokio::test]
async fn every_example_does_what_its_comment_says_with_the_command_shown() {
    let mut covered = BTreeMap::new();
    let mut file = |name: &'static str| {
        covered.insert(name.to_string(), ());
        name
    };

    check(
        file("examples/scripts/write-and-check.toml"),
        0,
        |walk, out| {
            let written = std::fs::read_to_string(walk.tmp("ws/hello.txt")).expect("hello.txt");
            assert_eq!(written, "hello from cadre\n");
            // The check the answer quotes ran, and passed.
            assert!(
                out[0].stderr.contains("    ✓ exit code: 0"),
                "{}",
                out[0].stderr
            );
            assert!(out[0].stdout.contains("printed 1"), "{}", out[0].stdout);
        },
    )
    .await;

    check(
        file("examples/scripts/plan-and-implement.toml"),
        0,
        |walk, out| {
            assert!(
                out[0].stdout.contains("approval: plan-"),
                "{}",
                out[0].stdout
            );
            assert!(out[1].stdout.contains("approved"), "{}", out[1].stdout);
            let written =
                std::fs::read_to_string(walk.tmp("greeting/greeting.txt")).expect("greeting.txt");
            assert_eq!(written, "hello\n");
        },
    )
    .await;

    check(
        file("examples/scripts/malformed-calls.toml"),
        0,
        |_, out| {
            for refused in ["invalid_arguments", "not_found"] {
                assert!(out[0].stderr.contains(refused), "{}", out[0].stderr);
            }
        },
    )
    .await;

    // Three continuations, then the verifier passes: exit 0. README shows
    // the same command (its walk skips it: see there).
    check(file("examples/scripts/goal-notes.toml"), 0, |_, out| {
        assert!(
            out[0].stderr.contains("goal complete(verifier_met)"),
            "{}",
            out[0].stderr
        );
        let readme =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
                .expect("README");
        let shown = commented("examples/scripts/goal-notes.toml", 0);
        assert!(
            commands(readme.lines(), 0).contains(&shown[0]),
            "README no longer shows {:?}",
            shown[0].line
        );
    })
    .await;

    // Blocked behind the failed lockfile check: exit 1, as the comment says.
    check(file("examples/workflows/review.toml"), 1, |_, out| {
        let all = format!("{}{}", out[0].stdout, out[0].stderr);
        assert!(all.contains("release-notes"), "{all}");
        assert!(all.contains("blocked"), "{all}");
        // The summary passed its verifier.
        assert!(all.contains("summary: verified"), "{all}");
    })
    .await;

    let covered: Vec<String> = covered.into_keys().collect();
    assert_eq!(
        covered,
        with_commands(),
        "an example's command is not walked"
    );
}
