//! What a person asked to approve a file change sees: a unified diff of the
//! file as it is against the file as the call would leave it, bounded, with
//! the count of lines added and removed.
//!
//! Computed in the tool's task, and only when a person is asked (see
//! [`Tool::preview`](super::Tool::preview)); reading the file is the only
//! I/O, bounded by [`MAX_READ`]. A preview is shown, never trusted: the call
//! itself re-reads the file when it runs.

use std::path::Path;

use similar::TextDiff;

/// The most of a file a preview reads; past it, no diff is shown.
pub const MAX_READ: u64 = 1024 * 1024;

/// The most diff lines a preview keeps; the rest are counted.
pub const MAX_LINES: usize = 60;

/// The diff of writing `content` over the file at `path` (shown as
/// `shown`): every line new when there is no such file yet.
pub fn write(path: &Path, shown: &str, content: &str) -> Option<String> {
    let before = match read(path) {
        Read::Text(text) => text,
        Read::Missing => String::new(),
        Read::Unreadable(why) => return Some(format!("({shown}: {why}; no diff shown)")),
    };
    Some(diff(shown, &before, content))
}

/// The diff of replacing `old` with `new` (every occurrence when `all`, else
/// the first) in the file at `path`; `None` when the text does not occur
/// (the call will fail and say so).
pub fn edit(path: &Path, shown: &str, old: &str, new: &str, all: bool) -> Option<String> {
    let before = match read(path) {
        Read::Text(text) => text,
        Read::Missing => return None,
        Read::Unreadable(why) => return Some(format!("({shown}: {why}; no diff shown)")),
    };
    if old.is_empty() || !before.contains(old) {
        return None;
    }
    let after = if all {
        before.replace(old, new)
    } else {
        before.replacen(old, new, 1)
    };
    Some(diff(shown, &before, &after))
}

enum Read {
    Text(String),
    Missing,
    Unreadable(String),
}

fn read(path: &Path) -> Read {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Missing,
        Err(e) => return Read::Unreadable(e.to_string()),
        // A FIFO or a device would block the read, or never end.
        Ok(meta) if !meta.is_file() => return Read::Unreadable("not a regular file".into()),
        Ok(meta) if meta.len() > MAX_READ => {
            return Read::Unreadable(format!("{} bytes, too large to compare", meta.len()));
        }
        Ok(_) => {}
    }
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Read::Text(text),
            Err(_) => Read::Unreadable("not UTF-8 text".into()),
        },
        Err(e) => Read::Unreadable(e.to_string()),
    }
}

/// A unified diff of `before` and `after`, a summary line first, cut at
/// [`MAX_LINES`].
pub fn diff(shown: &str, before: &str, after: &str) -> String {
    let changes = TextDiff::from_lines(before, after);
    let (mut added, mut removed) = (0usize, 0usize);
    for change in changes.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let unified = changes
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    let lines: Vec<&str> = unified.lines().collect();
    let mut out = format!("{shown}: +{added} -{removed} lines\n");
    for line in lines.iter().take(MAX_LINES) {
        out.push_str(line);
        out.push('\n');
    }
    if lines.len() > MAX_LINES {
        out.push_str(&format!(
            "… {} more diff lines not shown\n",
            lines.len() - MAX_LINES
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_write_and_an_edit_show_what_changes_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        assert_eq!(
            write(&file, "a.txt", "one\n2\nthree\n").unwrap(),
            "a.txt: +1 -1 lines\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
        );
        let new = write(&dir.path().join("new.txt"), "new.txt", "hi\n").unwrap();
        assert!(new.starts_with("new.txt: +1 -0 lines\n"), "{new}");
        assert_eq!(
            edit(&file, "a.txt", "two", "TWO", false).unwrap(),
            "a.txt: +1 -1 lines\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
        );
        assert_eq!(edit(&file, "a.txt", "absent", "x", false), None);
        let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let cut = write(&file, "a.txt", &long).unwrap();
        assert!(cut.starts_with("a.txt: +500 -3 lines\n"), "{cut}");
        assert_eq!(cut.lines().count(), MAX_LINES + 2, "{cut}");
        assert!(cut.ends_with("more diff lines not shown\n"), "{cut}");
        // A FIFO a repository planted must not block the prompt.
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert_eq!(
            write(&fifo, "fifo", "x").unwrap(),
            "(fifo: not a regular file; no diff shown)"
        );
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(
            write(&file, "a.txt", "x").unwrap(),
            "(a.txt: not UTF-8 text; no diff shown)"
        );
    }
}
