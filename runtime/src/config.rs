//! Configuration files and their precedence (C4).
//!
//! cadre reads up to four TOML files, lowest precedence first: the user's
//! (`<config dir>/cadre/config.toml`), the project's
//! (`<workspace>/.cadre/config.toml`), the local one
//! (`<workspace>/.cadre/config.local.toml`, meant to stay out of version
//! control), and one named with `--config`. Flags beat environment
//! variables, which beat every file. Scalar settings take the value of the
//! highest layer that sets them; roles replace a lower layer's role of the
//! same name as a whole; permission rules from every file accumulate, each
//! kept with its scope so decisions name it. A project's `.mcp.json` is read
//! as a layer just below its config file; `[mcp_servers]` merge by the
//! rules of `mcp::config` (a project cannot start or trust a server).
//! `[sandbox]`, `[snapshots]` and `[cluster]` are ignored in the project's file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::mcp::config::{McpServerConfig, McpServerEntry};
use crate::mode::Mode;
use crate::permission::Posture;
use crate::permission::rules::{PermissionRules, RuleError, RuleSet, Scope};
use crate::tool::FileLimits;

/// A configuration file that could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// What is wrong, and where in the file.
    pub message: String,
}

/// One configuration file, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The starting mode.
    pub mode: Option<Mode>,
    /// The starting posture.
    pub posture: Option<Posture>,
    /// The model name.
    pub model: Option<String>,
    /// The OpenAI-compatible base URL.
    pub base_url: Option<String>,
    /// Sub-agents running at once (clamped to 1..=128).
    pub max_subagents: Option<u32>,
    /// Allow / ask / deny rules.
    #[serde(default)]
    pub permissions: PermissionRules,
    /// The Auto-Review guardian.
    #[serde(default)]
    pub guardian: GuardianSettings,
    /// Named sub-agent roles.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
    /// The plan lifecycle.
    #[serde(default)]
    pub plan: PlanSettings,
    /// How `bash` commands are sandboxed. Ignored in the project's file: a
    /// repository cannot widen its own sandbox.
    #[serde(default)]
    pub sandbox: SandboxSettings,
    /// Bounds on what commands, models and the file tools may produce.
    #[serde(default)]
    pub limits: LimitSettings,
    /// MCP servers by name (see `docs/mcp.md`).
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
    /// Workspace snapshots. Ignored in the project's file.
    #[serde(default)]
    pub snapshots: SnapshotSettings,
    /// Nodes workflow steps may run on. Ignored in the project's file: a
    /// repository cannot send its prompts to machines of its choosing.
    #[serde(default)]
    pub cluster: ClusterSettings,
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
}

impl LimitSettings {
    /// Every limit at its built-in value (`model_requests`: none).
    pub fn defaults() -> Self {
        let file = FileLimits::default();
        let response = crate::model::ResponseLimits::default();
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
        }
    }

    /// These settings over a lower layer's.
    fn over(self, lower: Self) -> Self {
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardianSettings {
    /// The model the guardian asks (default: the agent's own).
    pub model: Option<String>,
    /// The review deadline in seconds (default 90).
    pub timeout_secs: Option<u64>,
}

/// `[roles.<name>]`: what a sub-agent of this role is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// What the role is for, shown in the roster.
    pub description: Option<String>,
    /// The model (default: the session's).
    pub model: Option<String>,
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

impl ConfigFile {
    /// Parses a file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError {
            path: path.display().to_string(),
            message: e.to_string().trim_end().to_string(),
        })
    }

    /// Reads a file; a missing file is an empty configuration.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(ConfigError {
                path: path.display().to_string(),
                message: format!("cannot read it: {e}"),
            }),
        }
    }
}

/// Where the layers come from.
#[derive(Debug, Clone, Default)]
pub struct ConfigPaths {
    /// The user's file.
    pub user: Option<PathBuf>,
    /// The workspace, for the project and local files.
    pub workspace: Option<PathBuf>,
    /// A file named with `--config`.
    pub explicit: Option<PathBuf>,
}

impl ConfigPaths {
    /// The files in precedence order, lowest first, with the scope their
    /// rules get.
    pub fn layers(&self) -> Vec<(PathBuf, Scope)> {
        let mut layers = Vec::new();
        if let Some(user) = &self.user {
            layers.push((user.clone(), Scope::User));
        }
        if let Some(ws) = &self.workspace {
            layers.push((ws.join(".cadre").join("config.toml"), Scope::Project));
            let local = ws.join(".cadre").join("config.local.toml");
            // A "local" file the repository carries came with the clone:
            // it is the project's, not the person's.
            let scope = if carried(ws, &local) {
                Scope::Project
            } else {
                Scope::Local
            };
            layers.push((local, scope));
        }
        if let Some(explicit) = &self.explicit {
            layers.push((explicit.clone(), Scope::Local));
        }
        layers
    }
}

