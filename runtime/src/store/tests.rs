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
        ambiguous
            .to_string()
            .contains("matches several sessions; give one of abc-111, abd-222"),
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

/// Ids made within the same minute, as session ids are (UUID v7).
#[test]
fn short_ids_distinguish_time_ordered_ids_and_resolve_back() {
    let (_dir, mut store) = store();
    let ids: Vec<String> = (0..40)
        .map(|n| format!("01a2353b-fd0d-7{n:03x}-b9ee-59ecf5bbe82b"))
        .chain(["01a2353c-0000-7000-8000-000000000000".to_string()])
        .collect();
    for id in &ids {
        session(&mut store, id, "/ws");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let short = store.short_ids(&refs).expect("short ids");
    for (id, short) in ids.iter().zip(&short) {
        assert!(id.starts_with(short.as_str()) && short.len() >= SHORT_ID);
        assert_eq!(&store.resolve(short, None).expect("resolves").id, id);
        // One character fewer is ambiguous, unless it is already the least.
        if short.len() > SHORT_ID {
            assert!(store.resolve(&short[..short.len() - 1], None).is_err());
        }
    }
    assert_eq!(short[40], "01a2353c");
    assert_eq!(short[0], "01a2353b-fd0d-7000");
}

#[test]
fn only_a_session_nothing_was_asked_of_is_forgotten() {
    let (_dir, mut store) = store();
    session(&mut store, "empty", "/ws");
    session(&mut store, "asked", "/ws");
    session(&mut store, "forked", "/ws");
    admit(&mut store, "asked", "do something", "k");
    store.fork("forked", "fork-of-it").expect("fork");
    store
        .acquire_lease("empty", &owner("t", std::process::id(), 1))
        .expect("lease");
    assert!(store.forget_if_unused("empty").expect("forget"));
    assert!(store.session("empty").expect("read").is_none());
    // Asked something; the parent of a fork.
    for kept in ["asked", "forked"] {
        assert!(!store.forget_if_unused(kept).expect("forget"), "{kept}");
        assert!(store.session(kept).expect("read").is_some(), "{kept}");
    }
    assert!(!store.forget_if_unused("no-such-session").expect("forget"));
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

fn owner(token: &str, pid: u32, started: i64) -> LeaseOwner {
    LeaseOwner {
        token: token.into(),
        host: LeaseOwner::this_process().host,
        pid,
        started,
    }
}

#[test]
fn a_session_is_run_by_one_process_at_a_time() {
    // Taken by a lookup, or as a session just created: held alike.
    for new in [false, true] {
        let (dir, mut store) = store();
        session(&mut store, "s1", "/ws");
        let me = LeaseOwner::this_process();
        if new {
            store.lease_new("s1", &me).expect("first, new");
        } else {
            store.acquire_lease("s1", &me).expect("first");
        }
        store.acquire_lease("s1", &me).expect("the holder again");
        // A second process on the same store, with the holder alive (this
        // process, under another token): refused, naming the holder.
        let mut other = Store::open(&store_path(dir.path())).expect("open");
        let rival = LeaseOwner {
            token: "rival".into(),
            ..me.clone()
        };
        let refused = other.acquire_lease("s1", &rival).expect_err("leased");
        assert!(matches!(refused, StoreError::Leased { .. }), "{refused:?}");
        assert!(refused.is_retryable());
        assert!(
            refused.to_string().contains(&format!("process {}", me.pid)),
            "{refused}"
        );
        // A session with a lease cannot be leased as new.
        assert!(other.lease_new("s1", &rival).is_err());
        // Released, it is free.
        store.release_lease("s1", &me).expect("release");
        other.acquire_lease("s1", &rival).expect("free now");
    }
}

#[test]
fn a_lease_left_by_a_dead_process_on_this_machine_is_taken_over_at_once() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    // A process that no longer runs: its recorded start time does not match.
    store
        .acquire_lease("s1", &owner("ghost", std::process::id(), -1))
        .expect("ghost");
    store
        .acquire_lease("s1", &LeaseOwner::this_process())
        .expect("the ghost does not hold");
    // A holder on another machine holds until it stops renewing.
    let remote = LeaseOwner {
        host: "elsewhere.invalid".into(),
        ..owner("remote", 1, 1)
    };
    let (_dir2, mut shared) = self::store();
    session(&mut shared, "s2", "/ws");
    shared.acquire_lease("s2", &remote).expect("remote");
    let refused = shared
        .acquire_lease("s2", &LeaseOwner::this_process())
        .expect_err("a fresh remote lease holds");
    assert!(matches!(refused, StoreError::Leased { .. }));
}

#[test]
fn a_store_locked_by_another_process_is_busy_and_retryable() {
    let (dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    // Another connection holds the write lock for the whole attempt.
    let holder = rusqlite::Connection::open(store_path(dir.path())).expect("open");
    holder
        .execute_batch("BEGIN EXCLUSIVE; UPDATE sessions SET title = 'x';")
        .expect("lock");
    store
        .conn
        .busy_timeout(std::time::Duration::from_millis(50))
        .expect("timeout");
    let err = store.set_mode("s1", Mode::Plan).expect_err("locked");
    assert!(matches!(err, StoreError::Busy { .. }), "{err:?}");
    assert!(err.is_retryable());
    holder.execute_batch("ROLLBACK").expect("unlock");
    store.set_mode("s1", Mode::Plan).expect("free again");
}

#[test]
fn sub_agents_are_listed_under_their_parent_and_a_crash_interrupts_the_running_ones() {
    let (_dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    let one: crate::agent::AgentPath = "1".parse().expect("path");
    let two: crate::agent::AgentPath = "2".parse().expect("path");
    for (id, path) in [("s1/1", &one), ("s1/2", &two)] {
        store
            .create_agent(&NewAgent {
                id,
                parent_id: "s1",
                path,
                role: "worker",
                mode: Mode::Plan,
                posture: Posture::Never,
            })
            .expect("agent");
    }
    // The agents' rows are not sessions a user resumes or lists.
    assert_eq!(store.list(10).expect("list").len(), 1);
    assert!(store.resolve("s1/1", None).is_err());
    let report = crate::agent::AgentReport {
        agent_id: "1".into(),
        status: "completed".into(),
        summary: "done".into(),
        ..Default::default()
    };
    store
        .set_agent_state("s1/1", crate::agent::ChildState::Idle, Some(&report))
        .expect("state");
    let queued = admit(&mut store, "s1/2", "work", "k-agent-2");
    store.start_turn("s1/2", queued.id, None).expect("start");
    assert_eq!(store.interrupt_agents("s1").expect("interrupt"), ["s1/2"]);
    let agents = store.agents("s1").expect("agents");
    let states: Vec<(String, crate::agent::ChildState, Option<String>)> = agents
        .iter()
        .map(|a| {
            (
                a.path.to_string(),
                a.state,
                a.report.as_ref().map(|r| r.summary.clone()),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (
                "1".into(),
                crate::agent::ChildState::Idle,
                Some("done".into())
            ),
            ("2".into(), crate::agent::ChildState::Interrupted, None),
        ]
    );
    assert!(
        store.pending("s1/2").expect("pending").is_empty(),
        "nothing re-runs by itself"
    );
    let child = store.session("s1/2").expect("row").expect("exists");
    assert_eq!((child.mode, child.posture), (Mode::Plan, Posture::Never));
}

#[test]
fn a_goal_and_its_continuation_commit_together_and_read_back_after_a_reopen() {
    use crate::goal::{Budgets, Goal, GoalSettings, GoalStatus};
    let dir = tempfile::TempDir::new().expect("dir");
    let path = store_path(dir.path());
    {
        let mut store = Store::open(&path).expect("open");
        session(&mut store, "s1", "/ws");
        assert_eq!(store.goal("s1").expect("goal"), None);
        let mut goal = Goal::new("ship it", Budgets::default(), GoalSettings::default());
        let text = goal.take_continuation();
        let first = store
            .admit_continuation("s1", &goal, &text, "goal:s1:1")
            .expect("admit");
        let again = store
            .admit_continuation("s1", &goal, &text, "goal:s1:1")
            .expect("admit again");
        assert!(first.new && !again.new);
        goal.status = GoalStatus::Paused;
        store.put_goal("s1", &goal).expect("put");
    }
    // Reopened, as after a kill: the goal and one pending continuation.
    let mut store = Store::open(&path).expect("reopen");
    let goal = store.goal("s1").expect("goal").expect("a goal");
    assert_eq!((goal.status, goal.continuations), (GoalStatus::Paused, 1));
    let pending = store.pending("s1").expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].source, Source::Continuation);
    assert!(store.clear_goal("s1").expect("clear"));
    assert!(!store.clear_goal("s1").expect("clear again"));
    assert_eq!(store.goal("s1").expect("goal"), None);
}

#[test]
fn a_version_4_store_moves_its_agents_out_of_the_workspace_index_and_keeps_its_sessions() {
    let dir = tempfile::TempDir::new().expect("dir");
    let path = store_path(dir.path());
    {
        let mut store = Store::open(&path).expect("create");
        session(&mut store, "s1", "/ws");
    }
    // Back to version 4: the index over every row.
    let raw = rusqlite::Connection::open(&path).expect("raw");
    raw.execute_batch(
        "DROP INDEX sessions_by_workspace;
         DROP TABLE launches;
         DROP TABLE processes;
         CREATE INDEX sessions_by_workspace ON sessions(workspace, updated_at);
         INSERT INTO sessions (id, workspace, mode, posture, kind, created_at, updated_at)
             VALUES ('a1', '/ws', 'work', 'never', 'agent', 9e9, 9e9);
         PRAGMA user_version = 4;",
    )
    .expect("version 4");
    drop(raw);
    let store = Store::open(&path).expect("migrated");
    let index: String = store
        .conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'sessions_by_workspace'",
            [],
            |r| r.get(0),
        )
        .expect("index");
    assert!(index.contains("WHERE kind = 'session'"), "{index}");
    // The newer agent row is not taken for the workspace's latest session.
    let latest = store.latest(Some(Path::new("/ws"))).expect("latest");
    assert_eq!(latest.map(|s| s.id), Some("s1".to_string()));
}

#[test]
fn in_a_shared_commit_a_failed_request_is_undone_whole_and_its_neighbours_are_kept() {
    let (dir, mut store) = store();
    session(&mut store, "s1", "/ws");
    let (outcomes, committed) = store
        .together(|s| {
            let kept = s.isolated(|s| Ok(admit(s, "s1", "kept", "k1")));
            // A request whose inner transaction is dropped uncommitted,
            // even though the request itself goes on as if nothing happened.
            let abandoned = s.isolated(|s| {
                admit(s, "s1", "abandoned", "k2");
                let tx = s.begin()?;
                tx.execute("UPDATE sessions SET title = 'half' WHERE id = 's1'", [])?;
                drop(tx);
                Ok(())
            });
            let failed = s.isolated(|s| {
                admit(s, "s1", "failed", "k3");
                Err::<(), _>(StoreError::Conflict("refused".into()))
            });
            let after = s.isolated(|s| Ok(admit(s, "s1", "after", "k4")));
            (kept.is_ok(), abandoned, failed.is_err(), after.is_ok())
        })
        .expect("begin");
    committed.expect("commit");
    let (kept, abandoned, failed, after) = outcomes;
    assert!(kept && failed && after);
    assert!(abandoned.is_err(), "a half-done request reports success");
    drop(store);
    let store = Store::open(&store_path(dir.path())).expect("reopen");
    assert_eq!(pending_texts(&store, "s1"), ["kept", "after"]);
    let title: String = store
        .conn
        .query_row("SELECT title FROM sessions WHERE id = 's1'", [], |r| {
            r.get(0)
        })
        .expect("title");
    assert_ne!(title, "half");
}

#[test]
fn a_new_sessions_first_message_is_stored_as_the_general_path_stores_it() {
    // `start_first` (no lookups) against `admit_and_start` at 0: the same
    // queue, conversation, title and turn count, whatever the text.
    let (_dir, mut store) = store();
    let texts = [
        "short".to_string(),
        "é".repeat(100),
        format!("{}\n{}", "line ".repeat(30), "🙂".repeat(40)),
        String::new(),
    ];
    for (n, text) in texts.iter().enumerate() {
        let (general, fresh) = (format!("general-{n}"), format!("fresh-{n}"));
        let message = Message::user(text.clone());
        for (id, key) in [(&general, format!("kg{n}")), (&fresh, format!("kf{n}"))] {
            session(&mut store, id, "/ws");
            let admission = Admission {
                session_id: id,
                content: text,
                source: Source::User,
                intent: None,
                idempotency_key: &key,
                front: false,
                plan_sha256: None,
            };
            let admitted = if *id == general {
                store.admit_and_start(&admission, 0, &message)
            } else {
                store.start_first(&admission, &message)
            }
            .expect("admitted");
            assert_eq!((admitted.position, admitted.new), (0, true));
        }
        let seen = |id: &str| {
            let pending: Vec<_> = store
                .pending(id)
                .unwrap()
                .into_iter()
                .map(|m| (m.content, m.interrupted, m.source, m.plan_sha256))
                .collect();
            (
                pending,
                store.conversation(id).unwrap(),
                store.session(id).unwrap().unwrap().title,
                store.turns_done(id).unwrap(),
            )
        };
        assert_eq!(seen(&fresh), seen(&general), "text {n}");
        // Its key is taken: the general path finds the admission made.
        let again = store
            .admit(&Admission {
                session_id: &fresh,
                content: text,
                source: Source::User,
                intent: None,
                idempotency_key: &format!("kf{n}"),
                front: false,
                plan_sha256: None,
            })
            .unwrap();
        assert!(!again.new);
    }
}

#[test]
fn a_launch_record_round_trips_is_replaced_and_holds_no_key() {
    use crate::permission::rules::PermissionRules;
    use crate::store::{LaunchRecord, ModelRecord};
    let dir = tempfile::TempDir::new().expect("dir");
    let mut store = Store::open(&store_path(dir.path())).expect("store");
    assert_eq!(store.launch("s1").expect("read"), None);
    let first = LaunchRecord {
        model: ModelRecord::Server {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            stream: true,
            key_env: Some("LOCAL_LLM_KEY".into()),
            provider: Some("local".into()),
            params: crate::model::ModelParams {
                reasoning_effort: Some(crate::model::Effort::High),
                ..Default::default()
            },
        },
        rules: PermissionRules {
            allow: vec!["bash(cargo test:*)".into()],
            ..PermissionRules::default()
        },
    };
    store.record_launch("s1", &first).expect("record");
    assert_eq!(store.launch("s1").expect("read"), Some(first));
    let second = LaunchRecord {
        model: ModelRecord::Script {
            path: "/tmp/s.toml".into(),
        },
        rules: PermissionRules::default(),
    };
    store.record_launch("s1", &second).expect("replace");
    assert_eq!(store.launch("s1").expect("read"), Some(second));
    assert_eq!(store.launch("s2").expect("read"), None);
}
