//! Item 8: turn ids go on across resumes, and `sessions show` shows the
//! mode and posture a resume uses.

use serde_json::Value;

use super::modes::HELLO;
use super::{Dirs, run, s, strs};
use crate::shell::{exits_0, expect, start_in};
use crate::support::cli::{events, of_type};

#[tokio::test]
async fn turn_ids_go_on_across_resumes_and_show_says_what_a_resume_uses() {
    let dirs = Dirs::new();
    let config = s(dirs.config.path());
    // Defaults that a resume must not take over the session's own.
    for (key, value) in [("default_mode", "operate"), ("default_posture", "never")] {
        let out = run(
            &["config", "set", key, value, "--config-dir", config],
            &[],
            None,
        )
        .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    std::fs::create_dir_all(dirs.ws.path().join(".cadre")).expect("dir");
    std::fs::write(
        dirs.ws.path().join(".cadre/config.toml"),
        "posture = \"auto\"\n",
    )
    .expect("project config");
    let script = dirs.data.path().join("hello.toml");
    std::fs::write(&script, HELLO).expect("script");
    let exec = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["exec".into()];
        args.extend(dirs.flags());
        args.extend(["--script".into(), s(&script).into()]);
        args.extend(["--output-format".into(), "stream-json".into()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let turns = |out: &crate::support::cli::Output| -> Vec<u64> {
        of_type(&events(out), "turn.started")
            .iter()
            .map(|e| e["turn_id"].as_u64().expect("turn id"))
            .collect()
    };

    let first = run(
        &strs(&exec(&["--mode", "plan", "--posture", "bypass", "one"])),
        &[],
        None,
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(turns(&first), [1]);

    let data = s(dirs.data.path());
    let show = run(
        &["sessions", "show", "latest", "--data-dir", data],
        &[],
        None,
    )
    .await;
    assert_eq!(show.code, 0, "{}", show.stderr);
    for line in [
        "mode       plan (a resume keeps it",
        "posture    bypass (a resume keeps it",
        "turns      1 finished; the next is turn 2",
    ] {
        assert!(show.stdout.contains(line), "{line}\n{}", show.stdout);
    }

    for (prompt, turn) in [("two", 2), ("three", 3)] {
        let out = run(&strs(&exec(&["--resume", "latest", prompt])), &[], None).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let all = events(&out);
        let started: &Value = &all[0];
        // What `sessions show` said is what the resume uses.
        assert_eq!(
            (
                &started["mode"],
                &started["posture"],
                &started["mode_source"]
            ),
            (
                &Value::from("plan"),
                &Value::from("bypass"),
                &Value::from("resumed")
            )
        );
        assert_eq!(turns(&out), [turn], "{prompt}");
        assert_eq!(of_type(&all, "session.stopped")[0]["turns"], turn);
    }

    // The shell on the resumed session counts every turn it has had.
    let id = show
        .stdout
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("the session id")
        .to_string();
    let mut shell = start_in(
        (dirs.ws, dirs.data, dirs.config),
        HELLO,
        &["--resume", &id],
        &[],
    );
    shell.pty.send_line("Say four").expect("send");
    expect(&mut shell.pty, "turn 4 completed");
    shell.pty.send_line("/quit").expect("send");
    expect(&mut shell.pty, "session stopped after 4 turns");
    exits_0(&mut shell.pty);
}

/// Session ids are time-ordered: two made within a second share their
/// first dozen characters. `sessions list` shows each by the prefix that
/// names it alone, which every command takes, and an ambiguous prefix is
/// answered with the prefixes to choose from.
#[tokio::test]
async fn sessions_list_shows_prefixes_that_distinguish_and_they_resume() {
    let dirs = Dirs::new();
    let script = dirs.data.path().join("hello.toml");
    std::fs::write(&script, HELLO).expect("script");
    let mut ids = Vec::new();
    for prompt in ["one", "two"] {
        let mut args: Vec<String> = vec!["exec".into()];
        args.extend(dirs.flags());
        args.extend(["--script".into(), s(&script).into()]);
        args.extend([
            "--output-format".into(),
            "stream-json".into(),
            prompt.into(),
        ]);
        let out = run(&strs(&args), &[], None).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let started = of_type(&events(&out), "session.started")[0].clone();
        ids.push(started["session_id"].as_str().expect("id").to_string());
    }
    let data = s(dirs.data.path());
    let list = run(&["sessions", "list", "--data-dir", data], &[], None).await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    let shown: Vec<&str> = list
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(shown.len(), 2, "{}", list.stdout);
    assert_ne!(shown[0], shown[1]);
    // The newest first; each a prefix of its own id, and enough to name it.
    for (short, id) in shown.iter().zip(ids.iter().rev()) {
        assert!(id.starts_with(short) && short.len() >= 8, "{short} {id}");
        let show = run(&["sessions", "show", short, "--data-dir", data], &[], None).await;
        assert_eq!(show.code, 0, "{}", show.stderr);
        assert!(show.stdout.starts_with(&format!("session    {id}")));
    }
    // The prefix both share is ambiguous, and the answer says what to give.
    let common: String = ids[0]
        .chars()
        .zip(ids[1].chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let ambiguous = run(
        &["sessions", "show", &common, "--data-dir", data],
        &[],
        None,
    )
    .await;
    assert_eq!(ambiguous.code, 2, "{}", ambiguous.stderr);
    assert!(
        ambiguous
            .stderr
            .contains(&format!("give one of {}, {}", shown[0], shown[1])),
        "{}",
        ambiguous.stderr
    );
}
