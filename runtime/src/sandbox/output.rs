//! Bounded capture of a command's output: a head, a tail, and a count.
//!
//! Memory stays bounded whatever the command prints (`cat /dev/zero`):
//! bytes past the head go to a fixed-size tail, and the ones that fall out
//! of the tail are only counted.

use std::collections::VecDeque;

/// One stream's output, kept as its first and last bytes.
#[derive(Debug, Clone)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl Capture {
    /// Keeps at most `head_max` bytes from the start and `tail_max` from the end.
    pub fn new(head_max: usize, tail_max: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max,
            total: 0,
        }
    }

    /// Adds bytes as they arrive.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_max - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_max..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Every byte seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes seen but neither in the head nor in the tail.
    pub fn dropped(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// Nothing was printed.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The head, a note of how much was left out (if anything), and the
    /// tail, as text (invalid UTF-8 replaced).
    pub fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let dropped = self.dropped();
        if dropped > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[... {dropped} bytes omitted ...]\n"));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}
