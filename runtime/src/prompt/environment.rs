//! The environment block (CX5): what an agent should know of where it
//! runs, gathered once when it starts, so its system prompt stays the same
//! from turn to turn (prompt caches key on the prefix).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where an agent runs, as its system prompt says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// Today, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The operating system and architecture.
    pub os: String,
    /// The shell its commands run in.
    pub shell: String,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The git branch (or `detached at <short id>`), when it is a repository.
    pub git_branch: Option<String>,
    /// `git status --short`, at most [`STATUS_LINES`] lines and a count of
    /// the rest; `None` outside a repository, empty when clean.
    pub git_status: Option<Vec<String>>,
    /// The sandbox commands run under.
    pub sandbox: String,
}

/// The most status lines shown.
pub const STATUS_LINES: usize = 20;

impl Environment {
    /// The environment of `workspace` now, `sandbox` describing the walls.
    pub fn gather(workspace: &Path, sandbox: String) -> Self {
        let (git_branch, git_status) = git(workspace).unzip();
        Self {
            date: civil_date(SystemTime::now()),
            os: format!("{} ({})", std::env::consts::OS, std::env::consts::ARCH),
            shell: "bash (the bash tool runs each command in a fresh shell)".into(),
            workspace: workspace.to_path_buf(),
            git_branch,
            git_status,
            sandbox,
        }
    }

    /// The block, as sent.
    pub fn render(&self) -> String {
        let mut out = String::from("<environment>\n");
        out.push_str(&format!("date: {}\n", self.date));
        out.push_str(&format!("os: {}\n", self.os));
        out.push_str(&format!("shell: {}\n", self.shell));
        out.push_str(&format!("workspace: {}\n", self.workspace.display()));
        match (&self.git_branch, &self.git_status) {
            (Some(branch), Some(status)) => {
                out.push_str(&format!("git branch: {branch}\n"));
                if status.is_empty() {
                    out.push_str("git status: clean\n");
                } else {
                    out.push_str("git status (at the start):\n");
                    for line in status {
                        out.push_str(&format!("  {line}\n"));
                    }
                }
            }
            _ => out.push_str("git: not a repository\n"),
        }
        out.push_str(&format!("sandbox: {}\n", self.sandbox));
        out.push_str("</environment>");
        out
    }
}

/// The branch and the short status of the repository holding `workspace`.
fn git(workspace: &Path) -> Option<(String, Vec<String>)> {
    let repo = git2::Repository::discover(workspace).ok()?;
    let branch = match repo.head() {
        Ok(head) if head.is_branch() => head.shorthand().unwrap_or("HEAD").to_string(),
        Ok(head) => match head.target() {
            Some(id) => format!("detached at {}", &id.to_string()[..7]),
            None => "HEAD".to_string(),
        },
        // A repository with no commit yet.
        Err(_) => "(no commits yet)".to_string(),
    };
    let mut options = git2::StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .exclude_submodules(true);
    let statuses = repo.statuses(Some(&mut options)).ok()?;
    let mut lines: Vec<String> = statuses
        .iter()
        .take(STATUS_LINES)
        .map(|entry| format!("{} {}", short(entry.status()), entry.path().unwrap_or("?")))
        .collect();
    if statuses.len() > STATUS_LINES {
        lines.push(format!("… and {} more", statuses.len() - STATUS_LINES));
    }
    Some((branch, lines))
}

/// `git status --short`'s two letters.
fn short(status: git2::Status) -> &'static str {
    use git2::Status as S;
    if status.contains(S::WT_NEW) {
        "??"
    } else if status.intersects(S::INDEX_NEW) {
        "A "
    } else if status.intersects(S::INDEX_DELETED | S::WT_DELETED) {
        " D"
    } else if status.intersects(S::INDEX_RENAMED | S::WT_RENAMED) {
        "R "
    } else if status.intersects(S::CONFLICTED) {
        "UU"
    } else {
        " M"
    }
}

/// `time` as a UTC calendar date (Howard Hinnant's days-to-civil).
pub fn civil_date(time: SystemTime) -> String {
    let days = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
