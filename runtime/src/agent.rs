//! Sub-agents' authority and reports (S1–S6), with no actors.
//!
//! **Authority only narrows.** A sub-agent's [`Authority`] is computed from
//! its parent's *current* authority and its role by [`Authority::narrow`]:
//! the narrower posture, the intersection of tool allow-lists, every file
//! scope of every ancestor, the parent's rules plus the role's deny and ask
//! rules (never its allow rules), the narrower mode (Plan < Work <
//! Operate), one level deeper. It is
//! recomputed at spawn, at every follow-up and on resume; nothing a role or
//! a model says can widen it. [`Authority::within`] states the order that
//! the property tests check.

pub mod children;
pub mod core;
pub mod live;
pub mod path;

pub use children::{Child, ChildRefusal, ChildState, ChildTable, Route, Wait};
pub use live::LiveAuthority;
pub use path::{AgentPath, ApprovalId, Hop};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};

use crate::config::RoleConfig;
use crate::mode::Mode;
use crate::model::ModelClient;
use crate::permission::Posture;
use crate::permission::rules::RuleSet;
use crate::protocol::{Event, FailureCategory, ToolStatus, TurnEvent};
use crate::tool::{ToolDefinition, builtin_definitions};

/// Where a role's model client comes from.
pub trait ModelSource: Send + Sync + 'static {
    /// The client for `role`: its own server when it names one, else the
    /// session's (a role's `model` on the same server travels with each
    /// request instead).
    fn client(&self, role: &RoleConfig) -> Result<Arc<dyn ModelClient>, ModelSourceError>;
}

/// Why [`ModelSource::client`] has no client for a role. The role is
/// refused before any request is made, so retrying the same role cannot
/// help: its configuration must change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelSourceError {
    /// The role names its own server but no model, and the session's
    /// model source has no model to lend it (a script, the demo, a given
    /// client). Not retryable: the role must name a `model`.
    #[error("base_url {base_url} needs a model")]
    NoModel {
        /// The server the role names.
        base_url: String,
    },
    /// The client for the role's server could not be built (its HTTP
    /// client refused the settings). Not retryable: the role's server
    /// settings must change.
    #[error(transparent)]
    Client(#[from] crate::model::ModelError),
    /// The role's provider is not configured, or its server has no model
    /// (`model::providers::ChoiceError`). Not retryable: the configuration
    /// must change.
    #[error(transparent)]
    Choice(#[from] crate::model::providers::ChoiceError),
}

/// Every role uses the session's client.
pub struct SameModel(pub Arc<dyn ModelClient>);

impl ModelSource for SameModel {
    fn client(&self, _role: &RoleConfig) -> Result<Arc<dyn ModelClient>, ModelSourceError> {
        Ok(self.0.clone())
    }
}

/// The default number of sub-agent levels below a session.
pub const DEFAULT_MAX_DEPTH: u32 = 3;

/// What one agent may do.
#[derive(Debug, Clone)]
pub struct Authority {
    /// The mode; a sub-agent's is its parent's or narrower (Plan < Work <
    /// Operate).
    pub mode: Mode,
    /// The posture.
    pub posture: Posture,
    /// The tools it may use; `None` means every tool.
    pub allowed_tools: Option<BTreeSet<String>>,
    /// Path globs its writes must match: one list per ancestor that set a
    /// scope, and a path must match every list.
    pub file_scopes: Vec<Vec<String>>,
    /// Every rule in force.
    pub rules: Arc<RuleSet>,
    /// Its depth (0 for a session).
    pub depth: u32,
    /// The deepest level its descendants may reach.
    pub max_depth: u32,
}

/// Why a sub-agent cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefusal {
    /// The depth limit is reached. Not retryable: the limit stays.
    #[error(
        "the sub-agent depth limit ({max_depth}) is reached: an agent at depth {depth} cannot start another"
    )]
    TooDeep {
        /// The parent's depth.
        depth: u32,
        /// The limit.
        max_depth: u32,
    },
    /// A role's configuration is unusable. Not retryable until the
    /// configuration is fixed.
    #[error("role '{role}': {message}")]
    BadRole {
        /// The role.
        role: String,
        /// What is wrong.
        message: String,
    },
}

impl Authority {
    /// A session's own authority: depth 0.
    pub fn root(mode: Mode, posture: Posture, rules: Arc<RuleSet>, max_depth: u32) -> Self {
        Self {
            mode,
            posture,
            allowed_tools: None,
            file_scopes: Vec::new(),
            rules,
            depth: 0,
            max_depth,
        }
    }

