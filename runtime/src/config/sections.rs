//! The sections of a configuration file other than the top level's keys:
//! `[context]`, `[cluster]`, `[snapshots]`, `[sandbox]`, `[limits]`,
//! `[plan]`, `[guardian]` and `[roles.<name>]`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::mode::Mode;
use crate::model::Effort;
use crate::permission::Posture;
use crate::permission::rules::PermissionRules;
use crate::tool::FileLimits;

/// `[context]`: the session model's context window, the compaction
/// threshold (CX1, CX2) and the model that writes the summaries. A
/// project's file may set the window and the threshold (they change only
/// when cadre compacts, never what an agent may do); the summaries' model
/// is the user's choice, or a trusted project's, like the session's model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSettings {
    /// The window in tokens (default: the built-in table's for a known
    /// model name, else 128000).
    pub window: Option<u64>,
    /// Compact before a request estimated past this percentage of the
    /// window (default 80, clamped to 10..=95).
    pub compact_percent: Option<u8>,

    /// The model that writes every agent's compaction summaries (default:
    /// each agent's own): a cheap one saves the strong one's tokens.
    pub model: Option<String>,
    /// The provider serving it (default: the session's server).
    pub provider: Option<String>,
    /// Reasoning effort sent with the summary requests.
    pub reasoning_effort: Option<Effort>,
    /// The most tokens one summary request's answer may have.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Provider-specific fields merged into each summary request's body.
    pub extra: Option<BTreeMap<String, serde_json::Value>>,
}

impl ContextSettings {
    /// The budget for `model` under these settings.
    pub fn budget(&self, model: Option<&str>) -> crate::context::ContextBudget {
        crate::context::ContextBudget::resolve(self.window, model, self.compact_percent)
    }

    /// The summaries' model choice, built like a role's, when one is set:
    /// `None` leaves each agent summarising with its own model.
    pub fn summarizer(&self) -> Option<RoleConfig> {
        let choice = RoleConfig {
            model: self.model.clone(),
            provider: self.provider.clone(),
            reasoning_effort: self.reasoning_effort,
            max_output_tokens: self.max_output_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            extra: self.extra.clone(),
            ..RoleConfig::default()
        };
        (choice.model.is_some() || choice.own_client()).then_some(choice)
    }
}

/// `[cluster]` (see `docs/cluster.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSettings {
    /// Nodes to run workflow steps on, `HOST:PORT`.
    pub nodes: Option<Vec<String>>,
    /// Steps the coordinator runs itself at once besides the nodes.
    pub local_slots: Option<u32>,
    /// A file holding the cluster secret.
    pub secret_file: Option<String>,
}

/// `[snapshots]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSettings {
    /// Record the workspace before each turn that may change files (default true).
    pub enabled: Option<bool>,
    /// MiB above which a file is not recorded (default 10).
    pub max_file_mib: Option<u64>,
}

/// `[sandbox]` (see `docs/security/sandbox.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// Directories writable under `suggest` and `auto` besides the
    /// workspace; replaces the default list (package caches). `~/` is the
    /// home directory.
    pub writable_roots: Option<Vec<String>>,
    /// More environment variables passed to commands (never `BASH_ENV` and
    /// the like).
    pub env: Option<Vec<String>>,
    /// MiB of address space of each command process (default 8192).
    pub memory_mib: Option<u64>,
    /// Processes a command may have (default 4096; not enforced for root).
    pub processes: Option<u64>,
    /// CPU seconds of each command process (default 600).
    pub cpu_secs: Option<u64>,
    /// MiB of the largest file a command may write (default 4096).
    pub file_mib: Option<u64>,
    /// MiB of a command's private `/tmp` (default 1024).
    pub tmp_mib: Option<u64>,
}

/// `[limits]`: bounds on what commands and models produce, and overrides
/// of [`FileLimits`]' defaults (each file key is the field of the same
/// name: `read_bytes`, `read_lines`, `grep_file_bytes`, `grep_matches`,
/// `grep_line_bytes`, `glob_files`, `list_entries`, `edit_file_bytes`). A
/// key set in a higher layer wins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// MiB of output (stdout and stderr) after which a command is killed (default 32).
    pub bash_output_mib: Option<u64>,
    /// MiB of text, reasoning and tool-call arguments in one model response (default 8).
    pub response_mib: Option<u64>,
    /// Seconds one model response may take (default 600).
    pub response_secs: Option<u64>,
    /// `FileLimits::read_bytes`.
    pub read_bytes: Option<usize>,
    /// `FileLimits::read_lines`.
    pub read_lines: Option<usize>,
    /// `FileLimits::grep_file_bytes`.
    pub grep_file_bytes: Option<u64>,
    /// `FileLimits::grep_matches`.
    pub grep_matches: Option<usize>,
    /// `FileLimits::grep_line_bytes`.
    pub grep_line_bytes: Option<usize>,
    /// `FileLimits::glob_files`.
    pub glob_files: Option<usize>,
    /// `FileLimits::list_entries`.
    pub list_entries: Option<usize>,
    /// `FileLimits::edit_file_bytes`.
    pub edit_file_bytes: Option<u64>,
    /// Model requests in flight at once per endpoint (base URL and model),
    /// shared by every session, sub-agent and workflow step of the process;
    /// the rest wait their turn (default: no limit).
    pub model_requests: Option<u32>,
    /// Managed processes (`process` tool) one agent may run at once (default 4).
    pub processes_per_agent: Option<usize>,
    /// Managed processes a session's tree may run at once (default 16).
    pub processes_per_session: Option<usize>,
    /// KiB of output kept per managed process (default 1024).
    pub process_output_kib: Option<usize>,
}

