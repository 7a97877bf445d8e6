//! Item 6: the prompt from stdin (`-`, or a pipe with no PROMPT) or from a
//! file, of any size: past the ~128 KiB an argument may hold.

use serde_json::Value;

use super::{Dirs, run, s, strs};
use crate::support::mock::{MockServer, Reply, text_chunks};

/// How the prompt reaches exec.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `exec -`, the prompt on stdin.
    Dash,
    /// No PROMPT, the prompt piped in.
    Pipe,
    /// `--prompt-file FILE`.
    File,
    /// `--prompt-file -`, the prompt on stdin.
    FileDash,
}

/// What the model was sent as the user's message when `prompt` reached
/// exec through `source`; the run must succeed.
async fn sent(source: Source, prompt: &str) -> String {
    let dirs = Dirs::new();
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("read it"))]);
    let file = dirs.data.path().join("prompt.txt");
    std::fs::write(&file, prompt).expect("prompt file");
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend([
        "--base-url".into(),
        mock.url.clone(),
        "--model".into(),
        "m".into(),
    ]);
    let stdin = match source {
        Source::Dash => {
            args.push("-".into());
            Some(prompt.as_bytes())
        }
        Source::Pipe => Some(prompt.as_bytes()),
        Source::File => {
            args.extend(["--prompt-file".into(), s(&file).into()]);
            None
        }
        Source::FileDash => {
            args.extend(["--prompt-file".into(), "-".into()]);
            Some(prompt.as_bytes())
        }
    };
    let out = run(&strs(&args), &[], stdin).await;
    assert_eq!(out.code, 0, "{source:?}: {}", out.stderr);
    let requests = mock.requests();
    let messages = requests[0]["messages"].as_array().expect("messages");
    let user: Vec<&Value> = messages.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(user.len(), 1, "{source:?}");
    user[0]["content"].as_str().expect("text").to_string()
}

async fn check(source: Source, prompt: &str, expected: &str) {
    assert_eq!(sent(source, prompt).await, expected, "{source:?}");
}

#[tokio::test]
async fn the_prompt_comes_from_stdin_or_a_file_whole_past_the_argument_limit() {
    // 300 KiB: more than one argument may hold.
    let long = format!(
        "{}the end",
        "Summarise this line of the log.\n".repeat(9_600)
    );
    assert!(long.len() > 300_000);
    for source in [Source::Dash, Source::Pipe, Source::File, Source::FileDash] {
        check(source, &long, &long).await;
    }
    // A piped line's newline is not part of the prompt.
    check(Source::Pipe, "Say hello\n", "Say hello").await;
}

#[tokio::test]
async fn an_empty_stdin_or_two_prompts_are_bad_usage() {
    let dirs = Dirs::new();
    let mut base: Vec<String> = vec!["exec".into()];
    base.extend(dirs.flags());
    let with = |extra: &[&str]| {
        let mut args = base.clone();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let out = run(&strs(&with(&["-"])), &[], Some(b" \n")).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("a PROMPT is required"),
        "{}",
        out.stderr
    );
    let out = run(
        &strs(&with(&["--prompt-file", "/nonexistent/p.txt"])),
        &[],
        None,
    )
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--prompt-file /nonexistent/p.txt"),
        "{}",
        out.stderr
    );
    let out = run(
        &strs(&with(&["--prompt-file", "p.txt", "hello"])),
        &[],
        None,
    )
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}
