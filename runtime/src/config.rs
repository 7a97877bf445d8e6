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
//! Until the user trusts the workspace (`trust.rs`), the project's files
//! (`.cadre/config.toml`, a committed `config.local.toml`, `.mcp.json`)
//! only narrow: what widens or steers is ignored, and [`Config::trust`]
//! names it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::mcp::config::{McpServerConfig, McpServerEntry};
use crate::mode::Mode;
use crate::model::providers::ProviderConfig;
use crate::model::{Effort, ModelParams};
use crate::permission::Posture;
use crate::permission::rules::{PermissionRules, RuleError, RuleSet, Scope};
use crate::trust::{Ignored, ProjectFiles, Review, Trust, TrustBook, Untrusted};

mod sections;

pub use sections::{
    ClusterSettings, ContextSettings, GuardianSettings, LimitSettings, PlanSettings, RoleConfig,
    SandboxSettings, SnapshotSettings,
};

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
    /// The provider (`[providers.NAME]`, or the built-in `openai`) serving `model`.
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
    /// Named model servers. Never from a project's file: a repository
    /// cannot choose where a key is sent.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[prices."MODEL"]`: dollars per million tokens, for the cost shown
    /// beside usage. A higher layer's price of a model replaces a lower's.
    #[serde(default)]
    pub prices: BTreeMap<String, crate::model::Price>,
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
    /// The model's context window and when to compact (`docs/context.md`).
    #[serde(default)]
    pub context: ContextSettings,
    /// `[[hooks.EVENT]]`: commands run at points of every agent's life
    /// (`docs/hooks.md`). A project's run only once the user trusts it.
    #[serde(default)]
    pub hooks: crate::hooks::HookSet,
}

/// The [`ModelParams`] of a section's `reasoning_effort`,
/// `max_output_tokens`, `temperature`, `top_p` and `extra` keys.
macro_rules! params_of {
    ($section:expr) => {
        ModelParams {
            reasoning_effort: $section.reasoning_effort,
            max_output_tokens: $section.max_output_tokens,
            temperature: $section.temperature,
            top_p: $section.top_p,
            extra: $section.extra.clone().unwrap_or_default(),
        }
    };
}

impl RoleConfig {
    /// The role's model parameters (each unset one inherits the session's).
    pub fn params(&self) -> ModelParams {
        params_of!(self)
    }

    /// Whether the role's agents need a model client of their own: another
    /// server or provider, or parameters of their own.
    pub fn own_client(&self) -> bool {
        self.base_url.is_some() || self.provider.is_some() || !self.params().is_empty()
    }
}

impl GuardianSettings {
    /// The guardian's model parameters.
    pub fn params(&self) -> ModelParams {
        params_of!(self)
    }
}

impl ConfigFile {
    /// The session's model parameters (the top-level keys).
    pub fn params(&self) -> ModelParams {
        params_of!(self)
    }

