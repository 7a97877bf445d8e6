//! What an agent holds in memory of its conversation: what its next
//! request sends and no more. Every message is stored (CX4); once a
//! compaction record replaces older messages, the agent lets go of them,
//! so a long run's memory stays flat: the latest record, the messages it
//! keeps and those after it, and the bounded [`Trail`] the next record
//! re-states. Whatever reads older parts (`cadre sessions show --full`, a
//! fork) reads them from the store.

use std::sync::Arc;

use super::Trail;
use super::compact::replace;
use crate::message::Message;

/// An agent's conversation as it holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// Messages stored: the next one's place (`seq`) in the store.
    stored: usize,
    /// What a request sends of it: [`super::view`] of every stored message.
    view: Vec<Arc<Message>>,
    /// The stored place of each message of `view` (a stubbed result's is
    /// its result's).
    seqs: Vec<usize>,
    /// What the next compaction record re-states.
    trail: Trail,
}

impl Conversation {
    /// The conversation of `raw`, every stored message in order.
    pub fn of(raw: &[Arc<Message>]) -> Self {
        let mut conversation = Self::default();
        for message in raw {
            conversation.push(message.clone());
        }
        conversation
    }

    /// Takes the next stored message; returns its place in the store.
    pub fn push(&mut self, message: Arc<Message>) -> usize {
        let seq = self.stored;
        self.stored += 1;
        self.trail.push(&message);
        match message.as_ref() {
            Message::Compaction(record) => {
                let dropped = replace(&mut self.view, &message, record);
                self.seqs.drain(..dropped);
                self.seqs.insert(0, seq);
            }
            Message::User { .. } | Message::Assistant { .. } | Message::Tool { .. } => {
                self.view.push(message);
                self.seqs.push(seq);
            }
        }
        seq
    }

    /// How many messages are stored: the next one's place.
    pub fn stored(&self) -> usize {
        self.stored
    }

    /// Whether nothing is stored yet.
    pub fn is_empty(&self) -> bool {
        self.stored == 0
    }

    /// What the next request sends.
    pub fn view(&self) -> &[Arc<Message>] {
        &self.view
    }

    /// The messages of the view stored at `seq` or after, in the view's
    /// order: a compaction record after `seq` leaves out what it replaced.
    pub fn since(&self, seq: usize) -> Vec<Arc<Message>> {
        self.view
            .iter()
            .zip(&self.seqs)
            .filter(|(_, at)| **at >= seq)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// What the next compaction record re-states.
    pub fn trail(&self) -> &Trail {
        &self.trail
    }
}
