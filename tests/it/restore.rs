//! Workspace snapshots through a session: one before a turn's first call
//! that may change files, none for a turn that only reads, and a restore
//! that brings the exact tree back, leaves ignored files and `.git` alone,
//! keeps the conversation, and is refused while a turn runs.

use cadre::runtime::protocol::{Event, Op};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::mock::{MockServer, Reply, chunk, sse_body, text_chunks, tool_call_chunks};
use crate::support::{SessionBuilder, TestSession, tree};

fn seed(session: &TestSession) {
    let ws = session.workspace_path();
    for (path, text) in [
        (".gitignore", "*.log\n"),
        ("a.txt", "original a\n"),
        ("gone.txt", "to be deleted\n"),
        ("src/lib.rs", "pub fn f() {}\n"),
        ("build.log", "ignored\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/config", "[core]\n"),
    ] {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }
}

/// One turn whose model makes `calls` (ids `<tag><n>`) and then answers.
async fn turn_with(
    session: &mut TestSession,
    mock: &MockServer,
    tag: &str,
    calls: &[(&str, Value)],
) {
    let mut replies: Vec<Reply> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| Reply::sse(&tool_call_chunks(&format!("{tag}{i}"), name, args)))
        .collect();
    replies.push(Reply::sse(&text_chunks("done")));
    mock.push(replies);
    let events = session.turn("work").await;
    assert!(
        matches!(events.last(), Some(Event::TurnCompleted { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_restore_brings_back_the_tree_a_turn_changed_and_keeps_the_conversation() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).snapshots().start().await;
    seed(&session);
    let ws = session.workspace_path();
    let before = tree(&ws);
    let git_before = tree(&ws.join(".git"));
    let snapshots = session.snapshots.clone().expect("snapshots");

    // A turn that only reads records nothing.
    turn_with(
        &mut session,
        &mock,
        "r",
        &[("read_file", json!({"path": "a.txt"}))],
    )
    .await;
    assert_eq!(
        snapshots.list(Some(&session.session_id)).expect("list"),
        vec![]
    );

    turn_with(
        &mut session,
        &mock,
        "w",
        &[
            ("read_file", json!({"path": "a.txt"})),
            ("write_file", json!({"path": "a.txt", "content": "edited"})),
            (
                "write_file",
                json!({"path": "new/b.txt", "content": "created"}),
            ),
            ("bash", json!({"command": "rm gone.txt"})),
        ],
    )
    .await;
    std::fs::write(ws.join("build.log"), "ignored, changed after").expect("log");
    let listed = snapshots.list(Some(&session.session_id)).expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].mark.turn, Some(2));
    assert_eq!(listed[0].changed_since, 3);

    let conversation = session
        .handle()
        .snapshot()
        .await
        .expect("state")
        .conversation;
    session.submit(Op::Restore {
        snapshot: listed[0].id[..10].to_string(),
        dry_run: false,
    });
    let events = session
        .events_until(|e| {
            matches!(
                e,
                Event::WorkspaceRestored { .. } | Event::OpRejected { .. }
            )
        })
        .await;
    let Some(Event::WorkspaceRestored {
        snapshot,
        before: undo,
        restored,
        recreated,
        removed,
        skipped,
        dry_run,
    }) = events.last()
    else {
        panic!("{events:?}");
    };
    assert_eq!(snapshot, &listed[0].id);
    assert!(undo.is_some() && !dry_run);
    assert_eq!(
        (restored, recreated, removed, skipped),
        (
            &vec!["a.txt".to_string()],
            &vec!["gone.txt".to_string()],
            &vec!["new/b.txt".to_string()],
            &vec![]
        )
    );
    let mut expected = before;
    for (path, bytes) in expected.iter_mut() {
        if path.ends_with("build.log") {
            *bytes = b"ignored, changed after".to_vec();
        }
    }
    assert_eq!(tree(&ws), expected);
    assert_eq!(tree(&ws.join(".git")), git_before);
    let after = session
        .handle()
        .snapshot()
        .await
        .expect("state")
        .conversation;
    assert_eq!(
        after[..conversation.len()],
        conversation[..],
        "the conversation is not rewritten"
    );
    // A note after it tells the model at its next turn.
    let note: Vec<&cadre::runtime::message::Message> = after[conversation.len()..]
        .iter()
        .map(|m| m.as_ref())
        .collect();
    let [cadre::runtime::message::Message::User { content }] = note[..] else {
        panic!("no note after the conversation: {after:?}");
    };
    for said in [
        "restored to snapshot",
        "read them again",
        "Put back: a.txt",
        "Recreated: gone.txt",
        "Removed: new/b.txt",
    ] {
        assert!(content.contains(said), "{said:?} not in {content}");
    }
    session.shutdown().await;
}

#[tokio::test]
async fn a_restore_is_refused_while_a_turn_runs() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai(&mock.url).snapshots().start().await;
    seed(&session);
    turn_with(
        &mut session,
        &mock,
        "w",
        &[("write_file", json!({"path": "a.txt", "content": "edited"}))],
    )
    .await;
    let snapshots = session.snapshots.clone().expect("snapshots");
    let id = snapshots.list(None).expect("list")[0].id.clone();

    let partial = sse_body(&[chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": "Thinking "}, "finish_reason": null}]),
    )])
    .replace("data: [DONE]\n\n", "");
    mock.push([Reply::HangAfter { body: partial }]);
    session.submit(Op::user("think"));
    session
        .events_until(|e| matches!(e, Event::AssistantDelta { .. }))
        .await;
    session.submit(Op::Restore {
        snapshot: id,
        dry_run: false,
    });
    let events = session
        .events_until(|e| {
            matches!(
                e,
                Event::OpRejected { .. } | Event::WorkspaceRestored { .. }
            )
        })
        .await;
    let Some(Event::OpRejected { op, message, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(op, "restore");
    assert!(message.contains("a turn is running"), "{message}");
    assert_eq!(
        std::fs::read_to_string(session.workspace_path().join("a.txt")).expect("a"),
        "edited"
    );
    session.submit(Op::Cancel);
    session
        .events_until(|e| matches!(e, Event::TurnFailed { .. }))
        .await;
    session.shutdown().await;
}
