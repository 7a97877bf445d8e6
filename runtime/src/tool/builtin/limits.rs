//! How much the file and search tools read and return.

/// The bounds of `read_file`, `grep`, `glob` and `list_dir`. A tool that
/// stops at a bound says so in its output, and how to read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// The most bytes `read_file` holds in memory and returns for one call;
    /// it stops at the last whole line before it. Default 64 KiB.
    pub read_bytes: usize,
    /// The lines `read_file` returns when the call gives no `limit`.
    /// Default 2000.
    pub read_lines: usize,
    /// Files larger than this are not searched by `grep` (they are counted
    /// and named in the note). Default 8 MiB.
    pub grep_file_bytes: u64,
    /// The most matching lines `grep` returns. Default 500.
    pub grep_matches: usize,
    /// Longer matching lines are cut in the middle. Default 300 bytes.
    pub grep_line_bytes: usize,
    /// The most paths `glob` returns. Default 500.
    pub glob_files: usize,
    /// The most entries `list_dir` returns. Default 1000.
    pub list_entries: usize,
    /// Files larger than this are not edited by `edit_file`, which reads
    /// them whole. Default 16 MiB.
    pub edit_file_bytes: u64,
}

impl Default for FileLimits {
    fn default() -> Self {
        Self {
            read_bytes: 64 * 1024,
            read_lines: 2000,
            grep_file_bytes: 8 * 1024 * 1024,
            grep_matches: 500,
            grep_line_bytes: 300,
            glob_files: 500,
            list_entries: 1000,
            edit_file_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The note a search or listing ends with when it left files out because
/// a read deny rule covers them.
pub(super) fn withheld_note(withheld: usize) -> Option<String> {
    (withheld > 0).then(|| {
        format!(
            "[{withheld} file{} withheld: a permission rule denies reading {}]",
            if withheld == 1 { "" } else { "s" },
            if withheld == 1 { "it" } else { "them" }
        )
    })
}
