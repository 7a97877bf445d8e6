//! The store against real SQLite files in temporary directories.

use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::*;
use crate::message::Message;
use crate::permission::Posture;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::TempDir::new().expect("dir");
    let store = Store::open(&store_path(dir.path())).expect("open");
    (dir, store)
}

fn session(store: &mut Store, id: &str, workspace: &str) {
    store
        .create_session(&NewSession {
            id,
            workspace: Path::new(workspace),
            mode: Mode::Work,
            posture: Posture::Suggest,
        })
        .expect("create");
}

fn admit(store: &mut Store, session: &str, text: &str, key: &str) -> Admitted {
    store
        .admit(&Admission {
            session_id: session,
            content: text,
            source: Source::User,
            intent: None,
            idempotency_key: key,
            front: false,
            plan_sha256: None,
        })
        .expect("admit")
}

fn pending_texts(store: &Store, session: &str) -> Vec<String> {
    store
        .pending(session)
        .expect("pending")
        .into_iter()
        .map(|m| m.content)
        .collect()
}

#[test]
fn the_same_idempotency_key_admits_one_message() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    let first = admit(&mut store, "s1", "hello", "k1");
    let again = admit(&mut store, "s1", "hello", "k1");
    assert!(first.new && !again.new);
    assert_eq!(first.id, again.id);
    admit(&mut store, "s1", "second", "k2");
    assert_eq!(pending_texts(&store, "s1"), ["hello", "second"]);
}

#[test]
fn a_mode_intent_takes_effect_with_its_admission() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    store
        .admit(&Admission {
            session_id: "s1",
            content: "plan this",
            source: Source::User,
            intent: Some(ModeIntent::PlanEntry),
            idempotency_key: "k1",
            front: false,
            plan_sha256: None,
        })
        .expect("admit");
    assert_eq!(
        store.session("s1").expect("read").expect("session").mode,
        Mode::Plan
    );
}

#[test]
fn an_interrupted_turn_comes_first_and_done_messages_never_come_back() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    let a = admit(&mut store, "s1", "a", "ka");
    admit(&mut store, "s1", "b", "kb");
    store
        .start_turn("s1", a.id, Some((0, &Message::user("a"))))
        .expect("start");
    let pending = store.pending("s1").expect("pending");
    assert_eq!(
        pending
            .iter()
            .map(|m| (m.content.as_str(), m.interrupted))
            .collect::<Vec<_>>(),
        [("a", true), ("b", false)]
    );
    store.finish_turn("s1", a.id).expect("finish");
    assert_eq!(pending_texts(&store, "s1"), ["b"]);
    assert_eq!(
        store.conversation("s1").expect("conversation"),
        [Message::user("a")]
    );
}

fn open_plan(store: &mut Store, id: &str) {
    store
        .open_questionnaire(&NewQuestionnaire {
            id,
            session_id: "s1",
            kind: QuestionnaireKind::PlanApproval,
            plan_path: "/data/plan.md",
            snapshot: "## Summary\n\nDo it.\n",
            sha256: "abc",
            truncated: false,
        })
        .expect("open");
}

#[test]
fn approving_twice_enqueues_one_implementation_message_at_the_front() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    store.set_mode("s1", Mode::Plan).expect("plan");
    admit(&mut store, "s1", "later", "k-later");
    open_plan(&mut store, "q1");
    let first = store
        .answer("s1", "q1", &QuestionnaireAnswer::Approve)
        .expect("approve");
    let second = store
        .answer("s1", "q1", &QuestionnaireAnswer::Approve)
        .expect("again");
    assert!(first.new && !second.new);
    assert_eq!(first.mode, Mode::Work);
    let pending = store.pending("s1").expect("pending");
    assert_eq!(pending.len(), 2);
    assert!(pending[0].content.starts_with(IMPLEMENT_INSTRUCTION));
    assert!(pending[0].content.ends_with("## Summary\n\nDo it.\n"));
    assert_eq!(pending[0].source, Source::Questionnaire);
    assert_eq!(pending[0].plan_sha256.as_deref(), Some("abc"));
    assert_eq!(pending[1].content, "later");
    let refused = store
        .answer("s1", "q1", &QuestionnaireAnswer::Withdraw)
        .expect_err("answered");
    assert!(
        refused.to_string().contains("already answered (approved)"),
        "{refused}"
    );
}

