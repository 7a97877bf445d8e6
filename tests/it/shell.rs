//! The interactive shell (`cadre` with no subcommand) driven through a
//! pseudo-terminal, as a person would: slash commands, turns, a plan
//! questionnaire and an approval answered inline, a mode change refused
//! while a turn runs, Ctrl-C.
//!
//! Every step waits for the shell's own output, never for time to pass;
//! each wait gives up after [`PATIENCE_MS`] so a broken shell fails the test
//! instead of hanging it.

use std::path::Path;
use std::process::Command;

use crate::support::hermetic::Hermetic;
use rexpect::process::WaitStatus;
use rexpect::session::{PtySession, spawn_command};
use tempfile::TempDir;

/// How long one expectation waits for its output.
const PATIENCE_MS: u64 = 20_000;

/// Turn 1 (Plan) writes the plan and submits it; turn 2 (Work) writes a
/// file the person must approve; turn 3 answers only after a minute, so it is still running
/// when the test changes the mode and presses Ctrl-C.
const SCRIPT: &str = r###"
[[response]]
turn = 1
iteration = 1
mode = "plan"
text = "I'll write the plan."
[[response.tool_calls]]
name = "write_file"
arguments = { path = "${plan_file}", content = "## Summary\n\nAdd notes.txt with one line; the shell test looks for PLAN-7f3a.\n" }

[[response]]
turn = 1
iteration = 2
text = "The plan is written; it waits for your approval."
[[response.tool_calls]]
name = "exit_plan_mode"
arguments = {}

[[response]]
turn = 2
iteration = 1
mode = "work"
[[response.tool_calls]]
name = "write_file"
arguments = { path = "notes.txt", content = "approved inline\n" }

[[response]]
turn = 2
iteration = 2
text = "notes.txt is written."

[[response]]
turn = 3
delay_ms = 60000
text = "This answer comes too late."
"###;

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Waits for `needle` in the shell's output, failing with what it printed;
/// returns what came before it. rexpect reads bytes as Latin-1, so needles
/// stay ASCII.
#[track_caller]
pub(crate) fn expect(shell: &mut PtySession, needle: &str) -> String {
    match shell.exp_string(needle) {
        Ok(before) => before,
        Err(err) => panic!("the shell never printed {needle:?}: {err}"),
    }
}

/// A shell in fresh directories, on `script`, its session started.
pub(crate) struct Shell {
    pub(crate) pty: PtySession,
    pub(crate) ws: TempDir,
    pub(crate) data: TempDir,
    pub(crate) config: TempDir,
}

fn start(script: &str) -> Shell {
    let dirs = (
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
        TempDir::new().expect("config"),
    );
    start_in(dirs, script, &[], &[])
}

/// A shell on `script` in these workspace, data and configuration
/// directories, with `args` after the usual flags and `env` set.
pub(crate) fn start_in(
    (ws, data, config): (TempDir, TempDir, TempDir),
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Shell {
    let script_file = data.path().join("shell.toml");
    std::fs::write(&script_file, script).expect("script");
    let mut command = Command::new(env!("CARGO_BIN_EXE_cadre"));
    command.hermetic();
    command
        .args(["--script", s(&script_file)])
        .args(["--workspace", s(ws.path())])
        .args(["--data-dir", s(data.path())])
        .args(["--config-dir", s(config.path())])
        .args(["--posture", "suggest"])
        .env("TERM", "xterm")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("CADRE_HOME")
        .env_remove("CADRE_POSTURE")
        .env_remove("CADRE_CONFIG_DIR")
        .env_remove("RUST_LOG")
        .env_remove("CADRE_MODE")
        .env_remove("NO_COLOR")
        .args(args)
        .envs(env.iter().copied());
    let mut pty = spawn_command(command, Some(PATIENCE_MS)).expect("spawn the shell");
    expect(&mut pty, "/help lists the commands");
    Shell {
        pty,
        ws,
        data,
        config,
    }
}

/// Waits for the shell to exit and checks it exited 0.
#[track_caller]
pub(crate) fn exits_0(shell: &mut PtySession) {
    shell.exp_eof().expect("the shell exits");
    let status = shell.process().wait().expect("wait");
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "exit status {status:?}"
    );
}

