use std::os::unix::process::CommandExt;
use std::process::Command;

use pretty_assertions::assert_eq;

use super::*;
use crate::process::reap::proc_info;

fn record(key: &str, pid: u32, host_started: i64) -> ProcessRecord {
    let me = proc_info(std::process::id()).expect("this process");
    ProcessRecord {
        key: key.into(),
        session_id: "s".into(),
        owner: "s".into(),
        command: "sleep 60".into(),
        pid,
        started: proc_info(pid).map_or(0, |p| p.started),
        host_pid: me.pid,
        host_started,
    }
}

#[test]
fn a_dead_cadres_processes_are_killed_and_a_live_ones_stay() {
    let mut store = Store::open_in_memory().expect("store");
    let mut orphan = Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let mut kept = Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let me = proc_info(std::process::id()).expect("me");
    // The orphan's cadre "started" at another time: a reused pid, gone.
    store
        .record_process(&record("orphan", orphan.id(), me.started + 1))
        .expect("recorded");
    store
        .record_process(&record("kept", kept.id(), me.started))
        .expect("recorded");
    let reaped = store.reap_orphan_processes().expect("reaped");
    assert_eq!(
        reaped.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["orphan"]
    );
    let status = orphan.wait().expect("waits");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        store
            .processes()
            .expect("rows")
            .iter()
            .map(|r| r.key.as_str())
            .collect::<Vec<_>>(),
        ["kept"]
    );
    assert!(
        kept.try_wait().expect("status").is_none(),
        "a live cadre's process runs on"
    );
    store.forget_process("kept").expect("forgotten");
    assert_eq!(store.processes().expect("rows"), Vec::new());
    kept.kill().expect("kill");
    kept.wait().expect("waits");
}
