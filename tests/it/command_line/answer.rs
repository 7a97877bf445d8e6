//! `exec`'s stdout is the answer (issue: `answer=$(cadre exec …)` captured
//! chatter): the last message of the last turn; what the model said before
//! a tool call goes to stderr with the progress, and
//! `--output-last-message FILE` keeps the answer in any output format.

use super::{Dirs, run, s, strs};

const SCRIPT: &str = r#"
[[response]]
iteration = 1
text = "Let me look at the workspace first."
[[response.tool_calls]]
name = "list_dir"
arguments = { path = "." }

[[response]]
iteration = 2
text = "The workspace is empty."
"#;

#[tokio::test]
async fn exec_prints_only_the_answer_on_stdout_and_the_rest_on_stderr() {
    let dirs = Dirs::new();
    let script = dirs.data.path().join("s.toml");
    std::fs::write(&script, SCRIPT).expect("script");
    let file = dirs.data.path().join("answer.txt");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend([
        "--script".into(),
        s(&script).into(),
        "--output-last-message".into(),
        s(&file).into(),
        "look".into(),
    ]);
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "The workspace is empty.\n");
    assert!(
        out.stderr.contains("Let me look at the workspace first."),
        "{}",
        out.stderr
    );
    let first = out.stderr.find("Let me look").expect("said");
    let call = out.stderr.find("→ list_dir").expect("the call");
    assert!(first < call, "said before its call:\n{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&file).expect("answer file"),
        "The workspace is empty.\n"
    );

    // The same answer in the file with stream-json on stdout.
    let dirs = Dirs::new();
    let script = dirs.data.path().join("s.toml");
    std::fs::write(&script, SCRIPT).expect("script");
    let file = dirs.data.path().join("answer.txt");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend([
        "--script".into(),
        s(&script).into(),
        "--output-format".into(),
        "stream-json".into(),
        "--output-last-message".into(),
        s(&file).into(),
        "look".into(),
    ]);
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("{\"type\":\"session.started\""));
    assert_eq!(
        std::fs::read_to_string(&file).expect("answer file"),
        "The workspace is empty.\n"
    );
}