/// Whether the repository may have laid `local` (the workspace's
/// `.cadre/config.local.toml`): it is reached through a symlink (which a
/// clone can carry, pointing anywhere), or it is in the git index.
fn carried(workspace: &Path, local: &Path) -> bool {
    let (Ok(ws), Ok(real)) = (workspace.canonicalize(), local.canonicalize()) else {
        // No such file: nothing is read.
        return false;
    };
    real != ws.join(".cadre").join("config.local.toml") || committed(local)
}

/// Whether `path` is in its git repository's index (committed or staged).
/// No repository, or one that cannot be read, means no.
fn committed(path: &Path) -> bool {
    let Ok(repo) = git2::Repository::discover(path.parent().unwrap_or(path)) else {
        return false;
    };
    let (Some(root), Ok(index)) = (repo.workdir(), repo.index()) else {
        return false;
    };
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (root, path) = (canonical(root), canonical(path));
    path.strip_prefix(&root)
        .is_ok_and(|rel| index.get_path(rel, 0).is_some())
}

/// A project's file may not name a model server: the API key goes with
/// every request, and a repository must not choose where it goes.
fn refuse_endpoints(file: &ConfigFile, path: &Path) -> Result<(), ConfigError> {
    let role = file
        .roles
        .iter()
        .find(|(_, role)| role.base_url.is_some())
        .map(|(name, _)| format!("roles.{name}.base_url"));
    match file
        .base_url
        .as_ref()
        .map(|_| "base_url".to_string())
        .or(role)
    {
        Some(key) => Err(ConfigError {
            path: path.display().to_string(),
            message: format!(
                "{key}: a project's config cannot choose the model server (the API key is sent \
                 there){}; set it in your user config, an uncommitted \
                 .cadre/config.local.toml or with --base-url",
                if path.ends_with(".cadre/config.local.toml") {
                    " and this file is committed to the repository, so it is the project's"
                } else {
                    ""
                }
            ),
        }),
        None => Ok(()),
    }
}

/// The files merged.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The highest layer's value of each scalar setting.
    pub settings: ConfigFile,
    /// Every file's rules, with their scopes.
    pub rules: RuleSet,
    /// Roles by name, the highest layer's definition of each.
    pub roles: BTreeMap<String, RoleConfig>,
    /// The MCP servers, merged (`mcp::config::merge`).
    pub mcp_servers: Vec<McpServerConfig>,
    /// The posture the project's file asks for. A repository may narrow the
    /// posture the user chose, never widen it, so it is kept apart from
    /// `settings.posture` and applied with [`Config::posture`].
    pub project_posture: Option<Posture>,
    /// The project file's `mode`, which only narrows the user's (see
    /// [`Config::mode`]).
    pub project_mode: Option<Mode>,
    /// The project file's `[limits]`, which only tighten the user's (see
    /// [`Config::limits`]).
    pub project_limits: LimitSettings,
}

impl Config {
    /// Reads and merges every layer. A file that exists but does not parse
    /// is an error; a missing one is skipped. An explicit `--config` file
    /// must exist.
    pub fn load(paths: &ConfigPaths) -> Result<Self, ConfigError> {
        if let Some(explicit) = &paths.explicit
            && !explicit.exists()
        {
            return Err(ConfigError {
                path: explicit.display().to_string(),
                message: "no such file".into(),
            });
        }
        let mut files = Vec::new();
        for (path, scope) in paths.layers() {
            if scope == Scope::Project
                && let Some(ws) = &paths.workspace
            {
                // A project's `.mcp.json` sits just below its config file.
                let json = ws.join(".mcp.json");
                let mcp_servers = crate::mcp::config::read_mcp_json(&json)?;
                let file = ConfigFile {
                    mcp_servers,
                    ..ConfigFile::default()
                };
                files.push((file, Scope::Project, json));
            }
            files.push((ConfigFile::read(&path)?, scope, path));
        }
        Self::merge(files)
    }

