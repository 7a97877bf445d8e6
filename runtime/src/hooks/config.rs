//! `[[hooks.EVENT]]` in a configuration file.

use serde::{Deserialize, Serialize};

/// A hook with no `timeout` gets this many seconds.
pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 30;

/// The points a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool call runs, after the rules: may deny it or have a
    /// person asked.
    PreToolUse,
    /// After a tool call ran: may add context for the model.
    PostToolUse,
    /// A person's message is admitted: may refuse it or add context.
    UserPromptSubmit,
    /// A session started (or resumed).
    SessionStart,
    /// A session's turn ended: may keep it working.
    Stop,
    /// A sub-agent's turn ended: may keep it working.
    SubagentStop,
    /// A workflow step's agent answered: may keep it working.
    StepStop,
    /// A conversation is about to be compacted.
    PreCompact,
}

impl HookEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [HookEvent; 8] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionStart,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::StepStop,
        HookEvent::PreCompact,
    ];

    /// The name in config and in the event's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::SessionStart => "session_start",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStop => "subagent_stop",
            HookEvent::StepStop => "step_stop",
            HookEvent::PreCompact => "pre_compact",
        }
    }

    /// Whether a failing hook of this event denies (fails closed) rather
    /// than being reported.
    pub fn fails_closed(self) -> bool {
        match self {
            HookEvent::PreToolUse => true,
            HookEvent::PostToolUse
            | HookEvent::UserPromptSubmit
            | HookEvent::SessionStart
            | HookEvent::Stop
            | HookEvent::SubagentStop
            | HookEvent::StepStop
            | HookEvent::PreCompact => false,
        }
    }
}

/// One configured hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// Which calls it runs for, in rule syntax (`bash`, `write_file(migrations/**)`,
    /// `bash(cargo test:*)`, `mcp_*`); every call when absent. Read only
    /// for `pre_tool_use` and `post_tool_use`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command line, run with `bash -c` in the workspace.
    pub command: String,
    /// Seconds it may take; past them it is killed and counts as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

impl HookSpec {
    /// Its timeout in force.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT_SECS).max(1))
    }
}

/// Every hook configured, by event (`[hooks]`). Layers add up: the user's
/// hooks, then a trusted project's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSet {
    /// `[[hooks.pre_tool_use]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<HookSpec>,
    /// `[[hooks.post_tool_use]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_tool_use: Vec<HookSpec>,
    /// `[[hooks.user_prompt_submit]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_prompt_submit: Vec<HookSpec>,
    /// `[[hooks.session_start]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_start: Vec<HookSpec>,
    /// `[[hooks.stop]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<HookSpec>,
    /// `[[hooks.subagent_stop]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagent_stop: Vec<HookSpec>,
    /// `[[hooks.step_stop]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_stop: Vec<HookSpec>,
    /// `[[hooks.pre_compact]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_compact: Vec<HookSpec>,
}

impl HookSet {
    /// The hooks of one event.
    pub fn of(&self, event: HookEvent) -> &[HookSpec] {
        match event {
            HookEvent::PreToolUse => &self.pre_tool_use,
            HookEvent::PostToolUse => &self.post_tool_use,
            HookEvent::UserPromptSubmit => &self.user_prompt_submit,
            HookEvent::SessionStart => &self.session_start,
            HookEvent::Stop => &self.stop,
            HookEvent::SubagentStop => &self.subagent_stop,
            HookEvent::StepStop => &self.step_stop,
            HookEvent::PreCompact => &self.pre_compact,
        }
    }

    fn of_mut(&mut self, event: HookEvent) -> &mut Vec<HookSpec> {
        match event {
            HookEvent::PreToolUse => &mut self.pre_tool_use,
            HookEvent::PostToolUse => &mut self.post_tool_use,
            HookEvent::UserPromptSubmit => &mut self.user_prompt_submit,
            HookEvent::SessionStart => &mut self.session_start,
            HookEvent::Stop => &mut self.stop,
            HookEvent::SubagentStop => &mut self.subagent_stop,
            HookEvent::StepStop => &mut self.step_stop,
            HookEvent::PreCompact => &mut self.pre_compact,
        }
    }

    /// Whether no hook is configured.
    pub fn is_empty(&self) -> bool {
        HookEvent::ALL.iter().all(|e| self.of(*e).is_empty())
    }

    /// This layer's hooks followed by `higher`'s (both run).
    pub fn extend(&mut self, higher: HookSet) {
        let mut higher = higher;
        for event in HookEvent::ALL {
            let added = std::mem::take(higher.of_mut(event));
            self.of_mut(event).extend(added);
        }
    }

    /// The events with hooks configured that this version does not run yet.
    pub fn not_run(&self) -> Vec<&'static str> {
        [
            HookEvent::UserPromptSubmit,
            HookEvent::SessionStart,
            HookEvent::PreCompact,
        ]
        .into_iter()
        .filter(|e| !self.of(*e).is_empty())
        .map(HookEvent::as_str)
        .collect()
    }

    /// The config keys set (`hooks.pre_tool_use`, …), for what an
    /// untrusted project loses.
    pub fn keys(&self) -> Vec<String> {
        HookEvent::ALL
            .iter()
            .filter(|e| !self.of(**e).is_empty())
            .map(|e| format!("hooks.{}", e.as_str()))
            .collect()
    }
}
