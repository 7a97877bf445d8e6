//! The delegated runs in progress, and where a person's answer to a
//! step's prompt goes: pure, so every path is tested without actors.
//!
//! A step's prompt id (`step:<name>[<i>]:approval:<n>`) names the step,
//! not the run. So that an answer reaches exactly one held call, the step
//! names of the runs one session tree has in progress at once are
//! disjoint: a run whose step shares a name with one in progress is
//! refused before it starts, and an answer goes to the one run of the
//! answering session that has the step, or is refused. A run that asks
//! nobody (its caller is not interactive) reserves no names. A run a host
//! answers itself (the shell's `/workflow`) reserves its names without
//! being reachable here.

use std::collections::{BTreeMap, BTreeSet};

use cadre_runtime::protocol::ApprovalDecision;

use super::ids::parse_outer;

/// The runs in progress; `S` is how a run is reached (its supervisor).
#[derive(Debug)]
pub(crate) struct Delegations<S> {
    next: u64,
    runs: BTreeMap<u64, Delegated<S>>,
}

impl<S> Default for Delegations<S> {
    fn default() -> Self {
        Self {
            next: 0,
            runs: BTreeMap::new(),
        }
    }
}

/// One run in progress.
#[derive(Debug)]
struct Delegated<S> {
    /// The session tree that delegated it.
    session: String,
    /// The step names its prompts may carry.
    steps: BTreeSet<String>,
    /// Its supervisor, once it has started.
    supervisor: Option<S>,
    /// Answers that came before its supervisor was known.
    held: Vec<Answer>,
    /// Its prompts are answered by its host, not through here.
    elsewhere: bool,
}

/// A person's answer to a step's prompt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub id: String,
    pub decision: ApprovalDecision,
    pub reason: Option<String>,
}

/// Where an answer went.
#[derive(Debug, PartialEq)]
pub(crate) enum Routed<S> {
    /// To this run's supervisor.
    To(S, Answer),
    /// Kept until the run's supervisor is known.
    Held,
    /// No run of the session has the step: the answer is refused.
    Nobody(Answer),
}

/// Why a run could not be admitted: it shares step names with a run of
/// the same session in progress. Retryable once that run has ended, or
/// at once with other names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepsInUse {
    /// The step names it shares with a run in progress.
    pub steps: Vec<String>,
}

impl std::error::Error for StepsInUse {}

impl std::fmt::Display for StepsInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.steps.iter().map(|s| format!("'{s}'")).collect();
        write!(
            f,
            "another workflow run of this session, still in progress, has a step named {}; \
             runs that go on at once need different step names, so that a person's answer \
             reaches one step. Nothing ran: rename the steps, or wait for that run's report",
            names.join(", ")
        )
    }
}

impl<S: Clone> Delegations<S> {
    /// Admits a run of `session` with `steps` (empty for a run that asks
    /// nobody); its key, or the names it shares with a run in progress.
    pub(crate) fn admit(
        &mut self,
        session: &str,
        steps: BTreeSet<String>,
    ) -> Result<u64, StepsInUse> {
        self.insert(session, steps, false)
    }

    /// Keeps `steps` for a run of `session` that its host answers itself:
    /// no run admitted meanwhile may use them, and an answer naming them
    /// is not routed here.
    pub(crate) fn reserve(
        &mut self,
        session: &str,
        steps: BTreeSet<String>,
    ) -> Result<u64, StepsInUse> {
        self.insert(session, steps, true)
    }

    fn insert(
        &mut self,
        session: &str,
        steps: BTreeSet<String>,
        elsewhere: bool,
    ) -> Result<u64, StepsInUse> {
        let shared: BTreeSet<&String> = self
            .runs
            .values()
            .filter(|run| run.session == session)
            .flat_map(|run| run.steps.intersection(&steps))
            .collect();
        if !shared.is_empty() {
            return Err(StepsInUse {
                steps: shared.into_iter().cloned().collect(),
            });
        }
        let key = self.next;
        self.next += 1;
        self.runs.insert(
            key,
            Delegated {
                session: session.to_string(),
                steps,
                supervisor: None,
                held: Vec::new(),
                elsewhere,
            },
        );
        Ok(key)
    }

    /// The run `key` started: the answers it was given meanwhile, to pass
    /// on now.
    pub(crate) fn started(&mut self, key: u64, supervisor: S) -> Vec<Answer> {
        match self.runs.get_mut(&key) {
            Some(run) => {
                run.supervisor = Some(supervisor);
                std::mem::take(&mut run.held)
            }
            None => Vec::new(),
        }
    }

    /// The run `key` is over (or never started).
    pub(crate) fn ended(&mut self, key: u64) {
        self.runs.remove(&key);
    }

    /// Where `answer`, given to `session`, goes.
    pub(crate) fn route(&mut self, session: &str, answer: Answer) -> Routed<S> {
        let Some((step, _, _)) = parse_outer(&answer.id) else {
            return Routed::Nobody(answer);
        };
        let run = self
            .runs
            .values_mut()
            .find(|run| run.session == session && run.steps.contains(step));
        match run {
            Some(Delegated {
                elsewhere: true, ..
            }) => Routed::Nobody(answer),
            Some(Delegated {
                supervisor: Some(supervisor),
                ..
            }) => Routed::To(supervisor.clone(), answer),
            Some(run) => {
                run.held.push(answer);
                Routed::Held
            }
            None => Routed::Nobody(answer),
        }
    }
}

#[cfg(test)]
mod tests;
