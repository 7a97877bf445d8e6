//! The store's thread against real SQLite files: typed requests, leases
//! between two stores (two processes' worth), and a failed write that
//! no later request hides.

use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::message::Message;
use cadre_runtime::permission::Posture;
use cadre_runtime::store::{ModeIntent, Store, StoreError, store_path};

use super::{SessionOpen, StoreHandle, StoreRequest};

fn open(id: &str) -> SessionOpen {
    SessionOpen {
        id: id.into(),
        workspace: PathBuf::from("/ws"),
        mode: Mode::Work,
        mode_given: true,
        posture: Posture::Suggest,
        posture_given: true,
        lease: true,
        agent: None,
        first: None,
    }
}

async fn actor(dir: &std::path::Path) -> StoreHandle {
    let store = Store::open(&store_path(dir)).expect("open");
    StoreHandle::start(store).await.expect("actor").0
}

#[tokio::test]
async fn a_second_store_cannot_open_a_session_the_first_holds() {
    let dir = tempfile::tempdir().expect("dir");
    let first = actor(dir.path()).await;
    let second = actor(dir.path()).await;
    let opened = first
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("first");
    assert!(!opened.resumed);
    let refused = second
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect_err("leased");
    assert!(matches!(refused, StoreError::Leased { .. }), "{refused:?}");
    first
        .ask(|reply| StoreRequest::ReleaseLease {
            session_id: "s1".into(),
            reply,
        })
        .await
        .expect("release");
    let reopened = second
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("free");
    assert!(reopened.resumed);
}

#[tokio::test]
async fn a_failed_append_fails_every_later_request() {
    let dir = tempfile::tempdir().expect("dir");
    let mut store = Store::open(&store_path(dir.path())).expect("open");
    store.limit_size(64 * 1024).expect("limit");
    let (handle, _) = StoreHandle::start(store).await.expect("actor");
    handle
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("open");
    let (_, admitted) = handle
        .ask(|reply| StoreRequest::Admit {
            session_id: "s1".into(),
            content: "hello".into(),
            intent: None::<ModeIntent>,
            key: "k1".into(),
            plan_file: PathBuf::from("/nowhere/plan.md"),
            start_seq: Some(0),
            reply,
        })
        .await
        .expect("admit");
    // More than the store may hold, buffered as a turn's records are.
    let big = Arc::new(Message::user("x".repeat(256 * 1024)));
    handle.append(&Arc::from("s1"), vec![(1, big)], Vec::new(), Vec::new());
    let finished = handle
        .ask(|reply| StoreRequest::FinishTurn {
            session_id: "s1".into(),
            queue_id: admitted.id,
            reply,
        })
        .await;
    assert!(
        matches!(finished, Err(StoreError::WriteFailed { .. })),
        "{finished:?}"
    );
    let later = handle
        .ask(|reply| StoreRequest::Pending {
            session_id: "s1".into(),
            reply,
        })
        .await;
    assert!(
        matches!(later, Err(StoreError::WriteFailed { .. })),
        "{later:?}"
    );
}

#[tokio::test]
async fn a_new_agents_first_message_is_admitted_and_started_with_its_opening() {
    let dir = tempfile::tempdir().expect("dir");
    let handle = actor(dir.path()).await;
    let with_first = |key: &str| SessionOpen {
        first: Some(super::FirstMessage {
            content: "hello".into(),
            key: key.into(),
        }),
        ..open("s1")
    };
    let opened = handle
        .ask(|reply| StoreRequest::Open(with_first("k1"), reply))
        .await
        .expect("open");
    let admitted = opened.first.expect("admitted with the opening");
    // Its turn started: the message is running and the conversation's first.
    let pending = handle
        .ask(|reply| StoreRequest::Pending {
            session_id: "s1".into(),
            reply,
        })
        .await
        .expect("pending");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].id, admitted.id);
    assert!(pending[0].interrupted, "stored as running: {pending:?}");
    let conversation = handle
        .ask(|reply| StoreRequest::Conversation {
            session_id: "s1".into(),
            reply,
        })
        .await
        .expect("conversation");
    assert_eq!(conversation, vec![Message::user("hello")]);
    handle
        .ask(|reply| StoreRequest::ReleaseLease {
            session_id: "s1".into(),
            reply,
        })
        .await
        .expect("release");
    // Reopened (a resume), the message is not admitted again: the
    // interrupted one carries on instead.
    let reopened = handle
        .ask(|reply| StoreRequest::Open(with_first("k2"), reply))
        .await
        .expect("reopen");
    assert!(reopened.resumed && reopened.first.is_none(), "{reopened:?}");
    assert_eq!(reopened.pending.len(), 1, "{:?}", reopened.pending);
    assert_eq!(
        reopened.conversation.view(),
        [std::sync::Arc::new(Message::user("hello"))]
    );
    assert_eq!(reopened.conversation.stored(), 1);
}

/// The conversation as another connection to the file reads it.
fn stored_conversation(dir: &std::path::Path, session: &str) -> Vec<Message> {
    Store::open(&store_path(dir))
        .expect("reopen")
        .conversation(session)
        .expect("conversation")
}

#[tokio::test]
async fn buffered_appends_are_written_within_the_flush_window_with_no_request_after_them() {
    let dir = tempfile::tempdir().expect("dir");
    let handle = actor(dir.path()).await;
    handle
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("open");
    let said = Arc::new(Message::user("buffered"));
    handle.append(&Arc::from("s1"), vec![(0, said)], Vec::new(), Vec::new());
    let waited = std::time::Instant::now();
    while stored_conversation(dir.path(), "s1").is_empty() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(5),
            "never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(
        stored_conversation(dir.path(), "s1"),
        vec![Message::user("buffered")]
    );
}

