//! The table of an agent's sub-agents, with no actors (S1, S3).
//!
//! A supervisor keeps one [`ChildTable`]: which children exist, whether
//! each is running, its last report, who waits for its next one, and how
//! an approval answer reaches the child below which the asking agent sits.
//! The table decides; the actor holding it performs what the answers say
//! (start a run, send the report to the waiters). `H` is whatever the actor
//! needs to reach a child (its actor ref, its slot); `W` is a waiter (a
//! reply port). Neither is looked into.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::AgentReport;
use super::path::{AgentPath, ApprovalId, Hop};

/// Where a child is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    /// A run is under way.
    Running,
    /// Its last run ended; it takes follow-ups.
    Idle,
    /// Its run was cut off by a crash of the whole process; a follow-up
    /// starts a new run on its stored conversation.
    Interrupted,
    /// Its actor failed; it takes no more work.
    Crashed,
}

/// One child.
#[derive(Debug)]
pub struct Child<H, W> {
    /// How the supervisor reaches it; `None` while it has no live actor (a
    /// resumed session's child before its next follow-up).
    pub handle: Option<H>,
    /// Its role.
    pub role: String,
    /// Where it is in its life.
    pub state: ChildState,
    /// Its last run's report.
    pub last_report: Option<AgentReport>,
    waiters: Vec<W>,
}

/// Why a child cannot take work now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildRefusal {
    /// No child has that id. Not retryable.
    #[error("there is no agent '{0}' under this agent")]
    NotFound(String),
    /// It is still working. Retryable once it has answered.
    #[error("agent {0} is still working; wait for it first")]
    Busy(String),
    /// It crashed. Not retryable: it takes no more work.
    #[error("agent {0} crashed and takes no more work")]
    Crashed(String),
}

/// What waiting for a child gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait<W> {
    /// Its report is there: answer the waiter with it.
    Report(AgentReport, W),
    /// The waiter was registered; it gets the report when the run ends.
    Later,
    /// It is idle and never reported (a resumed child whose run was cut off).
    NoReport(W),
    /// No such child, or a crashed one.
    Refused(ChildRefusal, W),
}

/// An agent's children.
#[derive(Debug)]
pub struct ChildTable<H, W> {
    /// The path of the agent holding the table.
    me: AgentPath,
    children: BTreeMap<u32, Child<H, W>>,
    spawned: u32,
}

impl<H, W> ChildTable<H, W> {
    /// The table of the agent at `me`.
    pub fn new(me: AgentPath) -> Self {
        Self {
            me,
            children: BTreeMap::new(),
            spawned: 0,
        }
    }

    /// The path the next child gets; each call takes a new number.
    pub fn next_path(&mut self) -> AgentPath {
        self.spawned += 1;
        self.me.child(self.spawned)
    }

    /// Records a child whose first run has started.
    pub fn started(&mut self, path: &AgentPath, handle: H, role: impl Into<String>) {
        if let Some(n) = self.number(path) {
            self.spawned = self.spawned.max(n);
            self.children.insert(
                n,
                Child {
                    handle: Some(handle),
                    role: role.into(),
                    state: ChildState::Running,
                    last_report: None,
                    waiters: Vec::new(),
                },
            );
        }
    }

    /// Records a child read back from the store: no live actor yet. A child
    /// that was running when the process died is [`ChildState::Interrupted`].
    pub fn restored(
        &mut self,
        path: &AgentPath,
        role: impl Into<String>,
        state: ChildState,
        last_report: Option<AgentReport>,
    ) {
        if let Some(n) = self.number(path) {
            self.spawned = self.spawned.max(n);
            let state = match state {
                ChildState::Running => ChildState::Interrupted,
                kept @ (ChildState::Idle | ChildState::Interrupted | ChildState::Crashed) => kept,
            };
            self.children.insert(
                n,
                Child {
                    handle: None,
                    role: role.into(),
                    state,
                    last_report,
                    waiters: Vec::new(),
                },
            );
        }
    }

    /// A child, by path.
    pub fn get(&self, path: &AgentPath) -> Option<&Child<H, W>> {
        self.children.get(&self.number(path)?)
    }

    /// A child, by path, to change its handle.
    pub fn get_mut(&mut self, path: &AgentPath) -> Option<&mut Child<H, W>> {
        let n = self.number(path)?;
        self.children.get_mut(&n)
    }