#[test]
fn defer_revise_and_withdraw_do_what_they_say() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    store.set_mode("s1", Mode::Plan).expect("plan");
    open_plan(&mut store, "q1");
    let deferred = store
        .answer("s1", "q1", &QuestionnaireAnswer::Defer)
        .expect("defer");
    assert_eq!((deferred.mode, deferred.admitted), (Mode::Plan, None));

    open_plan(&mut store, "q2");
    let refused = store
        .open_questionnaire(&NewQuestionnaire {
            id: "q3",
            session_id: "s1",
            kind: QuestionnaireKind::PlanApproval,
            plan_path: "/p",
            snapshot: "s",
            sha256: "x",
            truncated: false,
        })
        .expect_err("one at a time");
    assert!(
        refused.to_string().contains("q2 is still waiting"),
        "{refused}"
    );
    let revised = store
        .answer(
            "s1",
            "q2",
            &QuestionnaireAnswer::Revise {
                feedback: "cover errors".into(),
            },
        )
        .expect("revise");
    assert_eq!(revised.mode, Mode::Plan);
    assert!(pending_texts(&store, "s1")[0].contains("cover errors"));

    open_plan(&mut store, "q4");
    let withdrawn = store
        .answer("s1", "q4", &QuestionnaireAnswer::Withdraw)
        .expect("withdraw");
    assert_eq!((withdrawn.mode, withdrawn.admitted), (Mode::Work, None));
    assert!(store.pending_questionnaire("s1").expect("read").is_none());
}

#[test]
fn sessions_resolve_by_id_prefix_and_latest_and_fork_records_the_parent() {
    let (_dir, mut store) = store();
    session(&mut store, "abc-111", "/ws/one");
    session(&mut store, "abd-222", "/ws/two");
    session(&mut store, "xyz-333", "/ws/one");
    admit(&mut store, "abc-111", "the newest activity", "k");
    assert_eq!(store.resolve("xyz-333", None).expect("exact").id, "xyz-333");
    assert_eq!(store.resolve("abd", None).expect("prefix").id, "abd-222");
    let ambiguous = store.resolve("ab", None).expect_err("ambiguous");
    assert!(
        ambiguous.to_string().contains("matches several sessions"),
        "{ambiguous}"
    );
    assert!(store.resolve("nope", None).is_err());
    assert_eq!(store.resolve("latest", None).expect("latest").id, "abc-111");
    assert_eq!(
        store
            .resolve("latest", Some(Path::new("/ws/two")))
            .expect("latest here")
            .id,
        "abd-222"
    );

    store
        .append(
            "abc-111",
            &[
                (0, Arc::new(Message::user("hi"))),
                (
                    1,
                    Arc::new(Message::Assistant {
                        content: "hello".into(),
                        tool_calls: Vec::new(),
                    }),
                ),
            ],
            &[],
            &[],
        )
        .expect("append");
    let fork = store.fork("abc", "fork-1").expect("fork");
    assert_eq!(fork.parent_id.as_deref(), Some("abc-111"));
    assert_eq!(store.conversation("fork-1").expect("conversation").len(), 2);
    assert!(
        store.pending("fork-1").expect("pending").is_empty(),
        "the queue is not copied"
    );
}

#[test]
fn a_store_from_a_newer_cadre_is_refused_with_a_clear_message() {
    let dir = tempfile::TempDir::new().expect("dir");
    let path = store_path(dir.path());
    drop(Store::open(&path).expect("create"));
    let raw = rusqlite::Connection::open(&path).expect("raw");
    raw.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("bump");
    drop(raw);
    let refused = Store::open(&path).expect_err("too new");
    assert!(
        refused
            .to_string()
            .contains(&format!("store version {}", SCHEMA_VERSION + 1))
            && refused.to_string().contains("upgrade cadre"),
        "{refused}"
    );
}

#[test]
fn a_corrupt_store_file_is_an_error_not_a_panic() {
    let dir = tempfile::TempDir::new().expect("dir");
    let path = store_path(dir.path());
    std::fs::write(
        &path,
        b"this is not a database, it only sits where one should be".repeat(100),
    )
    .expect("write");
    let refused = Store::open(&path).expect_err("corrupt");
    let text = refused.to_string();
    assert!(
        text.contains("cannot be used as a cadre store") && text.contains("cadre.db"),
        "{text}"
    );
}