    /// A child's authority: the narrower of this one and `role`.
    pub fn narrow(&self, role_name: &str, role: &RoleConfig) -> Result<Authority, SpawnRefusal> {
        if self.depth >= self.max_depth {
            return Err(SpawnRefusal::TooDeep {
                depth: self.depth,
                max_depth: self.max_depth,
            });
        }
        let bad = |message: String| SpawnRefusal::BadRole {
            role: role_name.to_string(),
            message,
        };
        let allowed_tools = match (&self.allowed_tools, &role.allowed_tools) {
            (None, None) => None,
            (Some(mine), None) => Some(mine.clone()),
            (None, Some(theirs)) => Some(theirs.iter().cloned().collect()),
            (Some(mine), Some(theirs)) => Some(
                theirs
                    .iter()
                    .filter(|t| mine.contains(*t))
                    .cloned()
                    .collect(),
            ),
        };
        let mut file_scopes = self.file_scopes.clone();
        if let Some(scope) = &role.file_scope {
            for glob in scope {
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| bad(format!("bad file_scope glob '{glob}': {e}")))?;
            }
            file_scopes.push(scope.clone());
        }
        let rules = self
            .rules
            .with_child_rules(&role.permissions)
            .map_err(|e| bad(e.to_string()))?;
        let depth = self.depth + 1;
        let max_depth = match role.max_depth {
            Some(below) => self.max_depth.min(depth.saturating_add(below)),
            None => self.max_depth,
        };
        Ok(Authority {
            mode: self.mode.narrower(role.mode.unwrap_or(self.mode)),
            posture: self.posture.narrower(role.posture.unwrap_or(self.posture)),
            allowed_tools,
            file_scopes,
            rules: Arc::new(rules),
            depth,
            max_depth,
        })
    }

    /// Whether this authority is within `parent`'s: no wider posture, no
    /// tool the parent lacks, every parent file scope kept, every parent
    /// rule kept, no wider mode, deeper, and no deeper limit.
    pub fn within(&self, parent: &Authority) -> bool {
        let tools = match (&parent.allowed_tools, &self.allowed_tools) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(p), Some(c)) => c.is_subset(p),
        };
        self.mode.within(parent.mode)
            && self.posture <= parent.posture
            && tools
            && parent
                .file_scopes
                .iter()
                .all(|s| self.file_scopes.contains(s))
            && self.rules.contains_all(&parent.rules)
            && self.depth > parent.depth
            && self.max_depth <= parent.max_depth
    }

    /// Whether a tool is allowed by name.
    pub fn allows_tool(&self, name: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|tools| tools.contains(name))
    }
}

/// One command a sub-agent ran, and how it ended: the evidence behind its claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The command line.
    pub command: String,
    /// Its exit code (`None` when it was refused or did not finish).
    pub exit_code: Option<i32>,
}

/// What a sub-agent's run produced (S1, S6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AgentReport {
    /// The agent.
    pub agent_id: String,
    /// Its role.
    pub role: String,
    /// `completed`, `failed`, `cancelled` or `paused_by_denials`.
    pub status: String,
    /// Its final answer.
    pub summary: String,
    /// Files it changed.
    pub changes: Vec<String>,
    /// Commands it ran, with exit codes.
    pub evidence: Vec<Evidence>,
    /// Risks it reported (its `## Risks` section).
    pub risks: Vec<String>,
    /// What blocked it (its `## Blockers` section, or why the run failed).
    pub blockers: Vec<String>,
    /// False when it changed files but ran no command to check them: a
    /// claim without evidence.
    pub verified: bool,
}

/// Builds an [`AgentReport`] from a sub-agent's events, so the report says
/// what happened, not only what the agent claims. Which calls are evidence
/// (a shell tool's commands) and which are changes (a path writer's paths)
/// comes from the tools' definitions, not their names.
#[derive(Debug, Default)]
pub struct ReportBuilder {
    report: AgentReport,
    pending: Vec<(String, String, String)>,
    kinds: HashMap<String, Kind>,
}

/// What a tool's calls are to a report.
#[derive(Debug, Clone)]
enum Kind {
    /// Its `command` is evidence, with the exit code.
    Shell,
    /// The path in this argument is a change, when the call succeeds.
    Writer(String),
}

impl ReportBuilder {
    /// A builder for `agent_id` of `role` whose tools are the built-ins.
    pub fn new(agent_id: &str, role: &str) -> Self {
        Self::for_tools(agent_id, role, builtin_definitions())
    }

