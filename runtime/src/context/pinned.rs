//! What a compaction never loses (CX3): re-stated in every compaction
//! record from cadre's own records — the goal, the verifier's gaps, the
//! todo list, the approved plan, the files changed, the commands run and
//! their exit codes, the agent's role and mode, the project instructions in
//! force — and never taken from the
//! model's prose, which may have dropped or bent them.

use super::Trail;
use crate::goal::Goal;
use crate::mode::Mode;
use crate::plan::lifecycle::IMPLEMENT_INSTRUCTION;
use sha2::{Digest, Sha256};

/// The most bytes of the latest user message a record repeats.
const USER_MESSAGE_BYTES: usize = 4_000;

/// The most bytes of an approved plan's implementation message a record
/// repeats: the plan is what the turn must not lose.
const PLAN_MESSAGE_BYTES: usize = 16_000;

/// What the host knows at a turn's start that a compaction re-states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinned {
    /// The agent's role (`main` for a session).
    pub role: String,
    /// The mode the turn runs in.
    pub mode: Mode,
    /// The session goal, as [`goal_state`] renders it.
    pub goal: Option<String>,
    /// The canonical plan file (a session's; a sub-agent has none): named
    /// with the approved plan's SHA-256 when the turn implements one.
    pub plan: Option<String>,
    /// The project instructions in force (CX5): the files and their hash.
    /// Their text stays in the system prompt, which no compaction touches;
    /// the record says they still hold.
    pub instructions: Option<String>,
}

impl Pinned {
    /// The record's state section, from this and the trail of the stored
    /// conversation (every message, compacted ones included).
    pub fn render(&self, trail: &Trail) -> String {
        let mut text = format!(
            "- Agent: role `{}`, mode `{}`.\n",
            self.role,
            self.mode.as_str()
        );
        if let Some(goal) = &self.goal {
            text.push_str(goal);
        }
        if let Some(instructions) = &self.instructions {
            text.push_str(&format!(
                "- Project instructions still in force (in the system prompt): {instructions}\n"
            ));
        }

        match trail.todo_list() {
            Some(list) if !list.is_empty() => {
                text.push_str("- Todo list (from your last todo_write):\n");
                for item in list {
                    text.push_str(&format!("  - [{}] {}\n", item.status, item.content));
                }
            }
            Some(_) | None => {}
        }
        let files = trail.changed_files();
        if !files.is_empty() {
            text.push_str(&format!(
                "- Files your calls wrote or edited: {}\n",
                files.join(", ")
            ));
        }
        let commands = trail.recent_commands();
        if !commands.is_empty() {
            text.push_str("- Recent commands (oldest first):\n");
            for line in commands {
                text.push_str(&format!("  - {line}\n"));
            }
        }
        let latest = trail.latest_user();
        let implementing = latest.and_then(|u| u.strip_prefix(IMPLEMENT_INSTRUCTION));
        if let Some(snapshot) = implementing {
            // The same hash `plan::freeze` gave the snapshot the user approved.
            let sha256: String = Sha256::digest(snapshot.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let file = self.plan.as_deref().unwrap_or("the plan file");
            text.push_str(&format!(
                "- This turn implements the approved plan (SHA-256 {sha256}, frozen from \
                 {file}); its snapshot is the start of the latest user message below.\n"
            ));
        }
        if let Some(user) = latest {
            text.push_str("- The latest user message, verbatim:\n");
            let cap = match implementing {
                Some(_) => PLAN_MESSAGE_BYTES,
                None => USER_MESSAGE_BYTES,
            };
            text.push_str(&crate::tool::truncate_middle(user, cap));
            text.push('\n');
        }
        text
    }
}

/// The goal's lines of a record: objective, status, budgets and use, the
/// verifier's last gaps.
pub fn goal_state(goal: &Goal) -> String {
    let mut text = format!(
        "- Session goal ({}, {}): {}\n",
        goal.status.as_str(),
        goal.reason.as_str(),
        goal.objective
    );
    let b = &goal.budgets;
    let u = &goal.usage;
    let limit = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
    text.push_str(&format!(
        "  Budgets: tokens {} of {}, turns {} of {}, seconds {} of {}.\n",
        u.tokens,
        limit(b.tokens),
        u.turns,
        limit(b.turns),
        u.seconds,
        limit(b.seconds)
    ));
    if !goal.gaps.gaps.is_empty() {
        text.push_str("  The verifier's last gaps:\n");
        for gap in &goal.gaps.gaps {
            text.push_str(&format!("  - {gap}\n"));
        }
    }
    text
}
