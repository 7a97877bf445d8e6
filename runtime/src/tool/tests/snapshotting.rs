//! The runner's snapshot hook: asked before every call that may change the
//! workspace, never before a read-only one or one that touches only the
//! agent's own state, and a call whose snapshot fails does not run.

use std::sync::Mutex;

use pretty_assertions::assert_eq;

use super::*;
use crate::snapshot::SnapshotError;

/// Counts the calls it was asked about; fails when told to.
#[derive(Default)]
struct Counting {
    asked: Mutex<u32>,
    fail: bool,
}

impl Snapshotter for Counting {
    fn before_change(&self) -> SnapshotFuture<'_> {
        Box::pin(async move {
            *self.asked.lock().unwrap() += 1;
            if self.fail {
                return Err(SnapshotError::Task("disk full".into()));
            }
            Ok(())
        })
    }
}

/// Runs `name` with `args` in Work under a hook; returns how often it was
/// asked and whether the call succeeded.
async fn check(name: &str, args: Value, expected: (u32, bool)) {
    let mut env = Env::new(Mode::Work);
    env.seed("a.txt", "a");
    let hook = Arc::new(Counting::default());
    env.ctx.snapshots = Some(hook.clone());
    let outcome = env.call(name, args.clone()).await;
    let asked = *hook.asked.lock().unwrap();
    assert_eq!((asked, outcome.is_ok()), expected, "{name} {args}");
}

#[tokio::test]
async fn the_hook_runs_before_calls_that_may_change_the_workspace() {
    check("read_file", json!({"path": "a.txt"}), (0, true)).await;
    check("list_dir", json!({}), (0, true)).await;
    check(
        "write_file",
        json!({"path": "b.txt", "content": "x"}),
        (1, true),
    )
    .await;
    check(
        "edit_file",
        json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
        (1, true),
    )
    .await;
    check("bash", json!({"command": "touch c.txt"}), (1, true)).await;
    // A command proven read-only changes nothing.
    check("bash", json!({"command": "ls"}), (0, true)).await;
    check("todo_write", json!({"todos": []}), (0, true)).await;
    // A call refused before it may run is not recorded for.
    check(
        "write_file",
        json!({"path": "b.txt", "content": 5}),
        (0, false),
    )
    .await;
}

#[tokio::test]
async fn a_call_whose_snapshot_fails_does_not_run() {
    let mut env = Env::new(Mode::Work);
    env.ctx.snapshots = Some(Arc::new(Counting {
        fail: true,
        ..Counting::default()
    }));
    let outcome = env
        .call("write_file", json!({"path": "b.txt", "content": "x"}))
        .await;
    let err = outcome.expect_err("refused");
    assert_eq!(err.code, ErrorCode::Failed);
    assert!(
        err.message.contains("could not be recorded"),
        "{}",
        err.message
    );
    assert_eq!(env.read("b.txt"), None);
}
