//! Text output never lets a file, a command's output or the model drive the
//! terminal: control characters other than newline and tab are shown as
//! `\xNN` escapes, in `exec` and in the shell. The JSON formats keep the
//! text as it was (JSON escapes it).

use super::{Dirs, run, s, strs};
use crate::shell::{exits_0, expect, start_in};

/// A turn that reads a file holding escape sequences, runs a command that
/// prints some, and answers with more.
const HOSTILE: &str = r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "read_file"
arguments = { path = "evil.txt" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "printf 'out \\033[2J\\033]0;title\\007\\n'" }

[[response]]
iteration = 2
text = "answer \u001b[41mBOOM\u001b[0m \u009b31m end"
"#;

const FILE: &str = "file \x1b]52;c;ZXZpbA==\x07 \rhidden\n";

/// Bytes a terminal would obey in what cadre printed: ESC, BEL, CR and the
/// single-character CSI.
fn obeyed(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| matches!(c, '\x1b' | '\x07' | '\r' | '\u{9b}'))
        .collect()
}

fn script_in(dirs: &Dirs) -> String {
    std::fs::write(dirs.ws.path().join("evil.txt"), FILE).expect("file");
    let file = dirs.data.path().join("hostile.toml");
    std::fs::write(&file, HOSTILE).expect("script");
    s(&file).to_string()
}

#[tokio::test]
async fn escape_sequences_from_a_file_a_command_or_the_model_reach_the_terminal_in_text_mode() {
    let dirs = Dirs::new();
    let script = script_in(&dirs);
    let mut args = vec!["exec".to_string(), "--posture".into(), "bypass".into()];
    args.extend(dirs.flags());
    args.extend(["--script".into(), script.clone(), "go".into()]);
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(obeyed(&out.stdout), Vec::<char>::new(), "{:?}", out.stdout);
    assert_eq!(obeyed(&out.stderr), Vec::<char>::new(), "{:?}", out.stderr);
    // Each one is shown, not dropped: a person sees something was there.
    assert!(
        out.stdout
            .contains(r"answer \x1b[41mBOOM\x1b[0m \x9b31m end"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains(r"file \x1b]52;c;ZXZpbA==\x07 \x0dhidden"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(r"out \x1b[2J\x1b]0;title\x07"),
        "{}",
        out.stderr
    );

    // stream-json carries the text exactly; JSON escapes it.
    let mut json = args.clone();
    json.splice(1..1, ["--output-format".to_string(), "stream-json".into()]);
    let out = run(&strs(&json), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(r"\u001b[41mBOOM"), "{}", out.stdout);
    let c0 = |text: &str| {
        text.chars()
            .filter(|c| c.is_ascii_control() && *c != '\n')
            .count()
    };
    assert_eq!(c0(&out.stdout), 0, "{}", out.stdout);
}

// The shell blocks on its terminal; nothing else runs meanwhile.
#[tokio::test]
async fn escape_sequences_from_a_file_a_command_or_the_model_reach_the_terminal_in_the_shell() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws.path().join("evil.txt"), FILE).expect("file");
    let mut shell = start_in(dirs.tuple(), HOSTILE, &[], &[]);
    shell.pty.send_line("go").expect("send");
    let printed = expect(&mut shell.pty, "turn 1 completed");
    shell.pty.send_line("/quit").expect("send");
    exits_0(&mut shell.pty);
    // The line editor draws with escape sequences of its own; none of the
    // hostile ones may pass.
    for hostile in [
        "\x1b]52;",
        "\x1b]0;title",
        "\x1b[2J",
        "\x1b[41m",
        "\rhidden",
    ] {
        assert!(
            !printed.contains(hostile),
            "{hostile:?} reached the terminal: {printed:?}"
        );
    }
    for shown in [
        r"\x1b]52;c;ZXZpbA==\x07",
        r"\x1b[41mBOOM",
        r"\x1b]0;title\x07",
    ] {
        assert!(printed.contains(shown), "{shown} not shown: {printed:?}");
    }
}

#[tokio::test]
async fn stored_text_shown_by_the_offline_commands_cannot_drive_the_terminal() {
    let dirs = Dirs::new();
    let script = script_in(&dirs);
    let mut args = vec!["exec".to_string(), "--posture".into(), "bypass".into()];
    args.extend(dirs.flags());
    args.extend([
        "--script".into(),
        script,
        "title \u{1b}]0;owned\u{7} \u{9b}2J".into(),
    ]);
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let data = ["--data-dir", s(dirs.data.path())];
    for command in [
        vec!["sessions", "list"],
        vec!["sessions", "show", "latest"],
        vec!["sessions", "audit", "latest"],
    ] {
        let mut command = command;
        command.extend(data);
        let out = run(&command, &[], None).await;
        assert_eq!(out.code, 0, "{command:?}: {}", out.stderr);
        assert_eq!(
            obeyed(&out.stdout),
            Vec::<char>::new(),
            "{command:?}: {:?}",
            out.stdout
        );
        if command[1] != "audit" {
            assert!(
                out.stdout.contains(r"title \x1b]0;owned\x07 \x9b2J"),
                "{command:?}: {}",
                out.stdout
            );
        }
    }
}
