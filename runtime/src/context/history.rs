//! What became of each stored message once compactions ran: sent as it
//! is, sent as a one-line stub, or replaced by a later compaction record.
//! `cadre sessions show` lists a conversation by it; it follows
//! [`view`](super::view) step by step, so the two never disagree.

use std::collections::HashSet;
use std::sync::Arc;

use crate::message::Message;

/// A stored message's part in what a request sends now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Sent as stored (a compaction record is sent as its rendering).
    Sent,
    /// A tool result sent as the one-line stub a fallback gave it.
    Stubbed,
    /// Replaced by the compaction record stored at this index: stored,
    /// never sent again.
    Replaced(usize),
}

/// The fate of every message of `raw`, index for index.
pub fn fates(raw: &[Arc<Message>]) -> Vec<Fate> {
    let mut fates = vec![Fate::Sent; raw.len()];
    // The indices of what is sent now, in order.
    let mut sent: Vec<usize> = Vec::with_capacity(raw.len());
    for (at, message) in raw.iter().enumerate() {
        let Message::Compaction(record) = message.as_ref() else {
            sent.push(at);
            continue;
        };
        let keep = record.keep.min(sent.len());
        let kept = sent.split_off(sent.len() - keep);
        for dropped in sent.drain(..) {
            fates[dropped] = Fate::Replaced(at);
        }
        let stubbed: HashSet<&str> = record.stubs.iter().map(|s| s.call_id.as_str()).collect();
        for &index in &kept {
            if let Message::Tool { call_id, .. } = raw[index].as_ref()
                && stubbed.contains(call_id.as_str())
            {
                fates[index] = Fate::Stubbed;
            }
        }
        sent.push(at);
        sent.extend(kept);
    }
    fates
}