    /// Every child, in order.
    pub fn iter(&self) -> impl Iterator<Item = (AgentPath, &Child<H, W>)> {
        self.children.iter().map(|(n, c)| (self.me.child(*n), c))
    }

    /// Children with a run under way.
    pub fn running(&self) -> usize {
        self.children
            .values()
            .filter(|c| c.state == ChildState::Running)
            .count()
    }

    /// Whether a follow-up may start on `path`; when it may, the child is
    /// marked running and its last report dropped.
    pub fn follow_up(&mut self, path: &AgentPath) -> Result<&mut Child<H, W>, ChildRefusal> {
        let shown = path.to_string();
        let child = self
            .number(path)
            .and_then(|n| self.children.get_mut(&n))
            .ok_or(ChildRefusal::NotFound(shown.clone()))?;
        match child.state {
            ChildState::Running => Err(ChildRefusal::Busy(shown)),
            ChildState::Crashed => Err(ChildRefusal::Crashed(shown)),
            ChildState::Idle | ChildState::Interrupted => {
                child.state = ChildState::Running;
                child.last_report = None;
                Ok(child)
            }
        }
    }

    /// Waits for `path`'s report.
    pub fn wait(&mut self, path: &AgentPath, waiter: W) -> Wait<W> {
        let shown = path.to_string();
        let Some(child) = self.number(path).and_then(|n| self.children.get_mut(&n)) else {
            return Wait::Refused(ChildRefusal::NotFound(shown), waiter);
        };
        match (child.state, &child.last_report) {
            (ChildState::Running, _) => {
                child.waiters.push(waiter);
                Wait::Later
            }
            (ChildState::Crashed, _) => Wait::Refused(ChildRefusal::Crashed(shown), waiter),
            (ChildState::Idle | ChildState::Interrupted, Some(report)) => {
                Wait::Report(report.clone(), waiter)
            }
            (ChildState::Idle | ChildState::Interrupted, None) => Wait::NoReport(waiter),
        }
    }

    /// A run ended with `report`: the child is idle and its waiters are
    /// handed back to be answered.
    pub fn run_done(&mut self, path: &AgentPath, report: AgentReport) -> Vec<W> {
        let Some(child) = self.number(path).and_then(|n| self.children.get_mut(&n)) else {
            return Vec::new();
        };
        child.state = ChildState::Idle;
        child.last_report = Some(report);
        std::mem::take(&mut child.waiters)
    }

    /// The child whose handle `is_it` picks crashed: it is marked crashed
    /// and its path and waiters are handed back.
    pub fn crashed(&mut self, is_it: impl Fn(&H) -> bool) -> Option<(AgentPath, String, Vec<W>)> {
        let (n, child) = self
            .children
            .iter_mut()
            .find(|(_, c)| c.handle.as_ref().is_some_and(&is_it))?;
        child.state = ChildState::Crashed;
        child.handle = None;
        let waiters = std::mem::take(&mut child.waiters);
        Some((self.me.child(*n), child.role.clone(), waiters))
    }

    /// Where an approval answer goes from here: [`Route::Here`] when the
    /// prompt is this agent's own, [`Route::Child`] with the handle of the
    /// child below which the asking agent sits, [`Route::Nowhere`] when no
    /// live child leads there.
    pub fn route(&self, id: &ApprovalId) -> Route<'_, H> {
        match id.agent.hop_from(&self.me) {
            Hop::Here => Route::Here,
            Hop::Child(n) => match self.children.get(&n).and_then(|c| c.handle.as_ref()) {
                Some(handle) => Route::Child(handle),
                None => Route::Nowhere,
            },
            Hop::Elsewhere => Route::Nowhere,
        }
    }

    fn number(&self, path: &AgentPath) -> Option<u32> {
        match path.hop_from(&self.me) {
            Hop::Child(n) if path.depth() == self.me.depth() + 1 => Some(n),
            Hop::Here | Hop::Child(_) | Hop::Elsewhere => None,
        }
    }
}