    /// Merges parsed layers, lowest precedence first.
    pub fn merge(layers: Vec<(ConfigFile, Scope, PathBuf)>) -> Result<Self, ConfigError> {
        let mut merged = Config::default();
        let mut mcp = Vec::new();
        for (mut file, scope, path) in layers {
            if scope == Scope::Project {
                refuse_endpoints(&file, &path)?;
            }
            mcp.push((std::mem::take(&mut file.mcp_servers), scope, path.clone()));
            let s = &mut merged.settings;
            if scope == Scope::Project {
                merged.project_posture = file.posture;
                merged.project_mode = file.mode;
            } else {
                s.mode = file.mode.or(s.mode);
                s.posture = file.posture.or(s.posture);
            }
            let s = &mut merged.settings;
            s.model = file.model.or(s.model.take());
            s.base_url = file.base_url.or(s.base_url.take());
            s.max_subagents = file.max_subagents.or(s.max_subagents);
            s.plan.agent_entry = file.plan.agent_entry.or(s.plan.agent_entry);
            if scope != Scope::Project {
                // Which model reviews the calls under Auto-Review is the
                // user's choice, not the reviewed repository's.
                s.guardian.model = file.guardian.model.or(s.guardian.model.take());
                s.guardian.timeout_secs = file.guardian.timeout_secs.or(s.guardian.timeout_secs);
                s.sandbox.writable_roots = file
                    .sandbox
                    .writable_roots
                    .or(s.sandbox.writable_roots.take());
                s.sandbox.env = file.sandbox.env.or(s.sandbox.env.take());
                s.sandbox.memory_mib = file.sandbox.memory_mib.or(s.sandbox.memory_mib);
                s.sandbox.processes = file.sandbox.processes.or(s.sandbox.processes);
                s.sandbox.cpu_secs = file.sandbox.cpu_secs.or(s.sandbox.cpu_secs);
                s.sandbox.file_mib = file.sandbox.file_mib.or(s.sandbox.file_mib);
                s.sandbox.tmp_mib = file.sandbox.tmp_mib.or(s.sandbox.tmp_mib);
                s.snapshots.enabled = file.snapshots.enabled.or(s.snapshots.enabled);
                s.snapshots.max_file_mib = file.snapshots.max_file_mib.or(s.snapshots.max_file_mib);
                s.cluster.nodes = file.cluster.nodes.or(s.cluster.nodes.take());
                s.cluster.local_slots = file.cluster.local_slots.or(s.cluster.local_slots);
                s.cluster.secret_file = file.cluster.secret_file.or(s.cluster.secret_file.take());
            }
            if scope == Scope::Project {
                merged.project_limits = file.limits.over(merged.project_limits);
            } else {
                s.limits = file.limits.over(s.limits);
            }
            merged
                .rules
                .extend_from(scope, &file.permissions)
                .map_err(|e: RuleError| ConfigError {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
            merged.roles.extend(file.roles);
        }
        let layers: Vec<_> = mcp.iter().map(|(e, s, p)| (e, *s, p.as_path())).collect();
        merged.mcp_servers = crate::mcp::config::merge(&layers)?;
        Ok(merged)
    }

    /// The starting posture: `user` (the user's own choice: their files,
    /// their settings, or the default), narrowed by the project's file.
    pub fn posture(&self, user: Posture) -> Posture {
        self.project_posture.map_or(user, |p| p.narrower(user))
    }

    /// The starting mode: `user` (their files, their settings, or the
    /// default), narrowed by the project's file: a repository may start a
    /// session in Plan, never in a wider mode than the user's.
    pub fn mode(&self, user: Mode) -> Mode {
        self.project_mode.map_or(user, |m| m.narrower(user))
    }

    /// The limits in force: the user's, tightened by the project's file.
    pub fn limits(&self) -> LimitSettings {
        self.settings
            .limits
            .within(self.project_limits, LimitSettings::defaults())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("test.toml")).expect("parses")
    }

    #[test]
    fn higher_layers_win_for_settings_and_roles_and_rules_accumulate() {
        let user = file(
            r#"
posture = "auto"
model = "small"
[permissions]
deny = ["bash(git push:*)"]
[roles.reviewer]
model = "big"
system_prompt = "review"
"#,
        );
        let project = file(
            r#"
model = "medium"
[permissions]
allow = ["bash(cargo test:*)"]
[roles.reviewer]
posture = "never"
"#,
        );
        let merged = Config::merge(vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ])
        .expect("merges");
        assert_eq!(merged.settings.posture, Some(Posture::Auto));
        assert_eq!(merged.posture(Posture::Auto), Posture::Auto);
        assert_eq!(merged.settings.model.as_deref(), Some("medium"));
        let reviewer = &merged.roles["reviewer"];
        assert_eq!(reviewer.posture, Some(Posture::Never));
        assert_eq!(reviewer.model, None, "a role is replaced whole, not merged");
        let root = Path::new("/ws");
        let push = serde_json::json!({"command": "git push"});
        let test = serde_json::json!({"command": "cargo test -p x"});
        let bash = crate::tool::builtin_definitions()
            .iter()
            .find(|def| def.shell)
            .expect("a shell tool");
        let decide = |args| {
            let call =
                crate::permission::Call::new(bash, args, crate::tool::Safety::SideEffect, root);
            merged.rules.decide(&call)
        };
        assert!(decide(&push).is_some());
        assert!(decide(&test).is_some());
    }