#[test]
fn the_shell_plans_asks_inline_refuses_a_mode_change_mid_turn_and_cancels_on_ctrl_c() {
    let Shell {
        pty: mut shell,
        ws,
        data,
        config,
    } = start(SCRIPT);

    // Plan mode, a turn in it that writes the plan and submits it, and the
    // questionnaire answered inline.
    shell.send_line("/mode plan").expect("send");
    expect(&mut shell, "mode: plan");
    shell.send_line("Plan the notes file").expect("send");
    expect(&mut shell, "[a] approve  [d] defer  [r] revise");
    expect(&mut shell, "turn 1 completed");
    shell.send_line("d").expect("send");
    expect(&mut shell, " deferred");
    shell.send_line("/plan view").expect("send");
    // The tool call line shortens the content before the marker.
    expect(&mut shell, "the shell test looks for PLAN-7f3a.");

    // Work mode: the write asks, and the inline answer lets it run.
    shell.send_line("/mode work").expect("send");
    expect(&mut shell, "mode: work");
    shell.send_line("Write the notes file").expect("send");
    expect(
        &mut shell,
        "[y] allow once  [s] allow for session  [n] deny",
    );
    shell.send_line("y").expect("send");
    // The session resolves the prompt as the call goes on; on a busy machine
    // the turn's own events can come first.
    if !expect(&mut shell, "turn 2 completed").contains("approval:1: allowed once") {
        expect(&mut shell, "approval:1: allowed once");
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).expect("notes.txt was written"),
        "approved inline\n"
    );

    // A slow turn: the mode stays, Ctrl-C cancels it.
    shell.send_line("Take your time").expect("send");
    expect(&mut shell, "turn 3 (work)");
    shell.send_line("/mode plan").expect("send");
    expect(&mut shell, "refused: a turn is running");
    shell.send_control('c').expect("send Ctrl-C");
    expect(&mut shell, "cancelling the turn");
    expect(&mut shell, "turn 3 failed (cancelled)");

    shell.send_line("/quit").expect("send");
    expect(&mut shell, "session stopped after 3 turns");
    exits_0(&mut shell);
    assert!(
        data.path().join("shell_history").exists(),
        "the history is kept in the data directory"
    );
    // The mode chosen last (and accepted) is the startup default; the
    // refused `/mode plan` did not overwrite it (M6).
    let settings =
        std::fs::read_to_string(config.path().join("settings.toml")).expect("settings.toml");
    assert!(settings.contains("default_mode = \"work\""), "{settings}");
}

#[test]
fn ctrl_c_at_an_idle_prompt_asks_again_and_a_second_one_in_a_row_leaves() {
    let mut shell = start(SCRIPT).pty;
    shell.send_control('c').expect("send Ctrl-C");
    expect(&mut shell, "(Ctrl-C again, Ctrl-D or /quit leaves)");
    shell.send_control('c').expect("send Ctrl-C");
    expect(&mut shell, "stopping the session");
    expect(&mut shell, "session stopped after 0 turns");
    exits_0(&mut shell);
}

/// `/mode plan` and `/quit` typed back to back: the receipt of the saved
/// startup mode is shown before the shell leaves, and the session, which
/// was asked nothing, is not kept.
#[test]
fn a_mode_receipt_before_quit_is_shown_and_an_unused_session_is_not_kept() {
    let Shell {
        pty: mut shell,
        data,
        config,
        ..
    } = start(SCRIPT);
    shell.send_line("/mode plan").expect("send");
    expect(&mut shell, "mode: plan");
    // (The line editor drops what is typed before it reads the next line.)
    shell.send_line("/quit").expect("send");
    let rest = shell.exp_eof().expect("the shell exits");
    assert!(rest.contains("session stopped after 0 turns"), "{rest}");
    assert!(
        rest.contains("saved as the startup mode for new sessions"),
        "{rest}"
    );
    let status = shell.process().wait().expect("wait");
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "exit status {status:?}"
    );
    let settings =
        std::fs::read_to_string(config.path().join("settings.toml")).expect("settings.toml");
    assert!(settings.contains("default_mode = \"plan\""), "{settings}");
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(["sessions", "list", "--data-dir", s(data.path())])
        .output()
        .expect("sessions list");
    assert!(listed.status.success());
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "");
    assert!(
        String::from_utf8_lossy(&listed.stderr).contains("no sessions"),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
}

/// One turn that creates a file (the person allows it), for `/restore`.
const RESTORE_SCRIPT: &str = r###"
[[response]]
turn = 1
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "made.txt", content = "made by turn 1\n" }

[[response]]
turn = 1
iteration = 2
text = "made.txt is written."
"###;

