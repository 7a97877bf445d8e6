//! The process-wide registry of live process groups.
//!
//! Every command runs as the leader of its own process group. A
//! [`GroupGuard`] kills the group when it is dropped (the command finished,
//! timed out, or its call was cancelled), so nothing a call started outlives
//! it. Some exits skip destructors (`std::process::exit`, a runtime shut
//! down in the background): the host calls [`kill_live_groups`] on every
//! exit path, which kills whatever groups are still registered.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, Signal, kill_process_group};

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Kills its process group when dropped, and keeps it in the registry
/// until then.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Pid,
}

impl GroupGuard {
    /// Registers the group led by the process `id` (a child spawned with
    /// `process_group(0)`). `None` for an id that cannot be a group of ours:
    /// 0, 1 (which `kill` would read as "every process") or out of range.
    pub fn register(id: u32) -> Option<Self> {
        let raw = i32::try_from(id).ok().filter(|&id| id > 1)?;
        let pgid = Pid::from_raw(raw)?;
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(raw);
        Some(Self { pgid })
    }

    /// Kills every process still in the group; the guard stays registered
    /// until dropped.
    pub fn kill(&self) {
        // The group may be gone already; there is nothing to do then.
        let _ = kill_process_group(self.pgid, Signal::KILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.pgid.as_raw_nonzero().get());
    }
}

/// Kills every registered process group. The host calls this on every exit
/// path; returns how many groups were still registered.
pub fn kill_live_groups() -> usize {
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(PoisonError::into_inner));
    for pgid in live.iter().copied().filter_map(Pid::from_raw) {
        let _ = kill_process_group(pgid, Signal::KILL);
    }
    live.len()
}

/// The groups registered now (for tests and diagnostics).
pub fn live_groups() -> Vec<i32> {
    LIVE.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .collect()
}
