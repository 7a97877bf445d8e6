//! A session's queue and its one-turn-at-a-time rule, with no I/O.
//!
//! [`TurnQueue::step`] takes what happened (a message admitted, a turn
//! ended, the queue reread from the store, a shutdown) and answers with
//! what to do ([`QueueEffect`]): acknowledge an admission, start a turn,
//! cancel the running one, announce idleness, stop. The session actor
//! performs the effects (recording a turn's start in the store, spawning
//! the turn actor) and feeds the outcomes back.

use std::collections::VecDeque;

/// A message waiting for its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its queue row; `None` in a session without a store.
    pub id: Option<i64>,
    /// The text.
    pub text: String,
    /// Its turn started before a crash: continue it, do not run it again.
    pub interrupted: bool,
    /// The id of the submission that admitted it, echoed by its turn's
    /// events (none after a resume).
    pub cause: Option<String>,
    /// A host-written continuation of the session's goal: rechecked just
    /// before it runs (G6).
    pub internal: bool,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueInput {
    /// The session's stored queue, read back at its start.
    Resumed(Vec<Queued>),
    /// A message was admitted (and stored).
    Admitted(Queued),
    /// Turn `turn_id` ended, however it ended.
    Finished {
        /// The turn.
        turn_id: u64,
    },
    /// The store changed the queue (an answer admitted a message at the
    /// front); this is the stored queue now. A turn may start.
    Reloaded(Vec<Queued>),
    /// Cancel whatever runs, drop the queue, stop.
    Shutdown,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueEffect {
    /// Tell the host the message is admitted, with the messages now
    /// waiting (0 when its turn starts at once).
    Acknowledge {
        /// Messages waiting for a turn, this one included.
        queue_length: usize,
    },
    /// Start a turn for this message: record its start, then run it.
    Start {
        /// The new turn's id.
        turn_id: u64,
        /// The message.
        message: Queued,
    },
    /// Cancel the running turn.
    Cancel {
        /// The running turn.
        turn_id: u64,
    },
    /// Nothing runs and nothing waits.
    Idle {
        /// Turns started so far.
        turns: u64,
    },
    /// Stop the session.
    Stop {
        /// Turns started.
        turns: u64,
    },
}

/// The running turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningTurn {
    /// Its id.
    pub turn_id: u64,
    /// Its message's queue row.
    pub queue_id: Option<i64>,
}

/// The queue and the turn that runs.
#[derive(Debug, Default)]
pub struct TurnQueue {
    waiting: VecDeque<Queued>,
    running: Option<RunningTurn>,
    turns: u64,
    stopping: bool,
}

impl TurnQueue {
    /// An empty queue of a session that has finished `turns` turns: its
    /// next turn is `turns + 1`, so ids go on across resumes.
    pub fn after(turns: u64) -> Self {
        Self {
            turns,
            ..Self::default()
        }
    }

    /// The running turn, if any.
    pub fn running(&self) -> Option<RunningTurn> {
        self.running
    }

    /// Messages waiting for a turn.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no message waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Turns started so far.
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// Whether a shutdown is under way.
    pub fn stopping(&self) -> bool {
        self.stopping
    }

    /// Whether a message admitted now would start its turn at once.
    pub fn would_start_now(&self) -> bool {
        self.running.is_none() && self.waiting.is_empty() && !self.stopping
    }

    /// Takes one input.
    pub fn step(&mut self, input: QueueInput) -> Vec<QueueEffect> {
        match input {
            QueueInput::Resumed(stored) => {
                self.waiting = stored.into();
                self.start_next().into_iter().collect()
            }
            QueueInput::Admitted(message) => {
                if self.would_start_now() {
                    let mut effects = vec![QueueEffect::Acknowledge { queue_length: 0 }];
                    effects.push(self.start(message));
                    effects
                } else {
                    self.waiting.push_back(message);
                    vec![QueueEffect::Acknowledge {
                        queue_length: self.waiting.len(),
                    }]
                }
            }
            QueueInput::Finished { turn_id } => {
                if self.running.map(|r| r.turn_id) != Some(turn_id) {
                    // A late report from a turn already closed.
                    return Vec::new();
                }
                self.running = None;
                self.after_turn()
            }
            QueueInput::Reloaded(stored) => {
                let running = self.running.and_then(|r| r.queue_id);
                self.waiting = stored
                    .into_iter()
                    .filter(|m| m.id.is_none() || m.id != running)
                    .collect();
                if self.running.is_some() {
                    Vec::new()
                } else {
                    self.after_turn()
                }
            }
            QueueInput::Shutdown => {
                self.stopping = true;
                self.waiting.clear();
                match self.running {
                    Some(running) => vec![QueueEffect::Cancel {
                        turn_id: running.turn_id,
                    }],
                    None => vec![QueueEffect::Stop { turns: self.turns }],
                }
            }
        }
    }

    fn after_turn(&mut self) -> Vec<QueueEffect> {
        if self.stopping {
            return vec![QueueEffect::Stop { turns: self.turns }];
        }
        match self.start_next() {
            Some(start) => vec![start],
            None => vec![QueueEffect::Idle { turns: self.turns }],
        }
    }

