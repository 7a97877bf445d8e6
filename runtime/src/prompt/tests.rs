//! The rendered system prompts, snapshot by snapshot: every mode, the
//! postures, a sub-agent, a role's prompt and project instructions, with a
//! fixed date and environment so the text never depends on the machine.

use std::path::PathBuf;

use super::*;

fn environment() -> Environment {
    Environment {
        date: "2026-12-02".into(),
        os: "linux (x86_64)".into(),
        shell: "bash (the bash tool runs each command in a fresh shell)".into(),
        workspace: PathBuf::from("/src/app"),
        git_branch: Some("main".into()),
        git_status: Some(vec![" M src/lib.rs".into(), "?? notes.txt".into()]),
        sandbox: "landlock-abi-7; namespaces enforced".into(),
    }
}

fn instructions() -> Instructions {
    Instructions {
        files: vec![PathBuf::from("/src/app/AGENTS.md")],
        text: "--- /src/app/AGENTS.md ---\nRun `cargo test` before you finish.\n".into(),
        sha256: "0".repeat(64),
        truncated: false,
        dir: PathBuf::from("/src/app"),
        global: None,
    }
}

fn render(mode: Mode, posture: Posture, session: bool, role: Option<&str>) -> String {
    let (environment, instructions) = (environment(), instructions());
    system_prompt(&PromptInput {
        mode,
        posture,
        session,
        delegates: session,
        environment: Some(&environment),
        workspace: &environment.workspace,
        instructions: Some(&instructions),
        role,
    })
}

#[test]
fn a_session_prompt_in_each_mode() {
    insta::assert_snapshot!("work_ask", render(Mode::Work, Posture::Suggest, true, None));
    insta::assert_snapshot!("plan_ask", render(Mode::Plan, Posture::Suggest, true, None));
    insta::assert_snapshot!(
        "operate_auto",
        render(Mode::Operate, Posture::Auto, true, None)
    );
}

#[test]
fn a_sub_agents_prompt_with_its_roles_own() {
    insta::assert_snapshot!(
        "worker_never_role",
        render(
            Mode::Work,
            Posture::Never,
            false,
            Some("You are a cheap worker: do one small thing.")
        )
    );
}

#[test]
fn the_same_input_gives_the_same_prompt_and_the_environment_comes_first() {
    let first = render(Mode::Work, Posture::Bypass, true, None);
    assert_eq!(first, render(Mode::Work, Posture::Bypass, true, None));
    assert!(first.starts_with("<environment>\ndate: 2026-12-02\n"));
    // Without an environment block, the workspace is still named first.
    let bare = system_prompt(&PromptInput {
        mode: Mode::Work,
        posture: Posture::Suggest,
        session: true,
        delegates: false,
        environment: None,
        workspace: Path::new("/w"),
        instructions: None,
        role: None,
    });
    assert!(bare.starts_with("<environment>\nworkspace: /w\n</environment>"));
    assert!(!bare.contains("project-instructions"));
}

#[test]
fn civil_dates_are_right_around_leap_days() {
    use std::time::{Duration, UNIX_EPOCH};
    let check = |secs: u64, expected: &str| {
        assert_eq!(civil_date(UNIX_EPOCH + Duration::from_secs(secs)), expected);
    };
    check(0, "1970-01-01");
    check(951_782_400, "2000-02-29");
    check(1_709_164_800, "2024-02-29");
    check(1_764_633_600, "2025-12-02");
}

/// Agents rendering the same prompt hold one copy; another text is
/// another copy.
#[test]
fn equal_prompts_are_held_once() {
    let a = super::shared("the same prompt, from the first agent".to_string());
    let b = super::shared("the same prompt, from the first agent".to_string());
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let c = super::shared("another prompt".to_string());
    assert!(!std::sync::Arc::ptr_eq(&a, &c));
    assert_eq!(&*c, "another prompt");
}
