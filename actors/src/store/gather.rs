//! How long the store's thread waits for more requests before it commits.
//!
//! A commit costs about the same whether it carries one session's request
//! or thirty: SQLite writes each page the transaction touched once, and the
//! pages most requests touch are the same few (the last leaf of each table
//! and index). When many sessions are committing, the thread therefore
//! waits [`GATHER_FOR`] after a job's first request for others to join the
//! same commit, as PostgreSQL's `commit_delay` does when it has siblings.
//! It waits only while the store is crowded: a job carried two requests or
//! more within the last [`CROWDED_FOR`]. A lone session, which never has a
//! second request queued, is answered as soon as its commit is done. Only
//! requests whose senders have nothing else to do meanwhile wait (a turn's
//! end, a new session's opening): a request someone is waiting on to send
//! the next (a parent starting its sub-agents one by one) commits at once,
//! with whatever was gathered so far.

use std::time::{Duration, Instant};

/// How long a job waits, from its first request, for others to join it.
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
