use pretty_assertions::assert_eq;

use super::*;

fn record(pid: u32, started: i64) -> ProcessRecord {
    ProcessRecord {
        key: "k".into(),
        session_id: "s".into(),
        owner: "s".into(),
        command: "sleep 100".into(),
        pid,
        started,
        host_pid: 10,
        host_started: 5,
    }
}

fn p(pid: u32, pgid: u32, started: i64) -> ProcInfo {
    ProcInfo { pid, pgid, started }
}

fn check(record: &ProcessRecord, processes: &[ProcInfo], expected: &[u32]) {
    assert_eq!(targets(record, processes), expected);
}

#[test]
fn the_group_members_started_since_the_leader_are_targets() {
    let procs = [
        p(100, 100, 50),
        p(101, 100, 51),
        p(102, 7, 52),
        p(103, 100, 49),
    ];
    // 103 started before the leader: a group id reused, not ours.
    check(&record(100, 50), &procs, &[100, 101]);
}

#[test]
fn a_leader_gone_leaves_its_group_members_targets() {
    check(&record(100, 50), &[p(101, 100, 60)], &[101]);
}

#[test]
fn nothing_left_is_nothing_to_kill() {
    check(&record(100, 50), &[p(1, 1, 0), p(200, 200, 70)], &[]);
}

#[test]
fn the_host_is_alive_only_with_its_start_time() {
    let r = record(100, 50);
    assert!(host_alive(&r, &[p(10, 10, 5)]));
    // A reused pid.
    assert!(!host_alive(&r, &[p(10, 10, 6)]));
    assert!(!host_alive(&r, &[]));
}

#[test]
fn stat_lines_with_odd_command_names() {
    let stat = "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 777 1 2";
    assert_eq!(parse_stat(4242, stat), Some(p(4242, 4240, 777)));
    assert_eq!(parse_stat(1, "garbage"), None);
}

#[test]
fn this_process_reads_itself() {
    let me = proc_info(std::process::id()).expect("this process");
    assert_eq!(me.pid, std::process::id());
    assert!(scan().contains(&me));
}