    /// The posture a project file asking for `project` leaves a user who
    /// chose `user`.
    #[test]
    fn a_projects_limits_only_tighten_the_users_and_the_defaults() {
        let project =
            file("[limits]\nread_lines = 10\nresponse_secs = 100000\nmodel_requests = 2\n");
        let merged = Config::merge(vec![(
            project.clone(),
            Scope::Project,
            "project.toml".into(),
        )])
        .expect("merges");
        let limits = merged.limits();
        // Lower than the default: taken.
        assert_eq!(limits.read_lines, Some(10));
        // Higher than the default (600 s): the default stays.
        assert_eq!(limits.response_secs, None);
        // No limit by default: any limit tightens.
        assert_eq!(limits.model_requests, Some(2));
        // The user's own limits: the lower of theirs and the project's.
        let user = file("[limits]\nread_lines = 5\nresponse_secs = 200000\nmodel_requests = 8\n");
        let merged = Config::merge(vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ])
        .expect("merges");
        let limits = merged.limits();
        assert_eq!(limits.read_lines, Some(5));
        assert_eq!(limits.response_secs, Some(100000));
        assert_eq!(limits.model_requests, Some(2));
    }

    #[test]
    fn a_limit_within_a_project_is_never_above_the_users_or_the_default() {
        // Every combination of unset and a few values, for one field.
        let values = [None, Some(1u64), Some(50), Some(600), Some(10_000)];
        for user in values {
            for project in values {
                for default in values {
                    let got = LimitSettings {
                        response_secs: user,
                        ..LimitSettings::default()
                    }
                    .within(
                        LimitSettings {
                            response_secs: project,
                            ..LimitSettings::default()
                        },
                        LimitSettings {
                            response_secs: default,
                            ..LimitSettings::default()
                        },
                    )
                    .response_secs;
                    let before = user.or(default);
                    let after = got.or(default);
                    match (before, after) {
                        (Some(b), Some(a)) => assert!(a <= b, "{user:?} {project:?} {default:?}"),
                        (Some(_), None) => {
                            panic!("a bound was lifted: {user:?} {project:?} {default:?}")
                        }
                        _ => {}
                    }
                    if project.is_none() {
                        assert_eq!(got, user);
                    }
                }
            }
        }
    }

    #[test]
    fn a_projects_mode_only_narrows_and_its_guardian_is_ignored() {
        let project = file("mode = \"operate\"\n[guardian]\nmodel = \"tiny\"\ntimeout_secs = 1\n");
        let merged =
            Config::merge(vec![(project, Scope::Project, "project.toml".into())]).expect("merges");
        for user in [Mode::Plan, Mode::Work, Mode::Operate] {
            assert_eq!(
                merged.mode(user),
                user,
                "operate in a project never widens {user}"
            );
        }
        assert_eq!(merged.settings.guardian.model, None);
        assert_eq!(merged.settings.guardian.timeout_secs, None);
        let plan = file("mode = \"plan\"\n");
        let merged =
            Config::merge(vec![(plan, Scope::Project, "project.toml".into())]).expect("merges");
        for user in [Mode::Plan, Mode::Work, Mode::Operate] {
            assert_eq!(merged.mode(user), Mode::Plan);
        }
        // The user's own file still chooses both.
        let user = file("mode = \"operate\"\n[guardian]\nmodel = \"careful\"\n");
        let merged = Config::merge(vec![(user, Scope::User, "user.toml".into())]).expect("merges");
        assert_eq!(merged.settings.mode, Some(Mode::Operate));
        assert_eq!(merged.settings.guardian.model.as_deref(), Some("careful"));
    }

    fn project_posture(user: Posture, project: Posture, expected: Posture) {
        let project_file = file(&format!("posture = \"{}\"\n", project.as_str()));
        let merged = Config::merge(vec![(project_file, Scope::Project, "project.toml".into())])
            .expect("merges");
        assert_eq!(merged.settings.posture, None, "kept apart");
        assert_eq!(
            merged.posture(user),
            expected,
            "user {user:?}, project {project:?}"
        );
    }

    #[test]
    fn a_project_file_narrows_the_posture_and_never_widens_it() {
        let all = [
            Posture::Never,
            Posture::Suggest,
            Posture::Auto,
            Posture::Bypass,
        ];
        for user in all {
            for project in all {
                project_posture(user, project, user.min(project));
            }
        }
        project_posture(Posture::Suggest, Posture::Bypass, Posture::Suggest);
        project_posture(Posture::Bypass, Posture::Never, Posture::Never);
    }

    #[test]
    fn a_project_file_cannot_choose_the_model_server() {
        for text in [
            "base_url = \"http://127.0.0.1:9/v1\"\n",
            "[roles.r]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        ] {
            let err = Config::merge(vec![(file(text), Scope::Project, "project.toml".into())])
                .expect_err(text);
            assert_eq!(err.path, "project.toml");
            assert!(
                err.message.contains("base_url: a project's config cannot"),
                "{err}"
            );
            Config::merge(vec![(file(text), Scope::Local, "local.toml".into())])
                .expect("the local file may");
        }
    }

    #[test]
    fn a_project_file_cannot_widen_the_sandbox() {
        let user = file("[sandbox]\nwritable_roots = [\"~/.cache\"]\n[limits]\nresponse_mib = 4\n");
        let project = file(
            "[sandbox]\nwritable_roots = [\"/\"]\nenv = [\"AWS_SECRET\"]\n[limits]\nresponse_secs = 60\n",
        );
        let merged = Config::merge(vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ])
        .expect("merges");
        let s = &merged.settings;
        assert_eq!(s.sandbox.writable_roots, Some(vec!["~/.cache".to_string()]));
        assert_eq!(s.sandbox.env, None);
        let limits = merged.limits();
        assert_eq!(
            (limits.response_mib, limits.response_secs),
            (Some(4), Some(60))
        );
    }

    #[test]
    fn a_project_file_cannot_turn_snapshots_off() {
        let user = file("[snapshots]\nmax_file_mib = 2\n");
        let project = file("[snapshots]\nenabled = false\nmax_file_mib = 0\n");
        let merged = Config::merge(vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ])
        .expect("merges");
        assert_eq!(
            merged.settings.snapshots,
            SnapshotSettings {
                enabled: None,
                max_file_mib: Some(2)
            }
        );
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let err = ConfigFile::parse(
            "posture = \"auto\"\nmodle = \"x\"\n",
            Path::new("/home/u/.config/cadre/config.toml"),
        )
        .expect_err("unknown key");
        assert!(
            err.to_string()
                .starts_with("/home/u/.config/cadre/config.toml: "),
            "{err}"
        );
        assert!(err.message.contains("line 2"), "{err}");
        let err = ConfigFile::parse("posture = \"yolo\"\n", Path::new("c.toml"))
            .expect_err("bad posture");
        assert!(err.message.contains("yolo"), "{err}");
        let bad_rule = file("[permissions]\ndeny = [\"bash(git push\"]\n");
        let err =
            Config::merge(vec![(bad_rule, Scope::Project, "p.toml".into())]).expect_err("bad rule");
        assert_eq!(err.path, "p.toml");
    }

    #[test]
    fn limits_from_the_highest_user_layer_that_sets_each_key_tightened_by_the_project() {
        let merged = Config::merge(vec![
            (
                file("[limits]\nread_bytes = 100\ngrep_matches = 5\n"),
                Scope::User,
                "user.toml".into(),
            ),
            (
                file("[limits]\nread_bytes = 200\nlist_entries = 0\n"),
                Scope::Project,
                "project.toml".into(),
            ),
            (
                file("[limits]\nread_bytes = 150\n"),
                Scope::Local,
                "local.toml".into(),
            ),
        ])
        .expect("merges");
        let limits = merged.limits().apply(FileLimits::default());
        assert_eq!(
            limits,
            FileLimits {
                read_bytes: 150,
                grep_matches: 5,
                list_entries: 1,
                ..FileLimits::default()
            }
        );
        assert!(ConfigFile::parse("[limits]\nread_byte = 1\n", Path::new("c.toml")).is_err());
    }
}
