//! The exactly-once rule (ST2, P6): a side-effecting call and its decision
//! are committed before it starts, and a resume tells the model that a call
//! the killed process left unanswered may have run, instead of running it
//! again.

use std::path::Path;
use std::time::{Duration, Instant};

use cadre::runtime::Message;
use cadre::runtime::store::{Store, store_path};

use crate::command_line::{Dirs, run, s, strs};
use crate::support::cli::spawn_cadre;

/// The first run's model: one `bash` call that leaves a mark, then waits
/// long enough to be killed mid-call (the sleep outlives the killed cadre
/// for a few seconds, and writes nothing more).
const CALLS: &str = r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "bash"
arguments = { command = "echo ran >> effects.txt; sleep 5" }

[[response]]
iteration = 2
text = "done"
"#;

/// The resumed run's model: it only answers.
const CHECKS: &str = r#"
[[response]]
repeat = true
text = "checked"
"#;

/// Waits until `path` holds a whole line; the process is running the call
/// by then. Bounded: a call that never starts fails the test.
async fn first_line(path: &Path) {
    let deadline = Instant::now() + crate::support::PATIENCE;
    loop {
        if std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n')) {
            return;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The stored conversation of the one session under `data`.
fn conversation(data: &Path) -> Vec<Message> {
    let store = Store::open(&store_path(data)).expect("the store");
    let sessions = store.list(10).expect("sessions");
    assert_eq!(sessions.len(), 1, "one session");
    store.conversation(&sessions[0].id).expect("conversation")
}

#[tokio::test]
async fn a_side_effect_killed_right_after_it_started_is_stored_and_never_run_again_by_a_resume() {
    for delay_ms in [0u64, 0, 0, 1, 2, 5, 10, 40] {
        let dirs = Dirs::new();
        let (calls, checks) = (
            dirs.data.path().join("calls.toml"),
            dirs.data.path().join("checks.toml"),
        );
        std::fs::write(&calls, CALLS).expect("script");
        std::fs::write(&checks, CHECKS).expect("script");
        // No snapshot before the call: its git work would give the batched
        // appends time to be written anyway, and hide a missing wait.
        std::fs::write(
            dirs.config.path().join("config.toml"),
            "[snapshots]\nenabled = false\n",
        )
        .expect("user config");
        let mut args: Vec<String> = vec!["exec".into()];
        args.extend(dirs.flags());
        args.extend(["--posture".into(), "full-access".into()]);
        args.extend(["--output-format".into(), "stream-json".into()]);
        let mut first = args.clone();
        first.extend(["--script".into(), s(&calls).into(), "leave a mark".into()]);
        let mut cadre = spawn_cadre(&strs(&first));
        first_line(&dirs.ws.path().join("effects.txt")).await;
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        cadre.start_kill().expect("kill -9");
        let _ = cadre.wait().await;

        // The call and its decision were stored before the command started.
        let data = s(dirs.data.path());
        let audit = run(
            &["sessions", "audit", "latest", "--data-dir", data],
            &[],
            None,
        )
        .await;
        assert_eq!(audit.code, 0, "{}", audit.stderr);
        assert!(
            audit.stdout.contains("bash") && audit.stdout.contains("allow"),
            "after {delay_ms} ms: no audit row of the call:\n{}",
            audit.stdout
        );
        let call_id = conversation(dirs.data.path())
            .iter()
            .find_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|c| c.name == "bash")
                    .map(|c| c.id.clone()),
                Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
            })
            .unwrap_or_else(|| panic!("after {delay_ms} ms: the call was not stored"));

        // The resume answers the call as interrupted and does not run it.
        let mut resume = args.clone();
        resume.extend([
            "--script".into(),
            s(&checks).into(),
            "--resume".into(),
            "latest".into(),
        ]);
        let out = run(&strs(&resume), &[], None).await;
        assert_eq!(out.code, 0, "after {delay_ms} ms: {}", out.stderr);
        let effects = std::fs::read_to_string(dirs.ws.path().join("effects.txt")).expect("effects");
        assert_eq!(
            effects, "ran\n",
            "after {delay_ms} ms: the command ran again"
        );
        let answers: Vec<String> = conversation(dirs.data.path())
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    call_id: id,
                    content,
                } if *id == call_id => Some(content.clone()),
                Message::User { .. }
                | Message::Assistant { .. }
                | Message::Tool { .. }
                | Message::Compaction(_) => None,
            })
            .collect();
        assert_eq!(answers.len(), 1, "after {delay_ms} ms: {answers:?}");
        assert!(
            answers[0].starts_with("interrupted: this call may have run before cadre stopped"),
            "after {delay_ms} ms: {answers:?}"
        );
        assert!(
            out.stdout.contains("\"checked\""),
            "the model answered after the interrupted call:\n{}",
            out.stdout
        );
    }
}