#[tokio::test]
async fn a_commit_is_answered_only_once_everything_buffered_before_it_is_stored() {
    let dir = tempfile::tempdir().expect("dir");
    let handle = actor(dir.path()).await;
    handle
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("open");
    // Many times over, so a commit that answered before writing (or wrote
    // on the batch's timer only) would be caught inside the 20 ms window.
    for n in 0..20i64 {
        let said = Arc::new(Message::user(format!("call {n}")));
        handle.append(&Arc::from("s1"), vec![(n, said)], Vec::new(), Vec::new());
        handle.commit().await.expect("committed");
        let stored = stored_conversation(dir.path(), "s1");
        assert_eq!(stored.len() as i64, n + 1, "{stored:?}");
        assert_eq!(stored.last(), Some(&Message::user(format!("call {n}"))));
    }
}

#[tokio::test]
async fn closing_writes_what_was_buffered_and_later_requests_find_the_store_closed() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&store_path(dir.path())).expect("open");
    let (handle, thread) = StoreHandle::start(store).await.expect("thread");
    let other = handle.clone();
    handle
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("open");
    let said = Arc::new(Message::user("last words"));
    handle.append(&Arc::from("s1"), vec![(0, said)], Vec::new(), Vec::new());
    handle.close(thread).await;
    assert_eq!(
        stored_conversation(dir.path(), "s1"),
        vec![Message::user("last words")]
    );
    let later = other
        .ask(|reply| StoreRequest::Pending {
            session_id: "s1".into(),
            reply,
        })
        .await
        .expect_err("closed");
    assert!(later.to_string().contains("closed"), "{later}");
}

#[tokio::test]
async fn when_every_handle_is_dropped_the_thread_writes_what_was_buffered_and_ends() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&store_path(dir.path())).expect("open");
    let (handle, thread) = StoreHandle::start(store).await.expect("thread");
    handle
        .ask(|reply| StoreRequest::Open(open("s1"), reply))
        .await
        .expect("open");
    let said = Arc::new(Message::user("left behind"));
    handle.append(&Arc::from("s1"), vec![(0, said)], Vec::new(), Vec::new());
    drop(handle);
    thread.0.join().expect("the thread ends");
    assert_eq!(
        stored_conversation(dir.path(), "s1"),
        vec![Message::user("left behind")]
    );
}

/// Opens `n` agents at once, each with its first message (requests that
/// wait for company while the store is crowded), on `handle`.
async fn open_many(
    handle: &StoreHandle,
    n: usize,
    tag: &str,
) -> Vec<(String, Result<super::Opened, StoreError>)> {
    let opens = (0..n).map(|i| {
        let id = format!("{tag}{i}");
        let request = SessionOpen {
            first: Some(super::FirstMessage {
                content: format!("task {i}"),
                key: format!("{id}-k"),
            }),
            ..open(&id)
        };
        async move {
            let opened = handle.ask(|reply| StoreRequest::Open(request, reply)).await;
            (id, opened)
        }
    });
    futures::future::join_all(opens).await
}

#[tokio::test]
async fn agents_committing_at_once_are_all_answered_and_stored_and_a_close_mid_wait_loses_none() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&store_path(dir.path())).expect("open");
    let (handle, thread) = StoreHandle::start(store).await.expect("thread");
    let within = std::time::Duration::from_secs(20);
    // Crowded from the first wave on: every agent's opening and turn end
    // is answered, and stored before it is.
    for wave in 0..3 {
        let tag = format!("w{wave}-");
        let opened = tokio::time::timeout(within, open_many(&handle, 40, &tag))
            .await
            .expect("every opening answered");
        let finishes = opened.into_iter().map(|(id, opened)| {
            let admitted = opened.expect("opened").first.expect("admitted");
            let handle = handle.clone();
            async move {
                handle
                    .ask(|reply| StoreRequest::FinishTurn {
                        session_id: id.clone(),
                        queue_id: admitted.id,
                        reply,
                    })
                    .await
                    .expect("finished");
                id
            }
        });
        let finished = tokio::time::timeout(within, futures::future::join_all(finishes))
            .await
            .expect("every turn end answered");
        let store = Store::open(&store_path(dir.path())).expect("reopen");
        for (i, id) in finished.iter().enumerate() {
            assert_eq!(
                store.conversation(id).expect("conversation"),
                vec![Message::user(format!("task {i}"))],
                "{id}"
            );
            assert!(
                store.pending(id).expect("pending").is_empty(),
                "{id} is done"
            );
        }
    }
    // Closed while openings wait for company: each is either stored and
    // answered, or refused; none is left unanswered.
    let closing = handle.clone();
    let (opened, ()) = tokio::time::timeout(
        within,
        futures::future::join(open_many(&handle, 40, "late-"), async move {
            tokio::task::yield_now().await;
            closing.close(thread).await;
        }),
    )
    .await
    .expect("every late opening answered");
    let store = Store::open(&store_path(dir.path())).expect("reopen");
    for (id, opened) in opened {
        match opened {
            Ok(_) => assert_eq!(
                store.conversation(&id).expect("conversation").len(),
                1,
                "{id}"
            ),
            Err(err) => assert!(err.to_string().contains("closed"), "{id}: {err}"),
        }
    }
}
