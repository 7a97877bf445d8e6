//! A process's output as a ring of its last bytes, read by cursor.
//!
//! A long-running process prints without end (a dev server's log); cadre
//! keeps only its last `capacity` bytes, and numbers every byte by its
//! offset since the process started, so a reader that kept a cursor reads
//! on where it left off and learns how much fell out of the ring meanwhile.

use std::collections::VecDeque;

/// The last bytes a process printed (stdout and stderr interleaved as
/// they arrived).
#[derive(Debug, Clone)]
pub struct Ring {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// The offset of `bytes[0]` since the process started: everything
    /// before it was dropped.
    start: u64,
}

/// What one read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The bytes read, as text (invalid UTF-8 replaced).
    pub text: String,
    /// The offset of the first byte returned.
    pub from: u64,
    /// The cursor to read on from.
    pub next: u64,
    /// Bytes between the cursor asked for and `from` that the ring no
    /// longer holds.
    pub skipped: u64,
    /// Bytes after `next` not returned because of the read's limit.
    pub more: u64,
}

impl Ring {
    /// An empty ring keeping at most `capacity` bytes (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            capacity: capacity.max(1),
            start: 0,
        }
    }

    /// Adds bytes as they arrive, dropping the oldest past the capacity.
    pub fn push(&mut self, data: &[u8]) {
        let data = match data.len().checked_sub(self.capacity) {
            Some(over) => {
                self.start += (self.bytes.len() + over) as u64;
                self.bytes.clear();
                &data[over..]
            }
            None => data,
        };
        let overflow = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.start += overflow as u64;
        self.bytes.extend(data);
    }

    /// The offset one past the last byte printed: everything printed so far.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Up to `max` bytes from `cursor` on (from the oldest kept byte when
    /// the cursor fell out of the ring; nothing when it is past the end).
    pub fn read(&self, cursor: u64, max: usize) -> Chunk {
        let from = cursor.clamp(self.start, self.end());
        let offset = (from - self.start) as usize;
        let take = max.min(self.bytes.len() - offset);
        let bytes: Vec<u8> = self.bytes.range(offset..offset + take).copied().collect();
        Chunk {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            from,
            next: from + take as u64,
            skipped: from - cursor.min(from),
            more: (self.bytes.len() - offset - take) as u64,
        }
    }

    /// The last `max` bytes: a tail for a reader with no cursor.
    pub fn tail(&self, max: usize) -> Chunk {
        let from = self.end().saturating_sub(max as u64).max(self.start);
        let mut chunk = self.read(from, max);
        chunk.skipped = 0;
        chunk
    }

    /// The text from `cursor` on as one string (invalid UTF-8 replaced),
    /// for a readiness pattern to search; and the offset it starts at.
    pub fn text_from(&self, cursor: u64) -> (String, u64) {
        let chunk = self.read(cursor, usize::MAX);
        (chunk.text, chunk.from)
    }
}

#[cfg(test)]
mod tests;