    /// Parses a file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: Self = toml::from_str(text).map_err(|e| ConfigError {
            path: path.display().to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if let Some((model, key)) = file
            .prices
            .iter()
            .find_map(|(model, price)| Some((model, price.invalid()?)))
        {
            return Err(ConfigError {
                path: path.display().to_string(),
                message: format!(
                    "prices.\"{model}\".{key}: a price is a number of dollars per million \
                     tokens, zero or more"
                ),
            });
        }
        Ok(file)
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
    /// The user's record of trusted workspaces (`trust::TrustBook`, in
    /// their configuration directory). Without one, no project is trusted.
    pub trust_book: Option<PathBuf>,
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
/// clone can carry, pointing anywhere), it is in the git index, or there is
/// no git index to ask (an unpacked archive carries its files the same way,
/// and a repository git cannot read says nothing).
fn carried(workspace: &Path, local: &Path) -> bool {
    let (Ok(ws), Ok(real)) = (workspace.canonicalize(), local.canonicalize()) else {
        // No such file: nothing is read.
        return false;
    };
    real != ws.join(".cadre").join("config.local.toml") || indexed(local) != Some(false)
}

/// Whether `path` is in its git repository's index (committed or staged);
/// `None` without a repository whose index can be read.
fn indexed(path: &Path) -> Option<bool> {
    let repo = git2::Repository::discover(path.parent().unwrap_or(path)).ok()?;
    let (root, index) = (repo.workdir()?, repo.index().ok()?);
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (root, path) = (canonical(root), canonical(path));
    let rel = path.strip_prefix(&root).ok()?;
    Some(index.get_path(rel, 0).is_some())
}

/// The workspace's trust: its project files now against the user's
/// record, and what each project layer loses untrusted.
fn review(
    workspace: &Path,
    book: Option<&Path>,
    layers: &[(ConfigFile, Scope, PathBuf)],
) -> Result<Review, ConfigError> {
    let project: Vec<&(ConfigFile, Scope, PathBuf)> = layers
        .iter()
        .filter(|(_, scope, _)| *scope == Scope::Project)
        .collect();
    let covered: Vec<PathBuf> = project.iter().map(|(_, _, path)| path.clone()).collect();
    let files = ProjectFiles::read(workspace, &covered)?;
    let trust = match book {
        Some(book) => {
            let entry = TrustBook::at(book.to_path_buf()).lookup(&files.workspace)?;
            Trust::decide(entry.as_ref().map(|e| e.digest.as_str()), &files.digest)
        }
        None => Trust::Untrusted(Untrusted::Unrecorded),
    };
    let ignored = project
        .into_iter()
        .map(|(file, _, path)| Ignored {
            file: path.strip_prefix(workspace).unwrap_or(path).to_path_buf(),
            keys: crate::trust::untrusted(file.clone()).1,
        })
        .collect();
    Ok(Review {
        project: files,
        trust,
        ignored,
    })
}

/// A project's file may not name a model server: the API key goes with
/// every request, and a repository must not choose where it goes.
fn refuse_endpoints(file: &ConfigFile, path: &Path) -> Result<(), ConfigError> {
    if let Some(name) = file.providers.keys().next() {
        return Err(ConfigError {
            path: path.display().to_string(),
            message: format!(
                "providers.{name}: a project's config cannot add or redirect a model provider \
                 (the API key is sent there); define it in your user config or an uncommitted \
                 .cadre/config.local.toml, and choose it here with provider = \"{name}\""
            ),
        });
    }
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
    /// Every layer's hooks, lowest first (a project's only when trusted).
    pub hooks: crate::hooks::HookSet,
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
    /// The workspace's trust and what distrust ignored (`None` without a
    /// workspace, or when the layers were merged directly).
    pub trust: Option<Review>,
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
        let mut json_read = false;
        for (path, scope) in paths.layers() {
            if scope == Scope::Project
                && !json_read
                && let Some(ws) = &paths.workspace
            {
                // A project's `.mcp.json` sits just below its config file.
                json_read = true;
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
        let review = match &paths.workspace {
            Some(ws) => Some(review(ws, paths.trust_book.as_deref(), &files)?),
            None => None,
        };
        let trust = review
            .as_ref()
            .map_or(Trust::Untrusted(Untrusted::Never), |r| r.trust);
        let mut merged = Self::merge(files, trust)?;
        merged.trust = review;
        Ok(merged)
    }

    /// Merges parsed layers, lowest precedence first; the project's layers
    /// apply whole only when `trust` says so (`trust::untrusted`).
    pub fn merge(
        layers: Vec<(ConfigFile, Scope, PathBuf)>,
        trust: Trust,
    ) -> Result<Self, ConfigError> {
        let mut merged = Config::default();
        let mut mcp = Vec::new();
        for (mut file, scope, path) in layers {
            if scope == Scope::Project {
                // Never from a project, trusted or not.
                refuse_endpoints(&file, &path)?;
                if !trust.is_trusted() {
                    file = crate::trust::untrusted(file).0;
                }
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
            s.provider = file.provider.or(s.provider.take());
            s.reasoning_effort = file.reasoning_effort.or(s.reasoning_effort);
            s.max_output_tokens = file.max_output_tokens.or(s.max_output_tokens);
            s.temperature = file.temperature.or(s.temperature);
            s.top_p = file.top_p.or(s.top_p);
            s.extra = file.extra.or(s.extra.take());
            // Only from the user's own files (a project's are refused).
            s.providers.extend(file.providers);
            s.prices.extend(file.prices);
            s.max_subagents = file.max_subagents.or(s.max_subagents);
            s.context.window = file.context.window.or(s.context.window);
            s.context.compact_percent = file.context.compact_percent.or(s.context.compact_percent);
            let (c, lower) = (file.context, &mut s.context);
            lower.model = c.model.or(lower.model.take());
            lower.provider = c.provider.or(lower.provider.take());
            lower.reasoning_effort = c.reasoning_effort.or(lower.reasoning_effort);
            lower.max_output_tokens = c.max_output_tokens.or(lower.max_output_tokens);
            lower.temperature = c.temperature.or(lower.temperature);
            lower.top_p = c.top_p.or(lower.top_p);
            lower.extra = c.extra.or(lower.extra.take());
            s.plan.agent_entry = file.plan.agent_entry.or(s.plan.agent_entry);
            if scope != Scope::Project {
                // Which model reviews the calls under Auto-Review is the
                // user's choice, not the reviewed repository's.
                let (g, lower) = (file.guardian, &mut s.guardian);
                lower.model = g.model.or(lower.model.take());
                lower.provider = g.provider.or(lower.provider.take());
                lower.reasoning_effort = g.reasoning_effort.or(lower.reasoning_effort);
                lower.max_output_tokens = g.max_output_tokens.or(lower.max_output_tokens);
                lower.temperature = g.temperature.or(lower.temperature);
                lower.top_p = g.top_p.or(lower.top_p);
                lower.extra = g.extra.or(lower.extra.take());
                lower.timeout_secs = g.timeout_secs.or(lower.timeout_secs);
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
            merged.hooks.extend(std::mem::take(&mut file.hooks));
        }
        let layers: Vec<_> = mcp.iter().map(|(e, s, p)| (e, *s, p.as_path())).collect();
        merged.mcp_servers = crate::mcp::config::merge(&layers, trust)?;
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
mod tests;
