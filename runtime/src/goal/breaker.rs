//! The no-progress breaker (G8): a goal that keeps answering the same
//! thing, or stops using tools, or repeats its last turn's calls with the
//! same results, is not making progress.
//!
//! Each such turn adds one to a count; a turn that does something new
//! clears it, and so does a person's message. While the count is non-zero
//! the next continuation carries a "do not spin" nudge; at the limit the
//! goal pauses.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::message::Message;

/// What the breaker needs to know of one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnTrace {
    /// A digest of the final reply.
    pub reply: String,
    /// Tool calls made.
    pub calls: usize,
    /// A digest of every call (name, arguments) and its result, in order.
    pub calls_digest: String,
}

impl TurnTrace {
    /// The trace of a turn from the messages it recorded (the assistant's
    /// replies and the tool results, in order).
    pub fn of(messages: &[std::sync::Arc<Message>]) -> Self {
        let mut tracing = Tracing::default();
        for message in messages {
            tracing.push(message);
        }
        tracing.finish()
    }
}

/// A turn's [`TurnTrace`] in the making, taking its messages as they are
/// recorded: the last reply and a running digest, whatever the turn's
/// length.
#[derive(Debug, Clone, Default)]
pub struct Tracing {
    reply: String,
    calls: usize,
    digest: Sha256,
}

impl Tracing {
    /// Takes the turn's next message.
    pub fn push(&mut self, message: &Message) {
        match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                self.reply.clone_from(content);
                for call in tool_calls {
                    self.calls += 1;
                    self.digest.update(call.name.as_bytes());
                    self.digest.update([0]);
                    self.digest.update(call.arguments.as_bytes());
                    self.digest.update([0]);
                }
            }
            Message::Tool { content, .. } => {
                self.digest.update(content.as_bytes());
                self.digest.update([0]);
            }
            Message::User { .. } | Message::Compaction(_) => {}
        }
    }

    /// The trace of the messages taken.
    pub fn finish(self) -> TurnTrace {
        TurnTrace {
            reply: hex(&Sha256::digest(self.reply.trim().as_bytes())),
            calls: self.calls,
            calls_digest: hex(&self.digest.finalize()),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The breaker's memory, stored with the goal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    /// Consecutive turns without progress.
    pub count: u32,
    /// The previous turn's reply digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reply: Option<String>,
    /// The previous turn's calls-and-results digest (when it made calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_calls: Option<String>,
}

/// What one observed turn means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerVerdict {
    /// Progress: the count is back to zero.
    Progress,
    /// No progress, below the limit: nudge in the next continuation.
    Nudge(u32),
    /// No progress, at the limit: pause.
    Trip,
}

impl Breaker {
    /// Counts one turn against `limit`.
    pub fn observe(&mut self, trace: &TurnTrace, limit: u32) -> BreakerVerdict {
        let same_reply = self.last_reply.as_deref() == Some(trace.reply.as_str());
        let no_calls = trace.calls == 0;
        let same_calls = !no_calls && self.last_calls.as_deref() == Some(&trace.calls_digest);
        self.last_reply = Some(trace.reply.clone());
        self.last_calls = (!no_calls).then(|| trace.calls_digest.clone());
        if !(same_reply || no_calls || same_calls) {
            self.count = 0;
            return BreakerVerdict::Progress;
        }
        self.count += 1;
        if self.count >= limit {
            BreakerVerdict::Trip
        } else {
            BreakerVerdict::Nudge(self.count)
        }
    }

    /// A person's message: start counting afresh.
    pub fn reset(&mut self) {
        *self = Breaker::default();
    }
}