    fn start_next(&mut self) -> Option<QueueEffect> {
        let next = self.waiting.pop_front()?;
        Some(self.start(next))
    }

    fn start(&mut self, message: Queued) -> QueueEffect {
        self.turns += 1;
        self.running = Some(RunningTurn {
            turn_id: self.turns,
            queue_id: message.id,
        });
        QueueEffect::Start {
            turn_id: self.turns,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn msg(id: i64) -> Queued {
        Queued {
            id: Some(id),
            text: format!("m{id}"),
            interrupted: false,
            cause: None,
            internal: false,
        }
    }

    fn start(turn_id: u64, id: i64) -> QueueEffect {
        QueueEffect::Start {
            turn_id,
            message: msg(id),
        }
    }

    #[test]
    fn one_turn_at_a_time_in_admission_order() {
        let mut q = TurnQueue::default();
        assert_eq!(
            q.step(QueueInput::Admitted(msg(1))),
            [QueueEffect::Acknowledge { queue_length: 0 }, start(1, 1)]
        );
        assert_eq!(
            q.step(QueueInput::Admitted(msg(2))),
            [QueueEffect::Acknowledge { queue_length: 1 }]
        );
        assert_eq!(
            q.step(QueueInput::Admitted(msg(3))),
            [QueueEffect::Acknowledge { queue_length: 2 }]
        );
        assert_eq!(q.step(QueueInput::Finished { turn_id: 1 }), [start(2, 2)]);
        assert_eq!(q.step(QueueInput::Finished { turn_id: 2 }), [start(3, 3)]);
        assert_eq!(
            q.step(QueueInput::Finished { turn_id: 3 }),
            [QueueEffect::Idle { turns: 3 }]
        );
    }

    #[test]
    fn a_resumed_session_numbers_its_turns_on_from_those_it_finished() {
        let mut q = TurnQueue::after(4);
        assert_eq!(q.step(QueueInput::Resumed(vec![msg(9)])), [start(5, 9)]);
        assert_eq!(
            q.step(QueueInput::Finished { turn_id: 5 }),
            [QueueEffect::Idle { turns: 5 }]
        );
    }

    #[test]
    fn a_late_end_of_a_closed_turn_changes_nothing() {
        let mut q = TurnQueue::default();
        q.step(QueueInput::Admitted(msg(1)));
        q.step(QueueInput::Finished { turn_id: 1 });
        assert_eq!(q.step(QueueInput::Finished { turn_id: 1 }), []);
        assert_eq!(q.step(QueueInput::Finished { turn_id: 7 }), []);
        assert_eq!(q.running(), None);
    }

    #[test]
    fn resume_continues_the_stored_queue_interrupted_turn_first() {
        let mut q = TurnQueue::default();
        let interrupted = Queued {
            interrupted: true,
            ..msg(4)
        };
        let effects = q.step(QueueInput::Resumed(vec![interrupted.clone(), msg(5)]));
        assert_eq!(
            effects,
            [QueueEffect::Start {
                turn_id: 1,
                message: interrupted
            }]
        );
        assert_eq!(q.len(), 1);
        assert_eq!(q.step(QueueInput::Resumed(Vec::new())), []);
    }

    #[test]
    fn shutdown_cancels_the_running_turn_drops_the_queue_and_stops_after_it() {
        let mut q = TurnQueue::default();
        q.step(QueueInput::Admitted(msg(1)));
        q.step(QueueInput::Admitted(msg(2)));
        assert_eq!(
            q.step(QueueInput::Shutdown),
            [QueueEffect::Cancel { turn_id: 1 }]
        );
        assert!(q.is_empty() && q.stopping() && !q.would_start_now());
        assert_eq!(
            q.step(QueueInput::Finished { turn_id: 1 }),
            [QueueEffect::Stop { turns: 1 }]
        );
        let mut idle = TurnQueue::default();
        assert_eq!(
            idle.step(QueueInput::Shutdown),
            [QueueEffect::Stop { turns: 0 }]
        );
    }

    #[test]
    fn a_reloaded_queue_never_lists_the_running_message_again() {
        let mut q = TurnQueue::default();
        q.step(QueueInput::Admitted(msg(1)));
        assert_eq!(q.step(QueueInput::Reloaded(vec![msg(1), msg(9)])), []);
        assert_eq!(q.len(), 1);
        assert_eq!(q.step(QueueInput::Finished { turn_id: 1 }), [start(2, 9)]);
        q.step(QueueInput::Finished { turn_id: 2 });
        // Idle: a reload starts what the answer admitted.
        assert_eq!(q.step(QueueInput::Reloaded(vec![msg(10)])), [start(3, 10)]);
        q.step(QueueInput::Finished { turn_id: 3 });
        assert_eq!(
            q.step(QueueInput::Reloaded(Vec::new())),
            [QueueEffect::Idle { turns: 3 }]
        );
    }
}
