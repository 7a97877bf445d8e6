//! Per-command resource limits, set by the in-sandbox helper as rlimits
//! just before it `exec`s bash (an rlimit set in cadre's spawning thread
//! would bind all of cadre: rlimits belong to the process).

use rustix::process::{Resource, Rlimit, setrlimit};
use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

/// Bounds on one command, from `[sandbox]`; every process the command
/// starts inherits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Address space of each process, in bytes (`RLIMIT_AS`): a
    /// `tail -n1 /dev/zero` gets ENOMEM here instead of taking the host's
    /// memory.
    pub memory: u64,
    /// Processes of the command's user (`RLIMIT_NPROC`). The kernel does
    /// not enforce it for root; it counts every process of a non-root user.
    pub processes: u64,
    /// CPU seconds of each process (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size: u64,
    /// Size of the private `/tmp` (and `TMPDIR`) of a namespaced command,
    /// in bytes: what caps spill files in total.
    pub tmp_size: u64,
}

impl Default for Limits {
    /// 8 GiB of address space, 4096 processes, 10 CPU minutes, 4 GiB
    /// files, a 1 GiB `/tmp`: ordinary builds and tests fit, a runaway
    /// command stops long before it takes the machine.
    fn default() -> Self {
        Self {
            memory: 8 * 1024 * MIB,
            processes: 4096,
            cpu_secs: 600,
            file_size: 4 * 1024 * MIB,
            tmp_size: 1024 * MIB,
        }
    }
}

impl Limits {
    /// Sets the rlimits on the calling process (hard and soft alike, so the
    /// command cannot raise them), and no core dumps.
    pub(crate) fn apply(&self) -> Result<(), String> {
        let limits = [
            (Resource::As, self.memory, "memory"),
            (Resource::Nproc, self.processes, "processes"),
            (Resource::Cpu, self.cpu_secs, "CPU time"),
            (Resource::Fsize, self.file_size, "file size"),
            (Resource::Core, 0, "core size"),
        ];
        for (resource, value, name) in limits {
            let limit = Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            setrlimit(resource, limit).map_err(|e| format!("cannot limit the {name}: {e}"))?;
        }
        Ok(())
    }
}
