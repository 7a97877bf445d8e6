//! Workspace trust: what a repository's own configuration may do before
//! the user has trusted it.
//!
//! A cloned repository carries `.cadre/config.toml`, perhaps a committed
//! `.cadre/config.local.toml`, and `.mcp.json`. Until the user trusts the
//! project these only narrow: [`untrusted`] keeps what narrows (the mode and
//! posture, which `Config` meets with the user's; ask and deny rules;
//! tighter limits; a server turned off, tools left out) and drops what
//! widens or steers (allow rules, roles, the model, more sub-agents, the
//! offer of `enter_plan_mode`, MCP servers and their timeouts), naming each
//! key it dropped. Whatever the trust, a project never chooses the model
//! server, the guardian, the sandbox, snapshots or the cluster
//! (`config.rs`).
//!
//! Trust is the user's own: recorded in their configuration directory
//! ([`TrustBook`], never in the repository), keyed by the workspace's
//! canonical path and a digest of the bytes of every project file it covers
//! ([`ProjectFiles`]), so a change to any of them (a pull) makes the
//! project untrusted again until the user looks and trusts it anew.
//! `docs/security/paths.md` lists every key with its rule.
//!
//! # Writing the record
//!
//! As `settings.toml` (see `settings.rs`): under a process-wide mutex and
//! an exclusive lock on a sibling `.lock` file, the record is re-read,
//! changed, written to a temporary file and renamed over the old one, so
//! a reader never sees half a file and needs no lock.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{ConfigError, ConfigFile, ContextSettings, PlanSettings};
use crate::mcp::config::McpServerEntry;
use crate::permission::rules::PermissionRules;

/// The record's file name in the user's configuration directory.
pub const TRUST_FILE: &str = "trusted.toml";

/// Whether a workspace's project configuration is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The user trusted these files, byte for byte.
    Trusted,
    /// Not, or no longer, trusted: the project's config only narrows.
    Untrusted(Untrusted),
}

/// Why a project is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untrusted {
    /// The user never trusted this workspace, or revoked it.
    Never,
    /// Trusted once, but its project config changed since.
    Changed,
    /// There is no configuration directory to record trust in.
    Unrecorded,
}

impl Trust {
    /// The trust of a project whose files digest to `digest`, when the
    /// user's record holds `recorded` for its workspace (pure).
    pub fn decide(recorded: Option<&str>, digest: &str) -> Self {
        match recorded {
            Some(trusted) if trusted == digest => Trust::Trusted,
            Some(_) => Trust::Untrusted(Untrusted::Changed),
            None => Trust::Untrusted(Untrusted::Never),
        }
    }

    /// Whether the project's config applies whole.
    pub fn is_trusted(self) -> bool {
        match self {
            Trust::Trusted => true,
            Trust::Untrusted(_) => false,
        }
    }

    /// The state as `cadre trust` shows it.
    pub fn describe(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted(Untrusted::Never) => "not trusted",
            Trust::Untrusted(Untrusted::Changed) => {
                "not trusted: the project config changed since you trusted it"
            }
            Trust::Untrusted(Untrusted::Unrecorded) => {
                "not trusted: there is no configuration directory to record trust in"
            }
        }
    }
}

/// The project configuration files of a workspace that trust covers, as
/// they are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFiles {
    /// The workspace, canonical: the record's key.
    pub workspace: PathBuf,
    /// The files that exist, relative to the workspace.
    pub files: Vec<PathBuf>,
    /// SHA-256 (hex) over each file's name, length and bytes, in order.
    pub digest: String,
}

impl ProjectFiles {
    /// Reads the files of `covered` (absolute paths, in a fixed order) that
    /// exist under `workspace`.
    pub fn read(workspace: &Path, covered: &[PathBuf]) -> Result<Self, ConfigError> {
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let mut hasher = Sha256::new();
        let mut files = Vec::new();
        for path in covered {
            let bytes = match std::fs::read(path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(ConfigError {
                        path: path.display().to_string(),
                        message: format!("cannot read it: {e}"),
                    });
                }
            };
            let name = path.strip_prefix(workspace).unwrap_or(path).to_path_buf();
            hasher.update(name.as_os_str().as_encoded_bytes());
            hasher.update([0]);
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
            files.push(name);
        }
        let digest = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Self {
            workspace: canonical,
            files,
            digest,
        })
    }
}

/// What one project file lost to distrust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The file, relative to the workspace.
    pub file: PathBuf,
    /// The keys dropped, dotted (`permissions.allow`, `roles.verifier`).
    pub keys: Vec<String>,
}

/// A workspace's trust, as a load found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The project's files now.
    pub project: ProjectFiles,
    /// Their trust.
    pub trust: Trust,
    /// What the project's config loses while untrusted (computed whatever
    /// the trust, so `cadre trust` can show what trusting would change).
    pub ignored: Vec<Ignored>,
}

