//! A range of a file's lines, read with bounded memory.
//!
//! The file is streamed: lines before the range are counted and dropped,
//! and reading stops at the range's end or at the byte cap, whichever comes
//! first, so a 2 GB file (or a 2 GB line) costs no more than the cap.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::OFlags;

/// A regular file this small is read where the call runs rather than on
/// the blocking pool: from the page cache that takes microseconds, less
/// than the two thread hand-offs the pool costs.
pub(super) const INLINE_BYTES: u64 = 128 * 1024;

/// How much [`excerpt`] reads at a time.
const BUFFER: usize = 64 * 1024;

/// What [`read_small`] did.
pub(super) enum Small {
    /// It read the file where the call runs.
    Read(Excerpt),
    /// The file is not a small regular file, or grew past
    /// [`INLINE_BYTES`] while it was read: read it on the blocking pool,
    /// from this file when it was opened (rewound, waiting allowed).
    Elsewhere(Option<File>),
}

/// [`excerpt`] of a small regular file, where the call runs; anything else
/// is left to the blocking pool. The path is looked at before it is opened
/// (opening a FIFO, even without waiting, would wake a writer waiting on
/// it), opened and read without waiting (it may have been replaced since,
/// and a read that would wait goes to the pool), at most [`INLINE_BYTES`]
/// and a byte far. A size of 0 is not small: the files of /proc say 0 and
/// go on.
pub(super) fn read_small(
    path: &Path,
    first: usize,
    limit: usize,
    cap: usize,
) -> std::io::Result<Small> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() || meta.len() == 0 || meta.len() > INLINE_BYTES {
        return Ok(Small::Elsewhere(None));
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
    {
        Ok(file) => file,
        // A lease another process holds: wait for it on the pool.
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
            return Ok(Small::Elsewhere(None));
        }
        Err(err) => return Err(err),
    };
    // Handed to the pool, the file may be waited on again.
    let elsewhere = |mut file: File, rewind: bool| -> std::io::Result<Small> {
        rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
        if rewind {
            file.rewind()?;
        }
        Ok(Small::Elsewhere(Some(file)))
    };
    if !file.metadata()?.is_file() {
        return elsewhere(file, false);
    }
    // A buffer the file's size: freeing a large one makes the allocator
    // consolidate its free lists.
    let buffer = usize::try_from(meta.len() + 1).map_or(BUFFER, |n| n.clamp(4096, BUFFER));
    let mut bounded = (&file).take(INLINE_BYTES + 1);
    let read = match excerpt_of(&mut bounded, buffer, first, limit, cap) {
        // A file that would make the read wait (a network or FUSE
        // filesystem's): read it on the pool.
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
            return elsewhere(file, true);
        }
        read => read?,
    };
    if bounded.limit() == 0 {
        return elsewhere(file, true);
    }
    Ok(Small::Read(read))
}

/// What [`excerpt`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Excerpt {
    /// The selected lines, whole (but for a first line longer than the cap).
    pub text: Vec<u8>,
    /// The first line asked for (1-based).
    pub first: usize,
    /// How many whole lines `text` holds.
    pub lines: usize,
    /// Why reading stopped.
    pub stop: Stop,
}

/// Why [`excerpt`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The file ended; it has this many lines.
    End { total: usize },
    /// The line limit was reached and the file goes on.
    Lines,
    /// The next line would pass the byte cap; when `cut` the first line
    /// alone passes it and `text` holds its first bytes.
    Bytes { cut: bool },
}

/// Reads up to `limit` lines from line `first` (1-based) of `file` (the
/// file at `path` when `None`), holding at most `cap` bytes of them.
pub(super) fn excerpt(
    path: &Path,
    file: Option<File>,
    first: usize,
    limit: usize,
    cap: usize,
) -> std::io::Result<Excerpt> {
    let file = match file {
        Some(file) => file,
        None => File::open(path)?,
    };
    excerpt_of(file, BUFFER, first, limit, cap)
}

/// [`excerpt`] of what `file` reads, `buffer` bytes at a time.
fn excerpt_of(
    file: impl Read,
    buffer: usize,
    first: usize,
    limit: usize,
    cap: usize,
) -> std::io::Result<Excerpt> {
    let mut reader = BufReader::with_capacity(buffer, file);
    let mut out = Excerpt {
        text: Vec::new(),
        first,
        lines: 0,
        stop: Stop::End { total: 0 },
    };
    // The current line's number, and its bytes so far when it is selected.
    let mut line = 1usize;
    let mut current: Vec<u8> = Vec::new();
    let mut partial = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            if partial && line >= first && out.lines < limit {
                out.text.append(&mut current);
                out.lines += 1;
            }
            let total = if partial { line } else { line - 1 };
            out.stop = Stop::End { total };
            return Ok(out);
        }
        let mut used = 0;
        while used < buf.len() {
            let chunk = &buf[used..];
            let newline = chunk.iter().position(|&b| b == b'\n');
            let end = newline.map_or(chunk.len(), |at| at + 1);
            if line >= first {
                if out.lines >= limit {
                    out.stop = Stop::Lines;
                    return Ok(out);
                }
                if out.text.len() + current.len() + end > cap {
                    let cut = out.lines == 0;
                    if cut {
                        let room = cap.saturating_sub(current.len()).min(end);
                        current.extend_from_slice(&chunk[..room]);
                        out.text = current;
                    }
                    out.stop = Stop::Bytes { cut };
                    return Ok(out);
                }
                current.extend_from_slice(&chunk[..end]);
            }
            used += end;
            partial = newline.is_none();
            if newline.is_some() {
                if line >= first {
                    out.text.append(&mut current);
                    out.lines += 1;
                }
                line += 1;
            }
        }
        reader.consume(used);
    }
}

impl Excerpt {
    /// The text for the model: the lines, then a note saying where reading
    /// stopped and how to read on. `Err` when the file is not UTF-8 text.
    pub(super) fn render(self, cap: usize) -> Result<String, String> {
        let mut bytes = self.text;
        if let Err(err) = std::str::from_utf8(&bytes) {
            // A line cut at the cap may end inside a character.
            let cut_inside =
                matches!(self.stop, Stop::Bytes { cut: true }) && err.error_len().is_none();
            if !cut_inside {
                return Err("it is not a UTF-8 text file".into());
            }
            bytes.truncate(err.valid_up_to());
        }
        let mut text = String::from_utf8(bytes).map_err(|_| "it is not a UTF-8 text file")?;
        let last = self.first + self.lines.max(1) - 1;
        let range = if last == self.first {
            format!("line {last}")
        } else {
            format!("lines {}-{last}", self.first)
        };
        let note = match self.stop {
            Stop::End { total } if self.lines == 0 && total < self.first && self.first > 1 => {
                Some(format!(
                    "[offset {} is past the end: the file has {total} line{}]",
                    self.first,
                    if total == 1 { "" } else { "s" }
                ))
            }
            Stop::End { .. } => None,
            Stop::Lines => Some(format!(
                "[showing {range}; the file goes on: read on with offset={}]",
                last + 1
            )),
            Stop::Bytes { cut: false } => Some(format!(
                "[cut at {cap} bytes: showing {range}; read on with offset={}]",
                last + 1
            )),
            Stop::Bytes { cut: true } => Some(format!(
                "[line {} is longer than {cap} bytes: showing its first {} bytes; the next \
                 line is offset={}]",
                self.first,
                text.len(),
                self.first + 1
            )),
        };
        if let Some(note) = note {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&note);
        }
        Ok(text)
    }
}