/// Where an approval answer goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a, H> {
    /// To this agent's own prompts.
    Here,
    /// Down to this child.
    Child(&'a H),
    /// Nowhere: no such prompt below here.
    Nowhere,
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = ChildTable<&'static str, u32>;

    fn path(s: &str) -> AgentPath {
        s.parse().expect("path")
    }

    fn report(text: &str) -> AgentReport {
        AgentReport {
            summary: text.into(),
            status: "completed".into(),
            ..AgentReport::default()
        }
    }

    #[test]
    fn children_are_numbered_under_their_parent() {
        let mut root = Table::new(AgentPath::root());
        assert_eq!(root.next_path(), path("1"));
        assert_eq!(root.next_path(), path("2"));
        let mut nested = Table::new(path("2"));
        assert_eq!(nested.next_path(), path("2.1"));
        // A restored child keeps new numbers from colliding with it.
        let mut resumed = Table::new(AgentPath::root());
        resumed.restored(&path("4"), "w", ChildState::Idle, None);
        assert_eq!(resumed.next_path(), path("5"));
    }

    #[test]
    fn a_run_hands_its_report_to_every_waiter_once() {
        let mut table = Table::new(AgentPath::root());
        let one = table.next_path();
        table.started(&one, "actor-1", "worker");
        assert_eq!(table.wait(&one, 7), Wait::Later);
        assert_eq!(table.wait(&one, 8), Wait::Later);
        assert_eq!(table.running(), 1);
        assert_eq!(table.run_done(&one, report("done")), vec![7, 8]);
        assert_eq!(table.running(), 0);
        assert_eq!(table.wait(&one, 9), Wait::Report(report("done"), 9));
        assert_eq!(table.run_done(&one, report("again")), Vec::<u32>::new());
    }

    #[test]
    fn follow_ups_only_reach_idle_children() {
        let mut table = Table::new(AgentPath::root());
        let one = table.next_path();
        table.started(&one, "actor-1", "worker");
        assert_eq!(
            table.follow_up(&one).map(|_| ()),
            Err(ChildRefusal::Busy("1".into()))
        );
        table.run_done(&one, report("first"));
        assert!(table.follow_up(&one).is_ok());
        assert_eq!(table.get(&one).map(|c| c.last_report.is_none()), Some(true));
        assert_eq!(
            table.follow_up(&path("9")).map(|_| ()),
            Err(ChildRefusal::NotFound("9".into()))
        );
        assert_eq!(
            table.follow_up(&path("1.1")).map(|_| ()),
            Err(ChildRefusal::NotFound("1.1".into())),
            "a grandchild is not a child"
        );
    }

    #[test]
    fn a_crash_fails_the_waiters_and_refuses_more_work() {
        let mut table = Table::new(AgentPath::root());
        let one = table.next_path();
        table.started(&one, "actor-1", "worker");
        assert_eq!(table.wait(&one, 3), Wait::Later);
        let (crashed, role, waiters) = table.crashed(|h| *h == "actor-1").expect("found");
        assert_eq!(
            (crashed, role.as_str(), waiters),
            (one.clone(), "worker", vec![3])
        );
        assert_eq!(
            table.follow_up(&one).map(|_| ()),
            Err(ChildRefusal::Crashed("1".into()))
        );
        assert_eq!(table.crashed(|h| *h == "actor-1").map(|c| c.0), None);
    }

    #[test]
    fn a_resumed_child_that_was_running_is_interrupted_and_takes_a_follow_up() {
        let mut table = Table::new(AgentPath::root());
        table.restored(&path("1"), "worker", ChildState::Running, None);
        table.restored(&path("2"), "worker", ChildState::Idle, Some(report("kept")));
        assert_eq!(
            table.get(&path("1")).map(|c| c.state),
            Some(ChildState::Interrupted)
        );
        assert_eq!(table.wait(&path("1"), 1), Wait::NoReport(1));
        assert_eq!(table.wait(&path("2"), 2), Wait::Report(report("kept"), 2));
        assert!(table.follow_up(&path("1")).is_ok());
    }

    #[test]
    fn approvals_are_routed_one_hop_down_by_path() {
        let mut table = Table::new(path("2"));
        let child = table.next_path();
        table.started(&child, "actor-2.1", "worker");
        let id = |s: &str| s.parse::<ApprovalId>().expect("id");
        assert_eq!(table.route(&id("agent:2:approval:1")), Route::Here);
        assert_eq!(
            table.route(&id("agent:2.1:approval:4")),
            Route::Child(&"actor-2.1")
        );
        assert_eq!(
            table.route(&id("agent:2.1.3:approval:1")),
            Route::Child(&"actor-2.1")
        );
        assert_eq!(table.route(&id("agent:2.2:approval:1")), Route::Nowhere);
        assert_eq!(table.route(&id("agent:1:approval:1")), Route::Nowhere);
        assert_eq!(table.route(&id("approval:1")), Route::Nowhere);
    }
}
