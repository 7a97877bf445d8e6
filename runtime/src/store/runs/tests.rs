use super::*;

fn new_run<'a>(id: &'a str, ws: &'a std::path::Path) -> NewRun<'a> {
    NewRun {
        id,
        caller_id: None,
        name: "wf",
        file: Some("wf.toml"),
        source: "[workflow]\nname = \"wf\"\n",
        settings: "{}",
        workspace: ws,
        mode: Mode::Work,
        posture: Posture::Auto,
    }
}

fn instance(step: &str, index: i64, state: &str) -> InstanceRecord {
    InstanceRecord {
        step: step.into(),
        index,
        item: None,
        key: Some(format!("k-{step}-{index}")),
        state: state.parse().expect("a state"),
        agent_id: None,
        output: Some("out".into()),
        reason: None,
        attempts: 1,
        tokens: 7,
    }
}

#[test]
fn runs_and_instances_are_stored_read_back_and_leased() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cadre.db");
    let mut store = Store::open(&path).expect("open");
    let me = LeaseOwner::this_process();
    let run = store
        .create_run(&new_run("run-1", dir.path()), &me)
        .expect("created");
    assert_eq!((run.status, run.name.as_str()), (RunStatus::Running, "wf"));
    store
        .record_instances(
            "run-1",
            &[
                (0, instance("a", 0, "dispatched")),
                (1, instance("b", 0, "pending")),
            ],
        )
        .expect("recorded");
    store
        .record_instances("run-1", &[(0, instance("a", 0, "verified"))])
        .expect("updated");
    let rows = store.instances("run-1").expect("instances");
    assert_eq!(
        rows.iter()
            .map(|r| (r.step.as_str(), r.state.as_str()))
            .collect::<Vec<_>>(),
        [("a", "verified"), ("b", "pending")]
    );
    // The run is not a session: sessions lists do not show it.
    assert!(store.list(10).expect("list").is_empty());
    // Another process is refused while this one holds the run.
    let mut other = Store::open(&path).expect("open again");
    let them = LeaseOwner {
        token: "other".into(),
        ..me.clone()
    };
    assert!(matches!(
        other.open_run("run-1", &them),
        Err(StoreError::Leased { .. })
    ));
    store
        .finish_run("run-1", RunStatus::Completed)
        .expect("finished");
    store.release_lease("run-1", &me).expect("released");
    let opened = other.open_run("run-1", &them).expect("resumed");
    assert_eq!(
        (opened.run.status, opened.instances.len(), opened.agents),
        (RunStatus::Running, 2, 0)
    );
    assert_eq!(other.resolve_run("run").expect("prefix").id, "run-1");
    assert_eq!(other.resolve_run("latest").expect("latest").id, "run-1");
    assert!(other.resolve_run("zzz").is_err());
}

#[test]
fn cancel_requests_are_taken_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(&dir.path().join("cadre.db")).expect("open");
    let me = LeaseOwner::this_process();
    store
        .create_run(&new_run("run-2", dir.path()), &me)
        .expect("created");
    store.request_cancel("run-2", "review[3]").expect("asked");
    store.request_cancel("run-2", "*").expect("asked");
    assert_eq!(
        store.take_cancels("run-2").expect("taken"),
        ["review[3]", "*"]
    );
    assert!(store.take_cancels("run-2").expect("taken").is_empty());
}

#[test]
fn run_statuses_keep_their_stored_and_serialized_words() {
    for (status, word) in [
        (RunStatus::Running, "running"),
        (RunStatus::Completed, "completed"),
        (RunStatus::Failed, "failed"),
        (RunStatus::Cancelled, "cancelled"),
    ] {
        assert_eq!(status.as_str(), word);
        assert_eq!(status.to_string(), word);
        assert_eq!(word.parse::<RunStatus>(), Ok(status));
        assert_eq!(
            serde_json::to_string(&status).expect("serialized"),
            format!("\"{word}\"")
        );
    }
    assert_eq!(format!("{:<9}|", RunStatus::Failed), "failed   |");
    assert_eq!(
        "done".parse::<RunStatus>().map_err(|e| e.to_string()),
        Err(
            "unknown workflow run status \"done\" (expected running, completed, failed or cancelled)"
                .to_string()
        )
    );
}

#[test]
fn a_stored_run_status_reads_back_as_the_word_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(&dir.path().join("cadre.db")).expect("open");
    let me = LeaseOwner::this_process();
    store
        .create_run(&new_run("run-1", dir.path()), &me)
        .expect("created");
    store
        .finish_run("run-1", RunStatus::Cancelled)
        .expect("finished");
    let word: String = store
        .conn
        .query_row(
            "SELECT status FROM workflow_runs WHERE id = 'run-1'",
            [],
            |row| row.get(0),
        )
        .expect("row");
    assert_eq!(word, "cancelled");
    assert_eq!(
        store.find_run("run-1").expect("found").map(|r| r.status),
        Some(RunStatus::Cancelled)
    );
}