impl LimitSettings {
    /// Every limit at its built-in value (`model_requests`: none).
    pub fn defaults() -> Self {
        let file = FileLimits::default();
        let response = crate::model::ResponseLimits::default();
        let processes = crate::process::ProcessLimits::default();
        Self {
            bash_output_mib: Some(crate::sandbox::DEFAULT_MAX_OUTPUT / (1024 * 1024)),
            response_mib: Some((response.max_bytes / (1024 * 1024)) as u64),
            response_secs: Some(response.max_duration.as_secs()),
            read_bytes: Some(file.read_bytes),
            read_lines: Some(file.read_lines),
            grep_file_bytes: Some(file.grep_file_bytes),
            grep_matches: Some(file.grep_matches),
            grep_line_bytes: Some(file.grep_line_bytes),
            glob_files: Some(file.glob_files),
            list_entries: Some(file.list_entries),
            edit_file_bytes: Some(file.edit_file_bytes),
            model_requests: None,
            processes_per_agent: Some(processes.per_agent),
            processes_per_session: Some(processes.per_session),
            process_output_kib: Some(processes.output_bytes / 1024),
        }
    }

    /// These (the user's) limits, each lowered to a project's where the
    /// project's is lower than the user's or, unset, than `defaults`: a
    /// repository may tighten a bound, never loosen one.
    pub fn within(self, project: Self, defaults: Self) -> Self {
        fn lower<T: Ord + Copy>(
            user: Option<T>,
            project: Option<T>,
            default: Option<T>,
        ) -> Option<T> {
            match (project, user.or(default)) {
                (Some(p), Some(u)) => Some(p.min(u)).filter(|_| p < u).or(user),
                (Some(p), None) => Some(p),
                (None, _) => user,
            }
        }
        Self {
            bash_output_mib: lower(
                self.bash_output_mib,
                project.bash_output_mib,
                defaults.bash_output_mib,
            ),
            response_mib: lower(
                self.response_mib,
                project.response_mib,
                defaults.response_mib,
            ),
            response_secs: lower(
                self.response_secs,
                project.response_secs,
                defaults.response_secs,
            ),
            read_bytes: lower(self.read_bytes, project.read_bytes, defaults.read_bytes),
            read_lines: lower(self.read_lines, project.read_lines, defaults.read_lines),
            grep_file_bytes: lower(
                self.grep_file_bytes,
                project.grep_file_bytes,
                defaults.grep_file_bytes,
            ),
            grep_matches: lower(
                self.grep_matches,
                project.grep_matches,
                defaults.grep_matches,
            ),
            grep_line_bytes: lower(
                self.grep_line_bytes,
                project.grep_line_bytes,
                defaults.grep_line_bytes,
            ),
            glob_files: lower(self.glob_files, project.glob_files, defaults.glob_files),
            list_entries: lower(
                self.list_entries,
                project.list_entries,
                defaults.list_entries,
            ),
            edit_file_bytes: lower(
                self.edit_file_bytes,
                project.edit_file_bytes,
                defaults.edit_file_bytes,
            ),
            model_requests: lower(
                self.model_requests,
                project.model_requests,
                defaults.model_requests,
            ),
            processes_per_agent: lower(
                self.processes_per_agent,
                project.processes_per_agent,
                defaults.processes_per_agent,
            ),
            processes_per_session: lower(
                self.processes_per_session,
                project.processes_per_session,
                defaults.processes_per_session,
            ),
            process_output_kib: lower(
                self.process_output_kib,
                project.process_output_kib,
                defaults.process_output_kib,
            ),
        }
    }

