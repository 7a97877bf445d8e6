//! The built-in tools (T4).
//!
//! # Layout
//! - `files`: `read_file`, `list_dir`, `write_file`, `edit_file`.
//! - `excerpt`: a range of a file's lines, read with bounded memory.
//! - `limits`: [`FileLimits`], how much the file and search tools read and
//!   return.
//! - `search`: `glob`, `grep`.
//! - `bash`: `bash`, a shell command in the workspace under the sandbox
//!   (`crate::sandbox`), killed with its process group when it ends, on
//!   timeout or cancel.
//! - `process`: `process`, long-running commands cadre supervises
//!   (`crate::process`): start, list, output, wait, stop.
//! - `todo`: `todo_write`, the agent's task list in the session directory.
//! - `agent`: `agent`, delegation to sub-agents through the host.
//! - `workflow`: `workflow` (Operate only), delegation of a multi-step plan
//!   to the workflow engine through the host.
//! - `plan`: `exit_plan_mode` (Plan only) and `enter_plan_mode` (Work only,
//!   when the host allows it), the plan lifecycle through the host.
//! - `check`: `run_check`, a check command (the project's build and tests)
//!   that cannot change the project; registered only for the goal verifier.
//! - `goal`: `create_goal`, `get_goal`, `update_goal`, the session's goal
//!   through the host (sessions only).
//!
//! Argument names are part of the contract: `path` for every file tool,
//! `content` for `write_file`, `old_string`/`new_string` for `edit_file`,
//! `command` for `bash`, `pattern` for `glob` and `grep`.

mod agent;
mod bash;
mod check;
mod excerpt;
mod files;
mod goal;
mod limits;
mod plan;
mod process;
mod search;
mod todo;
mod workflow;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

pub use agent::AGENT_TOOL;
pub use check::{RUN_CHECK, RunCheck};
pub use files::{check_edit, replace_exact};
pub use limits::FileLimits;
pub use plan::ENTER_PLAN_TOOL;
pub use process::PROCESS_TOOL;
pub use todo::TodoItem;
pub use workflow::WORKFLOW_TOOL;

use super::definition::{Tool, ToolError};

/// Every built-in tool, in the order the model is shown them, with the
/// default [`FileLimits`].
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    builtin_tools_with(FileLimits::default())
}

/// Every built-in tool, the file and search tools bounded by `limits`.
pub fn builtin_tools_with(limits: FileLimits) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(files::ReadFile::new(limits)),
        Arc::new(files::ListDir::new(limits)),
        Arc::new(search::Glob::new(limits)),
        Arc::new(search::Grep::new(limits)),
        Arc::new(files::WriteFile::new()),
        Arc::new(files::EditFile::new(limits)),
        Arc::new(bash::Bash::new()),
        Arc::new(process::Process::new()),
        Arc::new(todo::TodoWrite::new()),
        Arc::new(agent::Agent::new()),
        Arc::new(workflow::Workflow::new()),
        Arc::new(plan::ExitPlanMode::new()),
        Arc::new(plan::EnterPlanMode::new()),
        Arc::new(goal::CreateGoal::new()),
        Arc::new(goal::GetGoal::new()),
        Arc::new(goal::UpdateGoal::new()),
    ]
}

/// The most text one call returns to the model; longer output is cut in the
/// middle with a note, so both the start and the end stay visible.
pub(crate) const MAX_OUTPUT: usize = 64 * 1024;

/// A string argument the schema requires.
fn required_str<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::invalid(format!("missing string argument '{name}'")))
}

fn optional_str<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// `path` shown relative to the workspace root when it is inside it.
fn shown(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// Cuts `text` to at most `max` bytes, keeping its head and tail and saying
/// how much was left out.
pub fn truncate_middle(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let keep = max / 2;
    let mut head_end = keep;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - keep;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}