    /// A builder for `agent_id` of `role` whose tools are `tools` (a
    /// registry's definitions, host and MCP tools included).
    pub fn for_tools<'a>(
        agent_id: &str,
        role: &str,
        tools: impl IntoIterator<Item = &'a ToolDefinition>,
    ) -> Self {
        let kinds = tools
            .into_iter()
            .filter_map(|def| {
                let kind = if def.shell {
                    Kind::Shell
                } else if def.writes_path_only {
                    Kind::Writer(def.path_arg.clone()?)
                } else {
                    return None;
                };
                Some((def.name.clone(), kind))
            })
            .collect();
        Self {
            report: AgentReport {
                agent_id: agent_id.to_string(),
                role: role.to_string(),
                ..AgentReport::default()
            },
            pending: Vec::new(),
            kinds,
        }
    }

    /// Takes one event of the agent's run; returns the report when the run ends.
    pub fn push(&mut self, event: &Event) -> Option<AgentReport> {
        // A turn's parts are read through the one closed list of them
        // (`Event::turn_event`); nothing else is evidence, a change or the
        // run's end, and another agent's calls are its own report's.
        match event.turn_event()? {
            TurnEvent::Call {
                call_id,
                name,
                arguments,
            } => {
                let subject = match self.kinds.get(name) {
                    Some(Kind::Shell) => arguments.get("command"),
                    Some(Kind::Writer(arg)) => arguments.get(arg),
                    None => arguments.get("path"),
                };
                let subject = subject
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string();
                self.pending
                    .push((call_id.to_string(), name.to_string(), subject));
            }
            TurnEvent::Result {
                call_id,
                status,
                output,
                ..
            } => {
                let at = self.pending.iter().position(|(id, _, _)| id == call_id)?;
                let (_, name, subject) = self.pending.remove(at);
                match self.kinds.get(&name) {
                    Some(Kind::Shell) => self.report.evidence.push(Evidence {
                        command: subject,
                        exit_code: exit_code(output),
                    }),
                    Some(Kind::Writer(_))
                        if status == ToolStatus::Ok && !self.report.changes.contains(&subject) =>
                    {
                        self.report.changes.push(subject);
                    }
                    Some(Kind::Writer(_)) | None => {}
                }
            }
            TurnEvent::Answer(text) => text.clone_into(&mut self.report.summary),
            TurnEvent::Completed { .. } => return Some(self.finish("completed", None)),
            TurnEvent::Failed {
                category, message, ..
            } => {
                let status = match category {
                    FailureCategory::Cancelled => "cancelled",
                    FailureCategory::PausedByDenials => "paused_by_denials",
                    FailureCategory::Agent | FailureCategory::Infrastructure => "failed",
                };
                return Some(self.finish(status, Some(message.to_string())));
            }
        }
        None
    }

    fn finish(&mut self, status: &str, failure: Option<String>) -> AgentReport {
        let mut report = std::mem::take(&mut self.report);
        report.status = status.to_string();
        report.risks = section(&report.summary, "Risks");
        report.blockers = section(&report.summary, "Blockers");
        if let Some(why) = failure {
            report.blockers.push(why);
        }
        report.verified = report.changes.is_empty() || !report.evidence.is_empty();
        // Ready for the agent's next run.
        self.report = AgentReport {
            agent_id: report.agent_id.clone(),
            role: report.role.clone(),
            ..AgentReport::default()
        };
        self.pending.clear();
        report
    }
}

impl AgentReport {
    /// The report as the parent model reads it.
    pub fn render(&self) -> String {
        let mut out = format!(
            "agent {} (role {}) {}\n\nSummary:\n{}\n",
            self.agent_id, self.role, self.status, self.summary
        );
        let list = |items: &[String]| {
            if items.is_empty() {
                "- none\n".to_string()
            } else {
                items.iter().map(|i| format!("- {i}\n")).collect()
            }
        };
        out.push_str("\nChanges:\n");
        out.push_str(&list(&self.changes));
        out.push_str("\nEvidence (commands run):\n");
        if self.evidence.is_empty() {
            out.push_str("- none\n");
        }
        for e in &self.evidence {
            let code = e
                .exit_code
                .map_or_else(|| "did not run".to_string(), |c| format!("exit {c}"));
            out.push_str(&format!("- `{}` → {code}\n", e.command));
        }
        out.push_str("\nRisks:\n");
        out.push_str(&list(&self.risks));
        out.push_str("\nBlockers:\n");
        out.push_str(&list(&self.blockers));
        if !self.verified {
            out.push_str(
                "\nUNVERIFIED: the agent changed files but ran no command to check them.\n",
            );
        }
        out
    }
}

/// `exit code: N` from a `bash` result.
fn exit_code(output: &str) -> Option<i32> {
    output
        .lines()
        .find_map(|l| l.strip_prefix("exit code: "))
        .and_then(|c| c.trim().parse().ok())
}

/// The bullet lines under a `## <name>` heading.
fn section(text: &str, name: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| {
        !l.trim_start_matches('#').trim().eq_ignore_ascii_case(name) || !l.starts_with('#')
    });
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string())
        .filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case("none"))
        .collect()
}

#[cfg(test)]
mod tests;
