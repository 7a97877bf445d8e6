//! Which processes a session's agents run, who owns each, and the bounds.
//!
//! Pure bookkeeping: the manager (`super::Processes`) asks the table before
//! it starts anything and tells it how each process ended.

use std::collections::BTreeMap;

/// Bounds on managed processes (`[limits]`: `processes_per_agent`,
/// `processes_per_session`, `process_output_kib`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Processes one agent may have running at once. Default 4.
    pub per_agent: usize,
    /// Processes a session's whole tree of agents may have running at
    /// once. Default 16.
    pub per_session: usize,
    /// Bytes of output kept per process (the ring). Default 1 MiB.
    pub output_bytes: usize,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            per_agent: 4,
            per_session: 16,
            output_bytes: 1024 * 1024,
        }
    }
}

/// How a process stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Still running.
    Running,
    /// It ended by itself: its exit code, or `None` when a signal ended it.
    Exited(Option<i32>),
    /// cadre stopped it (a `stop`, its agent's end, a failed readiness).
    Stopped,
}

impl State {
    /// The state in a line the model reads.
    pub fn describe(self) -> String {
        match self {
            State::Running => "running".into(),
            State::Exited(Some(code)) => format!("exited with code {code}"),
            State::Exited(None) => "killed by a signal".into(),
            State::Stopped => "stopped".into(),
        }
    }
}

/// One process as the table knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The agent that started it (its store row: `<session>` or
    /// `<session>/<path>`).
    pub owner: String,
    /// The command line.
    pub command: String,
    /// Its process id once started.
    pub pid: Option<u32>,
    /// How it stands.
    pub state: State,
}

/// Why a process may not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The agent runs as many as it may. Retryable once one ends.
    #[error("this agent already runs {0} processes, the most it may; stop one first")]
    Agent(usize),
    /// The session runs as many as it may. Retryable once one ends.
    #[error("this session's agents already run {0} processes, the most they may; stop one first")]
    Session(usize),
}

/// The processes of one session's tree, numbered `p1`, `p2`, … in the
/// order they were admitted.
#[derive(Debug, Clone, Default)]
pub struct Table {
    entries: BTreeMap<u64, Entry>,
    last: u64,
}

impl Table {
    /// Admits a new process for `owner`, or says which bound it would break.
    pub fn admit(
        &mut self,
        owner: &str,
        command: &str,
        limits: ProcessLimits,
    ) -> Result<u64, LimitError> {
        let running = || self.entries.values().filter(|e| e.state == State::Running);
        if running().count() >= limits.per_session {
            return Err(LimitError::Session(limits.per_session));
        }
        if running().filter(|e| e.owner == owner).count() >= limits.per_agent {
            return Err(LimitError::Agent(limits.per_agent));
        }
        self.last += 1;
        self.entries.insert(
            self.last,
            Entry {
                owner: owner.to_string(),
                command: command.to_string(),
                pid: None,
                state: State::Running,
            },
        );
        Ok(self.last)
    }

    /// Records the pid of a started process.
    pub fn started(&mut self, id: u64, pid: u32) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.pid = Some(pid);
        }
    }

    /// Records how a process ended; the first end recorded stays (a stop
    /// that raced the process's own exit is still a stop).
    pub fn ended(&mut self, id: u64, state: State) {
        if let Some(entry) = self.entries.get_mut(&id)
            && entry.state == State::Running
        {
            entry.state = state;
        }
    }

    /// Forgets a process that never started.
    pub fn withdraw(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    /// The process numbered `id`.
    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.entries.get(&id)
    }

    /// Every process, oldest first.
    pub fn all(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    /// The running processes `owner` started (all of them for `None`).
    pub fn running(&self, owner: Option<&str>) -> Vec<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| e.state == State::Running && owner.is_none_or(|o| e.owner == o))
            .map(|(id, _)| *id)
            .collect()
    }
}

/// `p3` for 3: the name the model uses.
pub fn name(id: u64) -> String {
    format!("p{id}")
}

/// 3 for `p3` (or `3`).
pub fn parse_name(text: &str) -> Option<u64> {
    let text = text.trim();
    text.strip_prefix('p').unwrap_or(text).parse().ok()
}

#[cfg(test)]
mod tests;
