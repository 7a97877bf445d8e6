//! Item 11, the smaller courtesies: a spinner while a terminal waits for the
//! model, a few lines of tool output (more with `-v`), counted nouns,
//! unknown settings named, `config set` keeping comments, `cadre "PROMPT"`
//! opening the shell with it, and answers shown as words.

use rexpect::session::spawn_command;

use super::modes::HELLO;
use super::{Dirs, run, s, strs};
use crate::shell::{exits_0, expect, start_in};
use crate::support::hermetic::Hermetic;

/// One model request that reads a twelve-line file and runs a command
/// printing twelve lines, then answers.
const TWELVE: &str = r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "read_file"
arguments = { path = "twelve.txt" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "seq 1 12" }

[[response]]
iteration = 2
text = "read"
"#;

/// `exec` on `script` in `dirs` with `extra` flags before the prompt.
fn exec_args(dirs: &Dirs, script: &str, extra: &[&str]) -> Vec<String> {
    let file = dirs.data.path().join("script.toml");
    std::fs::write(&file, script).expect("script");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend(["--script".into(), s(&file).into()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push("go".into());
    args
}

/// What `exec` prints on a terminal (stdout and stderr together).
fn on_a_terminal(args: &[String], env: &[(&str, &str)]) -> String {
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
        .args(args)
        .env("TERM", "xterm")
        .envs(env.iter().copied());
    let mut pty = spawn_command(command, Some(20_000)).expect("spawn");
    pty.exp_eof().expect("cadre exits")
}

#[tokio::test]
async fn a_spinner_turns_while_a_terminal_waits_for_the_model_and_never_on_a_pipe() {
    let dirs = Dirs::new();
    let args = exec_args(&dirs, HELLO, &[]);
    let terminal = tokio::task::spawn_blocking({
        let args = args.clone();
        move || on_a_terminal(&args, &[])
    })
    .await
    .expect("terminal");
    assert!(terminal.contains("waiting for the model"), "{terminal}");
    assert!(terminal.contains("hello"), "{terminal}");

    // With logs on the terminal, the spinner would be cut through: none.
    let logged = tokio::task::spawn_blocking({
        let dirs = Dirs::new();
        let args = exec_args(&dirs, HELLO, &[]);
        move || on_a_terminal(&args, &[("RUST_LOG", "info")])
    })
    .await
    .expect("terminal");
    assert!(!logged.contains("waiting for the model"), "{logged}");

    let piped = run(&strs(&args), &[], None).await;
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(
        !piped.stderr.contains("waiting for the model"),
        "{}",
        piped.stderr
    );
    assert!(!piped.stderr.contains('\u{1b}'), "{}", piped.stderr);
}

/// What text shows of the twelve-line outputs with `extra` flags: every
/// line of `shown` is in stderr, none of `hidden` is.
async fn check_tool_output(extra: &[&str], (shown, hidden): (&[&str], &[&str])) {
    let dirs = Dirs::new();
    let twelve: String = (1..=12).map(|n| format!("line-{n}\n")).collect();
    std::fs::write(dirs.ws.path().join("twelve.txt"), twelve).expect("file");
    let out = run(&strs(&exec_args(&dirs, TWELVE, extra)), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in shown {
        assert!(
            out.stderr.contains(line),
            "{extra:?}: {line:?} missing\n{}",
            out.stderr
        );
    }
    for line in hidden {
        assert!(
            !out.stderr.contains(line),
            "{extra:?}: {line:?} shown\n{}",
            out.stderr
        );
    }
}

#[tokio::test]
async fn text_shows_a_few_lines_of_tool_output_and_more_with_v() {
    check_tool_output(
        &[],
        (
            &[
                "    ✓ line-1\n      line-2\n",
                "      line-5\n      … 7 more lines (-v shows more)\n",
                "      4\n      … 8 more lines (-v shows more)\n",
            ],
            &["line-6", "line-12"],
        ),
    )
    .await;
    check_tool_output(
        &["-v"],
        (
            &["      line-11\n      line-12\n", "      11\n      12\n"],
            &["more lines"],
        ),
    )
    .await;
}

#[tokio::test]
async fn one_is_singular_in_counted_nouns() {
    let dirs = Dirs::new();
    let out = run(&strs(&exec_args(&dirs, HELLO, &[])), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("turn 1 completed · 1 model request ·"),
        "{}",
        out.stderr
    );

    let workflow = dirs.ws.path().join("one.toml");
    std::fs::write(
        &workflow,
        "[workflow]\nname = \"one\"\n\n[[steps]]\nname = \"only\"\nprompt = \"go\"\n",
    )
    .expect("workflow");
    let out = run(&["workflow", "validate", s(&workflow)], &[], None).await;
    assert!(
        out.stdout.contains("is valid (1 step)"),
        "{} {}",
        out.stdout,
        out.stderr
    );
}

#[tokio::test]
async fn an_unknown_setting_is_named_on_every_run_and_a_known_one_is_not() {
    let dirs = Dirs::new();
    let settings = dirs.config.path().join("settings.toml");
    std::fs::write(
        &settings,
        "default_mode = \"work\"\ndefault_mod = \"plan\"\n",
    )
    .expect("settings");
    let out = run(&strs(&exec_args(&dirs, HELLO, &[])), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warned: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("unknown setting"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", out.stderr);
    assert!(warned[0].contains("'default_mod'"), "{}", out.stderr);
    assert!(warned[0].contains(s(&settings)), "{}", out.stderr);
}

#[tokio::test]
async fn config_set_keeps_the_files_comments_and_layout() {
    let dirs = Dirs::new();
    let config = s(dirs.config.path());
    let settings = dirs.config.path().join("settings.toml");
    let before = "# my defaults\ndefault_mode = \"work\" # for now\n\n[plan]\n# ask first\nagent_entry = false\n";
    std::fs::write(&settings, before).expect("settings");
    for (key, value) in [
        ("default_mode", "plan"),
        ("plan.agent_entry", "true"),
        ("model", "m"),
    ] {
        let out = run(
            &["config", "set", key, value, "--config-dir", config],
            &[],
            None,
        )
        .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let after = std::fs::read_to_string(&settings).expect("settings");
    assert_eq!(
        after,
        "# my defaults\ndefault_mode = \"plan\" # for now\nmodel = \"m\"\n\n[plan]\n# ask first\nagent_entry = true\n"
    );
    let out = run(
        &["config", "get", "default_mode", "--config-dir", config],
        &[],
        None,
    )
    .await;
    assert_eq!(out.stdout.trim(), "plan");
}

// The shell blocks on its terminal; nothing else runs meanwhile.
#[tokio::test]
async fn cadre_with_a_prompt_opens_the_shell_and_sends_it() {
    let script = "[[response]]\nrepeat = true\ntext = \"you said: ${turn}\"\n";
    let mut shell = start_in(Dirs::new().tuple(), script, &["Fix the failing test"], &[]);
    expect(&mut shell.pty, "cadre> Fix the failing test");
    expect(&mut shell.pty, "you said: 1");
    expect(&mut shell.pty, "turn 1 completed");
    shell.pty.send_line("/quit").expect("send");
    exits_0(&mut shell.pty);
}

#[tokio::test]
async fn the_shell_says_when_a_turn_waits_for_the_model() {
    let slow = "[[response]]\nrepeat = true\ndelay_ms = 2600\ntext = \"at last\"\n";
    let mut shell = start_in(Dirs::new().tuple(), slow, &["hello?"], &[]);
    expect(&mut shell.pty, "cadre> hello?");
    expect(&mut shell.pty, "waiting for the model (2 s)");
    expect(&mut shell.pty, "at last");
    expect(&mut shell.pty, "turn 1 completed");
    shell.pty.send_line("/quit").expect("send");
    exits_0(&mut shell.pty);
}

/// Turn 1 (Plan) writes the plan and submits it for approval.
const PLAN: &str = r###"
[[response]]
turn = 1
iteration = 1
mode = "plan"
[[response.tool_calls]]
name = "write_file"
arguments = { path = "${plan_file}", content = "## Summary\n\nAdd notes.txt.\n" }

[[response]]
turn = 1
iteration = 2
text = "The plan waits for your approval."
[[response.tool_calls]]
name = "exit_plan_mode"
arguments = {}

[[response]]
repeat = true
text = "revised"
"###;

#[tokio::test]
async fn revise_is_echoed_in_words_not_as_debug_text() {
    let mut shell = start_in(Dirs::new().tuple(), PLAN, &["--mode", "plan"], &[]);
    shell.pty.send_line("Plan notes").expect("send");
    expect(&mut shell.pty, "[a] approve  [d] defer  [r] revise");
    expect(&mut shell.pty, "turn 1 completed");
    shell.pty.send_line("r").expect("send");
    expect(&mut shell.pty, "type what to change");
    shell.pty.send_line("make it shorter").expect("send");
    let echoed = expect(&mut shell.pty, "sent back for revision: make it shorter");
    expect(&mut shell.pty, "now in plan mode");
    assert!(!echoed.contains("Revise {"), "{echoed}");
    shell.pty.send_line("/quit").expect("send");
    exits_0(&mut shell.pty);
}

#[tokio::test]
async fn a_workspace_that_is_a_file_is_named_as_such_by_exec_and_the_shell() {
    let dirs = Dirs::new();
    let file = dirs.ws.path().join("passwd");
    std::fs::write(&file, "root:x:0:0\n").expect("file");
    for command in [&["exec"][..], &[]] {
        let mut args = command.to_vec();
        args.extend([
            "--workspace",
            s(&file),
            "--data-dir",
            s(dirs.data.path()),
            "go",
        ]);
        let out = run(&args, &[], None).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert_eq!(
            out.stderr,
            format!("cadre: --workspace {} is not a directory\n", s(&file)),
            "{args:?}"
        );
    }
}