    /// These settings over a lower layer's.
    pub(super) fn over(self, lower: Self) -> Self {
        Self {
            bash_output_mib: self.bash_output_mib.or(lower.bash_output_mib),
            response_mib: self.response_mib.or(lower.response_mib),
            response_secs: self.response_secs.or(lower.response_secs),
            read_bytes: self.read_bytes.or(lower.read_bytes),
            read_lines: self.read_lines.or(lower.read_lines),
            grep_file_bytes: self.grep_file_bytes.or(lower.grep_file_bytes),
            grep_matches: self.grep_matches.or(lower.grep_matches),
            grep_line_bytes: self.grep_line_bytes.or(lower.grep_line_bytes),
            glob_files: self.glob_files.or(lower.glob_files),
            list_entries: self.list_entries.or(lower.list_entries),
            edit_file_bytes: self.edit_file_bytes.or(lower.edit_file_bytes),
            model_requests: self.model_requests.or(lower.model_requests),
            processes_per_agent: self.processes_per_agent.or(lower.processes_per_agent),
            processes_per_session: self.processes_per_session.or(lower.processes_per_session),
            process_output_kib: self.process_output_kib.or(lower.process_output_kib),
        }
    }

    /// The bounds on managed processes: `base` with the keys that are set,
    /// each at least 1.
    pub fn processes(&self, base: crate::process::ProcessLimits) -> crate::process::ProcessLimits {
        crate::process::ProcessLimits {
            per_agent: self.processes_per_agent.unwrap_or(base.per_agent).max(1),
            per_session: self
                .processes_per_session
                .unwrap_or(base.per_session)
                .max(1),
            output_bytes: self
                .process_output_kib
                .map_or(base.output_bytes, |kib| kib.max(1).saturating_mul(1024)),
        }
    }

    /// `base` with the keys that are set; each at least 1.
    pub fn apply(&self, base: FileLimits) -> FileLimits {
        FileLimits {
            read_bytes: self.read_bytes.unwrap_or(base.read_bytes).max(1),
            read_lines: self.read_lines.unwrap_or(base.read_lines).max(1),
            grep_file_bytes: self.grep_file_bytes.unwrap_or(base.grep_file_bytes).max(1),
            grep_matches: self.grep_matches.unwrap_or(base.grep_matches).max(1),
            grep_line_bytes: self.grep_line_bytes.unwrap_or(base.grep_line_bytes).max(1),
            glob_files: self.glob_files.unwrap_or(base.glob_files).max(1),
            list_entries: self.list_entries.unwrap_or(base.list_entries).max(1),
            edit_file_bytes: self.edit_file_bytes.unwrap_or(base.edit_file_bytes).max(1),
        }
    }
}

/// `[plan]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSettings {
    /// Offer the model `enter_plan_mode` in Work (it asks the user to
    /// confirm). Off by default.
    pub agent_entry: Option<bool>,
}

/// `[guardian]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardianSettings {
    /// The model the guardian asks (default: the agent's own).
    pub model: Option<String>,
    /// The provider serving it (default: the session's server).
    pub provider: Option<String>,
    /// Reasoning effort sent with this model's requests.
    pub reasoning_effort: Option<Effort>,
    /// The most tokens one answer may have.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Provider-specific fields merged into each request body.
    pub extra: Option<BTreeMap<String, serde_json::Value>>,

    /// The review deadline in seconds (default 90).
    pub timeout_secs: Option<u64>,
}

/// `[roles.<name>]`: what a sub-agent of this role is.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// What the role is for, shown in the roster.
    pub description: Option<String>,
    /// The model (default: the session's).
    pub model: Option<String>,
    /// The provider serving it (default: the session's server).
    pub provider: Option<String>,
    /// Reasoning effort sent with this model's requests.
    pub reasoning_effort: Option<Effort>,
    /// The most tokens one answer may have.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Provider-specific fields merged into each request body.
    pub extra: Option<BTreeMap<String, serde_json::Value>>,

    /// The role's model's context window in tokens (default: the table's
    /// for a known model name, else the session's).
    pub context_window: Option<u64>,
    /// Another OpenAI-compatible server for this role.
    pub base_url: Option<String>,
    /// The role's system prompt, added to the agent's.
    pub system_prompt: Option<String>,
    /// The tools the role may use (default: all its parent may use).
    pub allowed_tools: Option<Vec<String>>,
    /// The widest posture the role runs with; a parent's narrower posture wins.
    pub posture: Option<Posture>,
    /// The widest mode the role runs in (`plan` makes a read-only role); a
    /// parent's narrower mode wins.
    pub mode: Option<Mode>,
    /// How many levels of sub-agents below it (default: its parent's remaining depth).
    pub max_depth: Option<u32>,
    /// Path globs the role may write (default: everything its parent may).
    pub file_scope: Option<Vec<String>>,
    /// Extra deny and ask rules (allow rules here are ignored: a role never widens).
    #[serde(default)]
    pub permissions: PermissionRules,
}
