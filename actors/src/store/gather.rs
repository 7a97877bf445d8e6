//! How long the store's thread waits for more requests before it commits.
//!
//! A commit costs about the same whether it carries one session's request
//! or thirty: SQLite writes each page the transaction touched once, and the
//! pages most requests touch are the same few (the last leaf of each table
//! and index). When many agents are committing, the thread therefore waits
//! up to [`GATHER_FOR`], once it has taken what was queued, for others to
//! join the same commit, as PostgreSQL's `commit_delay` does when it has
//! siblings. It waits only while the store is crowded: a job carried two
//! requests or more within the last [`CROWDED_FOR`]. A store that had no
//! such job (a single session working alone, which never has a second
//! request queued) answers as soon as its commit is done; a session whose
//! sub-agents or workflow steps make it crowded may wait on its own
//! requests too.
//!
//! Only patient requests wait (a turn's end, an agent's opening with its
//! first message), and the wait is bounded: a turn's end holds up its
//! session's next turn and its `turn.completed` by at most [`GATHER_FOR`],
//! next to a model call of tens of milliseconds or more. A request that
//! someone waits on to send the next (a parent starting its sub-agents one
//! by one) commits at once, with whatever was gathered so far. Nothing
//! waits after a write has failed.

use std::time::{Duration, Instant};

/// How long a job waits, once it has taken what was queued, for others to
/// join it.
pub(super) const GATHER_FOR: Duration = Duration::from_micros(500);

/// How long after a job that carried several requests the store counts as
/// crowded.
pub(super) const CROWDED_FOR: Duration = Duration::from_secs(1);

/// A job that holds this many requests commits without waiting for more.
pub(super) const GATHER_AT_MOST: usize = 64;

/// Whether, and until when, the thread waits for more requests.
#[derive(Debug, Default)]
pub(super) struct Gathering {
    /// The end of the crowded time, if the store was ever crowded.
    crowded_until: Option<Instant>,
}

impl Gathering {
    /// Until when a job whose first request was taken at `taken`, and that
    /// holds `requests` requests now, all of them `patient` or not, waits
    /// for more: `None` to commit now.
    pub(super) fn until(&self, taken: Instant, requests: usize, patient: bool) -> Option<Instant> {
        let crowded = self.crowded_until.is_some_and(|until| taken < until);
        (crowded && patient && (1..GATHER_AT_MOST).contains(&requests)).then(|| taken + GATHER_FOR)
    }

    /// A job was taken at `now` with `requests` requests.
    pub(super) fn took(&mut self, now: Instant, requests: usize) {
        if requests >= 2 {
            self.crowded_until = Some(now + CROWDED_FOR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_session_never_waits() {
        let mut gathering = Gathering::default();
        let start = Instant::now();
        for i in 0..100u32 {
            let at = start + Duration::from_millis(u64::from(i));
            assert_eq!(gathering.until(at, 1, true), None, "request {i}");
            gathering.took(at, 1);
        }
    }

    #[test]
    fn a_crowded_store_waits_a_moment_then_stops_waiting() {
        let mut gathering = Gathering::default();
        let start = Instant::now();
        gathering.took(start, 3);
        let next = start + Duration::from_millis(2);
        assert_eq!(gathering.until(next, 1, true), Some(next + GATHER_FOR));
        // Nothing to wait for, enough already, or someone waiting on one of
        // them: commit now.
        assert_eq!(gathering.until(next, 0, true), None);
        assert_eq!(gathering.until(next, GATHER_AT_MOST, true), None);
        assert_eq!(gathering.until(next, 1, false), None);
        // Lone requests from then on do not keep it crowded.
        let mut at = next;
        while at < start + CROWDED_FOR {
            gathering.took(at, 1);
            at += Duration::from_millis(100);
        }
        assert_eq!(gathering.until(start + CROWDED_FOR, 1, true), None);
        // A job with company makes it crowded again.
        gathering.took(at, 2);
        assert!(gathering.until(at, 1, true).is_some());
    }
}