impl Review {
    /// The one-line notice of what this load ignored, if it ignored
    /// anything (nothing when trusted).
    pub fn notice(&self) -> Option<String> {
        if self.trust.is_trusted() || self.ignored.iter().all(|i| i.keys.is_empty()) {
            return None;
        }
        let ignored: Vec<String> = self
            .ignored
            .iter()
            .filter(|i| !i.keys.is_empty())
            .map(|i| format!("{} ({})", i.keys.join(", "), i.file.display()))
            .collect();
        let state = match self.trust {
            Trust::Untrusted(Untrusted::Changed) => {
                "changed since you trusted it, so it is not trusted"
            }
            Trust::Untrusted(Untrusted::Never | Untrusted::Unrecorded) | Trust::Trusted => {
                "not trusted"
            }
        };
        Some(format!(
            "the project config of {} is {state}; ignored: {}; `cadre trust` shows it, \
             `cadre trust yes` trusts it",
            self.project.workspace.display(),
            ignored.join("; ")
        ))
    }
}

/// A project file as it applies untrusted, and the keys it lost (pure).
///
/// Every field is named, so a new key cannot be added to [`ConfigFile`]
/// without deciding here whether an untrusted project may set it.
pub fn untrusted(file: ConfigFile) -> (ConfigFile, Vec<String>) {
    let ConfigFile {
        mode,
        posture,
        model,
        base_url,
        provider,
        reasoning_effort,
        max_output_tokens,
        temperature,
        top_p,
        extra,
        providers,
        prices,
        max_subagents,
        permissions,
        guardian,
        roles,
        plan,
        sandbox,
        limits,
        mcp_servers,
        snapshots,
        cluster,
        context,
        hooks,
    } = file;
    let PermissionRules { allow, ask, deny } = permissions;
    let PlanSettings { agent_entry } = plan;
    let mut ignored = Vec::new();
    let mut lose = |key: String, set: bool| {
        if set {
            ignored.push(key);
        }
    };
    // Steer or widen: the model asked, more agents at once, any role (its
    // prompt, model, tools; the verifier's and the guardian's included),
    // allow rules, the model offered a way into Plan.
    lose("model".into(), model.is_some());
    // Which provider, and what its requests cost or carry.
    lose("provider".into(), provider.is_some());
    lose("reasoning_effort".into(), reasoning_effort.is_some());
    lose("max_output_tokens".into(), max_output_tokens.is_some());
    lose("temperature".into(), temperature.is_some());
    lose("top_p".into(), top_p.is_some());
    lose("extra".into(), extra.is_some());
    // What the cost figures say the project's work cost.
    lose("prices".into(), !prices.is_empty());
    lose("max_subagents".into(), max_subagents.is_some());
    lose("permissions.allow".into(), !allow.is_empty());
    for name in roles.keys() {
        lose(format!("roles.{name}"), true);
    }
    lose("plan.agent_entry".into(), agent_entry == Some(true));
    // The summaries' model, like the session's: which server reads the
    // conversation, and what its requests cost.
    let ContextSettings {
        window,
        compact_percent,
        ..
    } = context;
    for (key, set) in [
        ("model", context.model.is_some()),
        ("provider", context.provider.is_some()),
        ("reasoning_effort", context.reasoning_effort.is_some()),
        ("max_output_tokens", context.max_output_tokens.is_some()),
        ("temperature", context.temperature.is_some()),
        ("top_p", context.top_p.is_some()),
        ("extra", context.extra.is_some()),
    ] {
        lose(format!("context.{key}"), set);
    }
    // Commands a cloned repository would run on this machine.
    for key in hooks.keys() {
        lose(key, true);
    }
    let mut servers = BTreeMap::new();
    for (name, entry) in mcp_servers {
        let (kept, lost) = untrusted_server(entry);
        lose(format!("mcp_servers.{name}"), lost);
        servers.insert(name, kept);
    }
    let narrowed = ConfigFile {
        // Narrow only (`Config::mode`, `Config::posture`, `Config::limits`).
        mode,
        posture,
        limits,
        permissions: PermissionRules {
            allow: Vec::new(),
            ask,
            deny,
        },
        plan: PlanSettings {
            agent_entry: agent_entry.filter(|on| !on),
        },
        mcp_servers: servers,
        // Never from a project, trusted or not: refused (`base_url`) or
        // ignored by `Config::merge`, which sees them as before.
        base_url,
        providers,
        guardian,
        sandbox,
        snapshots,
        cluster,
        // Only when cadre compacts, never what an agent may do.
        context: ContextSettings {
            window,
            compact_percent,
            ..ContextSettings::default()
        },
        model: None,
        provider: None,
        reasoning_effort: None,
        max_output_tokens: None,
        temperature: None,
        top_p: None,
        extra: None,
        prices: BTreeMap::new(),
        max_subagents: None,
        roles: BTreeMap::new(),
        hooks: crate::hooks::HookSet::default(),
    };
    (narrowed, ignored)
}

