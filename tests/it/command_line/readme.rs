//! Item 10: README's commands, walked offline from a fresh copy of the
//! repository in the order a reader meets them; the stream-json example
//! validates against its own schema; CI runs what README says it runs.

use std::path::Path;

use super::walk::{Documented, Walk, commands};
use crate::support::cli::{Output, events};

fn read(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).expect(file)
}

/// README's `sh` blocks, each with the marker before it: `<!-- walk -->`,
/// `<!-- walk: exit N -->` or `<!-- walk: skip, why -->`. Returns the
/// commands to walk, in order; every `sh` block must say which it is.
fn walked(readme: &str) -> Vec<Documented> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if line.trim() != "```sh" {
            continue;
        }
        let marker = n
            .checked_sub(1)
            .map(|m| lines[m].trim())
            .and_then(|l| l.strip_prefix("<!-- walk"))
            .and_then(|l| l.strip_suffix("-->"))
            .unwrap_or_else(|| panic!("README line {}: a sh block without a walk marker", n + 1))
            .trim();
        let code = match marker {
            "" => 0,
            m if m.starts_with(": skip,") => continue,
            m => m
                .strip_prefix(": exit ")
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or_else(|| panic!("README line {n}: unreadable marker {marker:?}")),
        };
        let block = lines[n + 1..]
            .iter()
            .take_while(|l| l.trim() != "```")
            .copied();
        found.extend(commands(block, code));
    }
    found
}

#[tokio::test]
async fn every_readme_command_runs_offline_from_a_fresh_copy_as_documented() {
    let readme = read("README.md");
    let documented = walked(&readme);
    // README's first command is the offline main job.
    assert_eq!(
        documented[0].line,
        r#"cargo run -- exec --mode plan "Add a greeting module""#
    );
    let walk = Walk::new();
    let outputs = walk.all(&documented).await;
    let said = |needle: &str| -> &Output {
        let i = documented
            .iter()
            .position(|d| d.line.contains(needle))
            .unwrap_or_else(|| panic!("no README command contains {needle:?}"));
        &outputs[i]
    };
    // The shell's walk creates its workspace; the plan is implemented.
    assert!(
        said("--workspace /tmp/ws")
            .stderr
            .contains("created the workspace"),
        "{}",
        said("--workspace /tmp/ws").stderr
    );
    assert_eq!(
        std::fs::read_to_string(walk.tmp("greeting/greeting.txt")).expect("implemented"),
        "hello\n"
    );
    // The audit it points to is there.
    assert!(
        said("sessions audit latest")
            .stdout
            .contains("deterministic floor"),
        "{}",
        said("sessions audit latest").stdout
    );
}

#[test]
fn readme_keeps_its_test_command_and_ci_runs_it_with_fmt_and_clippy() {
    let readme = read("README.md");
    assert!(
        readme.contains("```sh\ncargo test --workspace\n```"),
        "README's test command"
    );
    let ci = read(".ci/run");
    for command in [
        "cargo fmt --all -- --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "cargo test --workspace",
    ] {
        assert!(
            ci.lines().any(|l| l.trim() == command),
            ".ci/run lacks {command}"
        );
    }
}

#[test]
fn the_stream_json_example_validates_against_its_own_schema() {
    let doc = read("docs/stream-json.md");
    let example = doc
        .split("## Example")
        .nth(1)
        .and_then(|rest| rest.split("```").nth(1))
        .expect("an example block");
    let out = Output {
        code: 0,
        stdout: example.trim().to_string(),
        stderr: String::new(),
    };
    // Every line against the schema; first and last as the contract says.
    let lines = events(&out);
    assert_eq!(lines.len(), example.trim().lines().count());
}
