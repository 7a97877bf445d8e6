//! How large and how long one model response may be.
//!
//! A server that streams forever (text, reasoning, tool-call arguments, or
//! one line that never ends) would otherwise grow the process without bound.

use std::time::Duration;

use super::ModelError;

/// Bounds on one model response; past either, the response is abandoned
/// with [`ModelError::Limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Bytes of text, reasoning and tool-call arguments together.
    pub max_bytes: usize,
    /// Wall time from sending the request to the end of the response.
    pub max_duration: Duration,
}

impl Default for ResponseLimits {
    /// 8 MiB and 600 s.
    fn default() -> Self {
        Self {
            max_bytes: 8 * 1024 * 1024,
            max_duration: Duration::from_secs(600),
        }
    }
}

impl ResponseLimits {
    /// The most bytes one event (or a whole non-streamed body) may take on
    /// the wire before it is parsed: room for the content limit with every
    /// byte escaped, plus the JSON around it.
    pub fn max_wire_bytes(&self) -> u64 {
        (self.max_bytes as u64).saturating_mul(2) + 64 * 1024
    }

    /// The error for content past [`ResponseLimits::max_bytes`].
    pub fn too_large(&self) -> ModelError {
        ModelError::Limit(format!(
            "the response carried more than {} of text, reasoning and tool-call arguments",
            size(self.max_bytes as u64)
        ))
    }

    /// The error for an event (or body) past [`ResponseLimits::max_wire_bytes`].
    pub fn too_large_on_the_wire(&self) -> ModelError {
        ModelError::Limit(format!(
            "one event of the response took more than {} on the wire",
            size(self.max_wire_bytes())
        ))
    }

    /// The error for a response past [`ResponseLimits::max_duration`].
    pub fn too_long(&self) -> ModelError {
        ModelError::Limit(format!(
            "the response took longer than {} s",
            self.max_duration.as_secs_f64()
        ))
    }
}

/// `8 MiB`, `12 KiB`, `100 bytes`.
fn size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}
