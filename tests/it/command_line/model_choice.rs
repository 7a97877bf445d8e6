//! The model is part of the session (LLM4, LLM9): a resume talks to the
//! model its session was started with, under the rules it was started
//! with, and never falls back to the built-in demo; the demo runs only when
//! nothing names a model, and says so.

use serde_json::Value;

use super::{Dirs, run, s, strs};
use crate::support::cli::{events, of_type};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// `exec` in `dirs` with stream-json output, `extra` before the prompt.
fn exec(dirs: &Dirs, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend(["--output-format".into(), "stream-json".into()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn started(out: &crate::support::cli::Output) -> Value {
    events(out)[0].clone()
}

/// What the model said in the run.
fn said(out: &crate::support::cli::Output) -> Vec<String> {
    of_type(&events(out), "assistant.message")
        .iter()
        .map(|e| e["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn resume_without_model_flags_keeps_the_sessions_server_and_never_runs_the_demo() {
    let mock = MockServer::start().await;
    mock.push([
        Reply::sse(&text_chunks("first answer")),
        Reply::sse(&text_chunks("second answer")),
        Reply::sse(&text_chunks("third answer")),
    ]);
    let dirs = Dirs::new();
    let key = [("OPENAI_API_KEY", "sk-test")];
    let first = run(
        &strs(&exec(
            &dirs,
            &["--base-url", &mock.url, "--model", "m-1", "one"],
        )),
        &key,
        None,
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(started(&first)["model_source"], "flags");

    for (flag, prompt) in [
        (&["--resume", "latest"][..], "two"),
        (&["--continue"][..], "three"),
    ] {
        let mut extra = flag.to_vec();
        extra.push(prompt);
        let out = run(&strs(&exec(&dirs, &extra)), &key, None).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let head = started(&out);
        assert_eq!(head["model"], "m-1", "{flag:?}");
        assert_eq!(head["model_source"], "recorded", "{flag:?}");
        assert!(
            !out.stderr.contains("demo"),
            "no demo notice: {}",
            out.stderr
        );
        assert!(
            said(&out).iter().all(|t| t.ends_with("answer")),
            "{:?}",
            said(&out)
        );
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "every turn went to the server");
    assert!(requests.iter().all(|r| r["model"] == "m-1"));
    // Nothing of the key is stored.
    let db = std::fs::read(dirs.data.path().join("cadre.db")).expect("store");
    assert!(!String::from_utf8_lossy(&db).contains("sk-test"));
}

#[tokio::test]
async fn resume_whose_key_is_gone_fails_with_exit_2_naming_the_variable() {
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("first answer"))]);
    let dirs = Dirs::new();
    let first = run(
        &strs(&exec(
            &dirs,
            &["--base-url", &mock.url, "--model", "m", "one"],
        )),
        &[("OPENAI_API_KEY", "sk-test")],
        None,
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let out = run(
        &strs(&exec(&dirs, &["--resume", "latest", "two"])),
        &[],
        None,
    )
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("OPENAI_API_KEY"), "{}", out.stderr);
    assert!(out.stderr.contains(&mock.url), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 1, "the resume sent nothing");
}

#[tokio::test]
async fn a_flag_changes_a_resumed_sessions_model_and_says_so() {
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("from the server"))]);
    let dirs = Dirs::new();
    let first = run(
        &strs(&exec(
            &dirs,
            &["--base-url", &mock.url, "--model", "m", "one"],
        )),
        &[],
        None,
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let script = dirs.data.path().join("s.toml");
    std::fs::write(
        &script,
        "[[response]]\nrepeat = true\ntext = \"from the script\"\n",
    )
    .expect("script");
    let out = run(
        &strs(&exec(
            &dirs,
            &["--resume", "latest", "--script", s(&script), "two"],
        )),
        &[],
        None,
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("this session was started with m at {}", mock.url)),
        "{}",
        out.stderr
    );
    assert_eq!(said(&out), ["from the script"]);
    // The change is the session's now: the next plain resume keeps it.
    let again = run(
        &strs(&exec(&dirs, &["--resume", "latest", "three"])),
        &[],
        None,
    )
    .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(said(&again), ["from the script"]);
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn resume_keeps_the_sessions_allow_rules() {
    let dirs = Dirs::new();
    let target = dirs.ws.path().join("made-by-rule");
    let script = dirs.data.path().join("s.toml");
    std::fs::write(
        &script,
        format!(
            "[[response]]\nturn = 2\niteration = 1\n[[response.tool_calls]]\nname = \"bash\"\n\
             arguments = {{ command = \"touch {}\" }}\n\n\
             [[response]]\nrepeat = true\ntext = \"done\"\n",
            target.display()
        ),
    )
    .expect("script");
    let first = run(
        &strs(&exec(
            &dirs,
            &["--script", s(&script), "--allow", "bash(touch:*)", "one"],
        )),
        &[],
        None,
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(!target.exists());
    // No flags: the script and the rule come from the session.
    let out = run(
        &strs(&exec(&dirs, &["--resume", "latest", "two"])),
        &[],
        None,
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let all = events(&out);
    let results = of_type(&all, "tool.result");
    assert_eq!(results[0]["status"], "ok", "{:?}", results[0]);
    assert!(target.exists(), "the recorded allow rule let the call run");
}

#[tokio::test]
async fn the_demo_runs_only_when_nothing_names_a_model_and_says_so_at_both_ends() {
    let dirs = Dirs::new();
    let out = run(&strs(&exec(&dirs, &["hello"])), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(started(&out)["model_source"], "demo");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.contains("built-in demo script answers, not a model")),
        "{}",
        out.stderr
    );
    assert!(
        lines.last().is_some_and(|l| l.contains(
            "this was cadre's built-in demo script, not a model; see README: Using a real model"
        )),
        "{}",
        out.stderr
    );
    // A model name with a base URL of its own never runs the demo.
    let mock = MockServer::start().await;
    mock.push([Reply::sse(&text_chunks("real"))]);
    let out = run(
        &strs(&exec(&Dirs::new(), &["hello"])),
        &[("OPENAI_BASE_URL", &mock.url), ("OPENAI_MODEL", "m")],
        None,
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(started(&out)["model_source"], "flags");
    assert!(!out.stderr.contains("demo"), "{}", out.stderr);
    assert_eq!(said(&out), ["real"]);
}

#[tokio::test]
async fn workflow_resume_runs_the_unfinished_step_on_the_runs_model_not_the_demo() {
    let mock = MockServer::start().await;
    // The first run's step fails (the server refuses it, not worth a
    // retry); the resume's succeeds.
    mock.push([
        Reply::error(400, "bad request"),
        Reply::sse(&tool_call_chunks(
            "c1",
            "list_dir",
            &serde_json::json!({"path": "."}),
        )),
        Reply::sse(&text_chunks("the real answer")),
    ]);
    let dirs = Dirs::new();
    let file = dirs.ws.path().join("w.toml");
    std::fs::write(
        &file,
        "[workflow]\nname = \"w\"\n\n[[steps]]\nname = \"only\"\nprompt = \"Say something.\"\n",
    )
    .expect("workflow");
    let mut args: Vec<String> = vec!["workflow".into(), "run".into(), s(&file).into()];
    args.extend(dirs.flags());
    args.extend([
        "--base-url".into(),
        mock.url.clone(),
        "--model".into(),
        "m".into(),
    ]);
    let first = run(&strs(&args), &[], None).await;
    assert_eq!(first.code, 1, "{}\n{}", first.stdout, first.stderr);

    let list = run(
        &["workflow", "list", "--data-dir", s(dirs.data.path())],
        &[],
        None,
    )
    .await;
    let run_id = list
        .stdout
        .split_whitespace()
        .find(|w| w.len() > 8 && w.contains('-'))
        .expect("a run id")
        .to_string();
    let mut args: Vec<String> = vec![
        "workflow".into(),
        "resume".into(),
        run_id.clone(),
        "--retry-failed".into(),
    ];
    args.extend(dirs.flags());
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stderr.contains("demo"), "{}", out.stderr);
    assert_eq!(
        mock.requests().len(),
        3,
        "the resumed step asked the server"
    );
    let show = run(
        &[
            "workflow",
            "show",
            &run_id,
            "--data-dir",
            s(dirs.data.path()),
        ],
        &[],
        None,
    )
    .await;
    assert!(show.stdout.contains("the real answer"), "{}", show.stdout);
}
