//! A node's check of what it is sent, with no actors (D1, S2): the step's
//! authority must be within its caller's, the workspace must be one the
//! node serves, and the node's own ceiling narrows both further. Nothing
//! a coordinator sends can make a node run an agent wider than the caller
//! it names, or wider than the node allows.

use std::path::{Path, PathBuf};

use cadre_runtime::Mode;
use cadre_runtime::agent::Authority;
use cadre_runtime::permission::Posture;
use cadre_runtime::permission::rules::{PermissionRules, RuleError, RuleSet};

use super::wire::Order;

/// A coordinator-side workspace root and where the node has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The root as the coordinator names it.
    pub coordinator: PathBuf,
    /// The same tree on the node.
    pub local: PathBuf,
}

impl Mapping {
    /// Where `path` (under [`Mapping::coordinator`]) is on the node; `None`
    /// for a path that is not under it, or that climbs out of it again
    /// (`..`).
    pub fn map(&self, path: &Path) -> Option<PathBuf> {
        let rest = path.strip_prefix(&self.coordinator).ok()?;
        if !rest
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return None;
        }
        Some(if rest.as_os_str().is_empty() {
            self.local.clone()
        } else {
            self.local.join(rest)
        })
    }
}

/// The most a node lets any agent do, whatever it is sent.
#[derive(Debug, Clone, Default)]
pub struct Ceiling {
    /// The widest mode.
    pub mode: Mode,
    /// The widest posture.
    pub posture: Posture,
    /// Deny and ask rules added to every agent's (allow rules are ignored:
    /// a node narrows, never widens).
    pub rules: PermissionRules,
}

impl Ceiling {
    /// No narrowing: Operate and Full Access, no rules of its own.
    pub fn none() -> Self {
        Self {
            mode: Mode::Operate,
            posture: Posture::Bypass,
            rules: PermissionRules::default(),
        }
    }
}

/// What a node runs an order as.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The step's authority, narrowed by the node's ceiling, its rules
    /// also written for the node's paths.
    pub authority: Authority,
    /// The caller's live mode and posture as the node holds them: under
    /// the ceiling.
    pub live: (Mode, Posture),
    /// The workspace root on the node.
    pub workspace: PathBuf,
}

/// Why a node refuses an order. None is retryable on the same node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The node does not serve the workspace. Not retryable here.
    #[error("node does not serve workspace {0}")]
    Workspace(PathBuf),
    /// A rule of the order does not parse. Not retryable.
    #[error("a rule of the order does not parse: {0}")]
    Rule(#[from] RuleError),
    /// The step's authority is wider than its caller's. Not retryable.
    #[error("the step's authority is wider than its caller's")]
    Wider,
    /// The live mode or posture is wider than the caller's authority. Not
    /// retryable.
    #[error("the caller's live mode or posture is wider than its authority")]
    WiderLive,
    /// The run id is not a plain name (it names the agent's scratch
    /// directory on the node). Not retryable.
    #[error("the run id {0:?} is not a plain name")]
    RunId(String),
}

/// Checks `order` and narrows it by `ceiling`.
pub fn admit(order: &Order, ceiling: &Ceiling, served: &[Mapping]) -> Result<Admitted, Refusal> {
    if !plain_name(&order.run_id) {
        return Err(Refusal::RunId(order.run_id.clone()));
    }
    let workspace = served
        .iter()
        .find_map(|m| m.map(&order.workspace))
        .ok_or_else(|| Refusal::Workspace(order.workspace.clone()))?;
    let caller = order.caller.parse()?;
    let step = order.authority.parse()?;
    if !step.within(&caller) {
        return Err(Refusal::Wider);
    }
    let (live_mode, live_posture) = order.live;
    if !live_mode.within(caller.mode) || live_posture > caller.posture {
        return Err(Refusal::WiderLive);
    }
    let mut rules = step.rules.with_child_rules(&ceiling.rules)?;
    remap_rules(&mut rules, &step.rules, &order.workspace, &workspace)?;
    let authority = Authority {
        mode: step.mode.narrower(ceiling.mode),
        posture: step.posture.narrower(ceiling.posture),
        rules: std::sync::Arc::new(rules),
        ..step
    };
    Ok(Admitted {
        authority,
        live: (
            live_mode.narrower(ceiling.mode),
            live_posture.narrower(ceiling.posture),
        ),
        workspace,
    })
}

/// A name that is one path component and nothing else: letters, digits,
/// `-`, `_`, at most 128 of them.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Adds, for each rule naming the coordinator's workspace root, the same
/// rule naming the node's: an absolute path rule holds on the node's copy
/// of the tree as it did on the coordinator's. The originals stay.
fn remap_rules(
    into: &mut RuleSet,
    rules: &RuleSet,
    from: &Path,
    to: &Path,
) -> Result<(), RuleError> {
    let (Some(from), Some(to)) = (from.to_str(), to.to_str()) else {
        return Ok(());
    };
    if from == to {
        return Ok(());
    }
    for rule in rules.iter() {
        if rule.text().contains(from) {
            into.add(rule.kind(), rule.scope(), &rule.text().replace(from, to))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
