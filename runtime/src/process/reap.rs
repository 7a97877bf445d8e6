//! What a killed cadre left running, found and ended at the next start.
//!
//! Every managed process is recorded in the store's `processes` table
//! while it runs, with cadre's own pid and start time. A cadre that ends
//! normally kills its processes and removes their rows; one killed with
//! SIGKILL cannot, and under the thread walls alone (no PID namespace to
//! die with it) its processes keep running. The next cadre that opens the
//! store reads the rows whose cadre is gone and kills what is left of each
//! process group: the processes whose group is the recorded one and which
//! started no earlier than the recorded leader, so a reused pid or group
//! id is never taken for one of them.

use serde::{Deserialize, Serialize};

/// One managed process as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Unique key of this process run.
    pub key: String,
    /// The session (or workflow run) whose agent started it.
    pub session_id: String,
    /// The agent's row.
    pub owner: String,
    /// The command line.
    pub command: String,
    /// Its leader's pid, which is also its process group id.
    pub pid: u32,
    /// The leader's start time (clock ticks since boot).
    pub started: i64,
    /// The cadre process that runs it.
    pub host_pid: u32,
    /// That cadre's start time, so a reused pid is not taken for it.
    pub host_started: i64,
}

/// One process on this machine, as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    /// Its pid.
    pub pid: u32,
    /// Its process group.
    pub pgid: u32,
    /// When it started (clock ticks since boot).
    pub started: i64,
}

/// Whether the cadre that recorded `record` still runs.
pub fn host_alive(record: &ProcessRecord, processes: &[ProcInfo]) -> bool {
    processes
        .iter()
        .any(|p| p.pid == record.host_pid && p.started == record.host_started)
}

/// The pids to kill for an orphaned record: its group's members that
/// started no earlier than its leader.
pub fn targets(record: &ProcessRecord, processes: &[ProcInfo]) -> Vec<u32> {
    processes
        .iter()
        .filter(|p| p.pgid == record.pid && p.started >= record.started && p.pid > 1)
        .map(|p| p.pid)
        .collect()
}

/// `/proc/<pid>/stat` read into a [`ProcInfo`].
pub fn parse_stat(pid: u32, stat: &str) -> Option<ProcInfo> {
    // The command name (field 2) may hold spaces and parentheses; count
    // from its last ')'. After it: state (3), ppid (4), pgrp (5), …,
    // starttime (22).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(ProcInfo {
        pid,
        pgid: fields.get(2)?.parse().ok()?,
        started: fields.get(19)?.parse().ok()?,
    })
}

/// One process's [`ProcInfo`], if it runs.
pub fn proc_info(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

/// Every process this machine shows in `/proc`.
pub fn scan() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_info)
        .collect()
}

/// Kills every process of `record`'s group that is left; returns how many.
pub fn kill_left(record: &ProcessRecord, processes: &[ProcInfo]) -> usize {
    let pids = targets(record, processes);
    for pid in &pids {
        if let Some(pid) = i32::try_from(*pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            // Gone meanwhile: nothing to do.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    pids.len()
}

#[cfg(test)]
mod tests;