#[test]
fn restore_and_mcp_in_the_shell() {
    let Shell {
        pty: mut shell, ws, ..
    } = start(RESTORE_SCRIPT);
    shell.send_line("/mcp").expect("send");
    expect(&mut shell, "no MCP servers are configured");
    shell.send_line("/restore").expect("send");
    expect(&mut shell, "no snapshots yet");

    shell.send_line("Make the file").expect("send");
    expect(
        &mut shell,
        "[y] allow once  [s] allow for session  [n] deny",
    );
    shell.send_line("y").expect("send");
    expect(&mut shell, "turn 1 completed");
    assert!(ws.path().join("made.txt").exists());

    shell.send_line("/restore list").expect("send");
    let (_, line) = shell
        .exp_regex(r"[0-9a-f]{12}  [0-9: -]+  turn 1  1 changed since")
        .expect("the snapshot of turn 1 is listed");
    let id = line.split_whitespace().next().expect("id").to_string();
    shell
        .send_line(&format!("/restore {id} --dry-run"))
        .expect("send");
    expect(&mut shell, "(dry run, nothing changed)");
    expect(&mut shell, "remove   made.txt");
    assert!(ws.path().join("made.txt").exists());
    shell.send_line(&format!("/restore {id}")).expect("send");
    expect(&mut shell, "workspace restored to");
    expect(&mut shell, "undo with: cadre restore apply");
    assert!(!ws.path().join("made.txt").exists());

    shell.send_line("/quit").expect("send");
    exits_0(&mut shell);
}

/// A workflow whose one step writes a file: under Ask, its write waits for
/// the person, whose answer goes to the step.
const WORKFLOW_SCRIPT: &str = r###"
[[response]]
role = "writer"
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "from-step.txt", content = "written by a step\n" }

[[response]]
role = "writer"
iteration = 2
text = "from-step.txt is written."
"###;

#[test]
fn workflow_runs_over_the_session_and_its_steps_prompts_are_answered_inline() {
    let Shell {
        pty: mut shell,
        ws,
        data,
        config,
    } = start(WORKFLOW_SCRIPT);
    std::fs::write(
        ws.path().join("wf.toml"),
        "[workflow]\nname = \"overlay\"\n[[steps]]\nname = \"writer\"\nprompt = \"write the file\"\n",
    )
    .expect("workflow file");
    shell.send_line("/workflow wf.toml").expect("send");
    expect(&mut shell, "step:writer[0]:approval:1");
    shell.send_line("y").expect("send");
    expect(&mut shell, "every step ran: yes");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("from-step.txt")).expect("written"),
        "written by a step\n"
    );
    shell.send_line("/workflow cancel").expect("send");
    expect(&mut shell, "no workflow is running");
    shell.send_line("/quit").expect("send");
    exits_0(&mut shell);
    drop((data, config));
}

/// A first turn that takes a minute, for Esc to cancel.
const SLOW_SCRIPT: &str = r###"
[[response]]
turn = 1
delay_ms = 60000
text = "This answer comes too late."

[[response]]
turn = 2
text = "The second turn."
"###;

/// Issue 26, item 1: Esc is a cancel stack, never a Meta prefix. At an
/// idle prompt it clears the half-typed line and the next key is read as
/// typed; while a turn runs it cancels the turn; it never leaves.
#[test]
fn esc_clears_the_line_at_an_idle_prompt_and_cancels_a_running_turn() {
    let mut shell = start(SLOW_SCRIPT).pty;
    // Each key as a person types it: written out now, not with the next line.
    let mut press = |keys: &str| {
        shell.send(keys).expect("send");
        shell.flush().expect("flush");
        std::thread::sleep(std::time::Duration::from_millis(150));
    };
    press("half a thought");
    press("\x1b");
    // Not "half a thought/queue" to the model, nor "queue": the command.
    shell.send_line("/queue").expect("send");
    expect(&mut shell, "queue: 0 waiting");
    shell.send_line("Take your time").expect("send");
    expect(&mut shell, "turn 1 (work)");
    shell.send("\x1b").expect("send Esc");
    shell.flush().expect("flush");
    expect(&mut shell, "cancelling the turn");
    expect(&mut shell, "turn 1 failed (cancelled)");
    // Esc at an idle prompt with nothing typed does nothing, twice.
    for _ in 0..2 {
        shell.send("\x1b").expect("send Esc");
        shell.flush().expect("flush");
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    shell.send_line("/quit").expect("send");
    expect(&mut shell, "session stopped after 1 turn");
    exits_0(&mut shell);
}