/// A project's MCP entry as it applies untrusted: the server stays known
/// (so it is listed, and `mcp::config::merge` keeps it from starting), it
/// may be turned off and its tools narrowed; its timeouts are dropped.
/// Whether anything the project asked for is lost.
fn untrusted_server(entry: McpServerEntry) -> (McpServerEntry, bool) {
    let McpServerEntry {
        command,
        args,
        env,
        cwd,
        startup_timeout,
        tool_timeout,
        enabled_tools,
        disabled_tools,
        trusted,
        enabled,
        url,
        bearer_token_env_var,
        env_http_headers,
    } = entry;
    let lost = command.is_some()
        || url.is_some()
        || startup_timeout.is_some()
        || tool_timeout.is_some()
        || enabled == Some(true);
    let kept = McpServerEntry {
        command,
        args,
        env,
        cwd,
        startup_timeout: None,
        tool_timeout: None,
        enabled_tools,
        disabled_tools,
        // Never believed from a project (`mcp::config::merge`).
        trusted,
        enabled: enabled.filter(|on| !on),
        // A project's remote server is never started, trusted or not.
        url,
        bearer_token_env_var,
        env_http_headers,
    };
    (kept, lost)
}

/// One trusted workspace in the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustEntry {
    /// The workspace, canonical.
    pub path: PathBuf,
    /// The digest of its project files when trusted ([`ProjectFiles`]).
    pub digest: String,
    /// Which files those were, for `cadre trust`.
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BookFile {
    #[serde(default)]
    workspace: Vec<TrustEntry>,
}

/// The user's record of trusted workspaces (`<config dir>/trusted.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustBook {
    path: PathBuf,
}

/// This process's writers of trust records, one at a time (see the
/// module's notes on writing).
static WRITER: Mutex<()> = Mutex::new(());

impl TrustBook {
    /// The record in the configuration directory `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self::at(dir.join(TRUST_FILE))
    }

    /// The record at `path`.
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry of `workspace` (canonical), if it was trusted.
    pub fn lookup(&self, workspace: &Path) -> Result<Option<TrustEntry>, ConfigError> {
        Ok(self
            .read()?
            .workspace
            .into_iter()
            .find(|e| e.path == workspace))
    }

    /// Trusts `project`'s files as they are now.
    pub fn grant(&self, project: &ProjectFiles) -> Result<(), ConfigError> {
        self.change(|book| {
            book.workspace.retain(|e| e.path != project.workspace);
            book.workspace.push(TrustEntry {
                path: project.workspace.clone(),
                digest: project.digest.clone(),
                files: project.files.clone(),
            });
        })
    }

    /// Forgets `workspace` (canonical); whether it was trusted.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, ConfigError> {
        let mut found = false;
        self.change(|book| {
            let before = book.workspace.len();
            book.workspace.retain(|e| e.path != workspace);
            found = book.workspace.len() != before;
        })?;
        Ok(found)
    }

    fn error(&self, message: String) -> ConfigError {
        ConfigError {
            path: self.path.display().to_string(),
            message,
        }
    }

    fn read(&self) -> Result<BookFile, ConfigError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => toml::from_str(&text).map_err(|e| self.error(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BookFile::default()),
            Err(e) => Err(self.error(format!("cannot read it: {e}"))),
        }
    }

    /// Re-reads the record, changes it and replaces it whole, under both
    /// locks.
    fn change(&self, edit: impl FnOnce(&mut BookFile)) -> Result<(), ConfigError> {
        let _writer = WRITER.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let io = |what: &str, e: std::io::Error| self.error(format!("cannot {what}: {e}"));
        std::fs::create_dir_all(&dir).map_err(|e| io("create its directory", e))?;
        let mut lock_name = self.path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(PathBuf::from(lock_name))
            .map_err(|e| io("open its lock file", e))?;
        lock.lock().map_err(|e| io("lock it", e))?;
        let written = self.replace(edit, &dir);
        let unlocked = lock.unlock().map_err(|e| io("unlock it", e));
        written.and(unlocked)
    }

    fn replace(&self, edit: impl FnOnce(&mut BookFile), dir: &Path) -> Result<(), ConfigError> {
        let mut book = self.read()?;
        edit(&mut book);
        let text = toml::to_string(&book).map_err(|e| self.error(e.to_string()))?;
        let mut tmp_name = self.path.as_os_str().to_owned();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let io = |what: &str, e: std::io::Error| self.error(format!("cannot {what}: {e}"));
        let mut file = std::fs::File::create(&tmp).map_err(|e| io("write it", e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write it", e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io("replace it", e))?;
        // The rename survives a crash once the directory is synced.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
