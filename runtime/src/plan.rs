//! The plan document (PL2–PL4): entering Plan with a backup of the old plan,
//! and freezing the plan for approval; [`lifecycle`] decides what answers do.

pub mod lifecycle;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Snapshots larger than this are cut, with a note (PL4).
pub const SNAPSHOT_LIMIT: usize = 512 * 1024;

/// The backup name an existing plan is moved to on entry (PL2).
pub const BACKUP_NAME: &str = ".plan.md.plan-entry-backup";

/// Why the plan cannot be frozen (the model reads this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// There is no plan file yet. Retryable once the model has written
    /// it.
    #[error("there is no plan yet: write it to {0} first, beginning with a non-empty `## Summary`")]
    Missing(String),
    /// The file does not begin with a non-empty `## Summary`. Retryable
    /// once the model has fixed it.
    #[error(
        "the plan at {0} must begin with a `## Summary` heading followed by a non-empty summary"
    )]
    NoSummary(String),
    /// The file could not be read. Not retryable as is: the file or its
    /// permissions must change.
    #[error("the plan at {path} cannot be read: {message}")]
    Unreadable {
        /// The plan file.
        path: String,
        /// Why.
        message: String,
    },
}

/// The frozen plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The text, cut at [`SNAPSHOT_LIMIT`] with a note when longer.
    pub text: String,
    /// The SHA-256 of `text`, hex.
    pub sha256: String,
    /// Whether it was cut.
    pub truncated: bool,
}

/// Freezes the plan file: it must begin with a non-empty `## Summary`.
pub fn freeze(plan_file: &Path) -> Result<Snapshot, PlanError> {
    let shown = plan_file.display().to_string();
    let text = match std::fs::read_to_string(plan_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PlanError::Missing(shown));
        }
        Err(e) => {
            return Err(PlanError::Unreadable {
                path: shown,
                message: e.to_string(),
            });
        }
    };
    if !has_summary(&text) {
        return Err(PlanError::NoSummary(shown));
    }
    Ok(snapshot_of(text))
}

/// Cuts and hashes a plan's text.
pub fn snapshot_of(text: String) -> Snapshot {
    let (text, truncated) = if text.len() > SNAPSHOT_LIMIT {
        let mut end = SNAPSHOT_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let omitted = text.len() - end;
        let mut cut = text[..end].to_string();
        cut.push_str(&format!(
            "\n\n[The plan was truncated at 512 KiB for approval: {omitted} bytes omitted.]\n"
        ));
        (cut, true)
    } else {
        (text, false)
    };
    let sha256 = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Snapshot {
        text,
        sha256,
        truncated,
    }
}

/// Whether the text begins (after blank lines) with `## Summary` followed
/// by some text before the next heading.
pub fn has_summary(text: &str) -> bool {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    if lines.next().map(str::trim) != Some("## Summary") {
        return false;
    }
    lines
        .take_while(|l| !l.trim_start().starts_with('#'))
        .any(|l| !l.trim().is_empty())
}

/// Where an existing plan is kept while Plan mode is entered again.
pub fn backup_path(plan_file: &Path) -> PathBuf {
    plan_file.with_file_name(BACKUP_NAME)
}

/// Enters Plan mode around `commit` (the admission or mode change): an
/// existing plan file is first moved to the backup; if `commit` fails, the
/// backup is moved back and the error returned. On success, the backup's
/// path (when there was a plan) and the commit's value.
pub fn enter<T, E>(
    plan_file: &Path,
    commit: impl FnOnce() -> Result<T, E>,
) -> Result<(Option<PathBuf>, T), EntryError<E>> {
    let backup = backup_path(plan_file);
    let moved = if plan_file.exists() {
        std::fs::rename(plan_file, &backup).map_err(|e| EntryError::Backup(e.to_string()))?;
        true
    } else {
        false
    };
    match commit() {
        Ok(value) => Ok((moved.then_some(backup), value)),
        Err(error) => {
            if moved {
                // Restoring is best effort: if it fails the plan is still in the backup.
                let _ = std::fs::rename(&backup, plan_file);
            }
            Err(EntryError::Commit(error))
        }
    }
}

/// Why entering Plan failed.
#[derive(Debug, PartialEq, Eq)]
pub enum EntryError<E> {
    /// The old plan could not be moved aside.
    Backup(String),
    /// The entry itself failed; the old plan was restored.
    Commit(E),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_summary(text: &str, expected: bool) {
        assert_eq!(has_summary(text), expected, "{text:?}");
    }

    #[test]
    fn a_plan_must_begin_with_a_non_empty_summary() {
        check_summary("## Summary\n\nAdd a module.\n", true);
        check_summary("\n\n## Summary\nAdd a module.\n## Approach\n", true);
        check_summary("## Summary\n\n## Approach\nx\n", false);
        check_summary("## Summary\n", false);
        check_summary("# Plan\n## Summary\nx\n", false);
        check_summary("Summary: x\n", false);
        check_summary("", false);
    }

    #[test]
    fn a_large_plan_is_cut_at_512_kib_with_a_note_and_hashed_as_frozen() {
        let small = snapshot_of("## Summary\n\nx\n".into());
        assert!(!small.truncated);
        assert_eq!(small.sha256.len(), 64);
        let big = "## Summary\n\nx\n".to_string() + &"é".repeat(300 * 1024);
        let frozen = snapshot_of(big.clone());
        assert!(frozen.truncated);
        assert!(frozen.text.len() < big.len());
        assert!(
            frozen
                .text
                .contains("[The plan was truncated at 512 KiB for approval:"),
            "note"
        );
        assert!(frozen.text.starts_with("## Summary"));
        let expected: String = Sha256::digest(frozen.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(frozen.sha256, expected, "the hash is of the frozen text");
    }

    #[test]
    fn entry_backs_up_the_old_plan_and_restores_it_when_entry_fails() {
        let dir = tempfile::TempDir::new().expect("dir");
        let plan = dir.path().join("plan.md");
        std::fs::write(&plan, "## Summary\n\nold\n").expect("old plan");

        let failed = enter::<(), &str>(&plan, || Err("the store is read-only"));
        assert!(matches!(
            failed,
            Err(EntryError::Commit("the store is read-only"))
        ));
        assert_eq!(
            std::fs::read_to_string(&plan).expect("restored"),
            "## Summary\n\nold\n"
        );
        assert!(!backup_path(&plan).exists());

        let (backup, ()) = enter::<(), ()>(&plan, || Ok(())).expect("entered");
        assert_eq!(backup.as_deref(), Some(backup_path(&plan).as_path()));
        assert!(!plan.exists(), "a fresh plan starts empty");
        assert_eq!(
            std::fs::read_to_string(backup_path(&plan)).expect("backup"),
            "## Summary\n\nold\n"
        );

        let (none, ()) = enter::<(), ()>(&plan, || Ok(())).expect("no plan to back up");
        assert_eq!(none, None);
    }

    #[test]
    fn freezing_names_what_is_missing() {
        let dir = tempfile::TempDir::new().expect("dir");
        let plan = dir.path().join("plan.md");
        assert!(matches!(freeze(&plan), Err(PlanError::Missing(_))));
        std::fs::write(&plan, "no summary here").expect("write");
        assert!(matches!(freeze(&plan), Err(PlanError::NoSummary(_))));
        std::fs::write(&plan, "## Summary\n\nok\n").expect("write");
        assert_eq!(freeze(&plan).expect("frozen").text, "## Summary\n\nok\n");
    }
}
