//! A [`Policy`] as a Landlock ruleset, and what the kernel enforces.
//!
//! The ruleset restricts the thread that applies it and everything that
//! thread spawns, for life. Each command therefore gets a fresh thread that
//! applies the ruleset and then spawns it (see `run`); cadre's own threads
//! stay unrestricted.
//!
//! The rights are pinned to one ABI ([`PINNED`]), so a crate update cannot
//! add rights that were never tried. The crate's default best-effort mode
//! silently enforces nothing on a kernel without Landlock, so every status
//! is checked: a ruleset that is not enforced is an error, never a quiet
//! success.

use std::fmt;
use std::sync::OnceLock;

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    path_beneath_rules,
};

use super::policy::Policy;

/// The ABI whose rights cadre asks for. From ABI 6 (Linux 6.12) the kernel
/// enforces all of them.
pub const PINNED: ABI = ABI::V7;

/// Whether commands run under Landlock in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Landlock is enforced with this ABI.
    Enforced {
        /// The ABI the kernel enforces (at most [`PINNED`]).
        abi: u32,
        /// The kernel lacks some of the pinned rights: see
        /// `docs/security/sandbox.md` for what each ABI adds.
        partial: bool,
    },
    /// Commands run without a kernel sandbox; the reader alone decides.
    Unavailable(String),
}

impl SandboxStatus {
    /// Whether commands are confined by the kernel.
    pub fn is_enforced(&self) -> bool {
        matches!(self, SandboxStatus::Enforced { .. })
    }
}

impl fmt::Display for SandboxStatus {
    /// `landlock-abi-7`, `landlock-abi-3 (partial)`, `unavailable: …`: the
    /// form `session.started` carries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxStatus::Enforced {
                abi,
                partial: false,
            } => write!(f, "landlock-abi-{abi}"),
            SandboxStatus::Enforced { abi, partial: true } => {
                write!(f, "landlock-abi-{abi} (partial)")
            }
            SandboxStatus::Unavailable(why) => write!(f, "unavailable: {why}"),
        }
    }
}

/// What the kernel enforces for commands, probed once per process on a
/// throwaway thread.
pub fn sandbox_status() -> &'static SandboxStatus {
    static STATUS: OnceLock<SandboxStatus> = OnceLock::new();
    STATUS.get_or_init(probe)
}

fn probe() -> SandboxStatus {
    let outcome = std::thread::Builder::new()
        .name("cadre-sandbox-probe".into())
        .spawn(|| {
            ruleset(false, true)
                .and_then(RulesetCreated::restrict_self)
                .map(|status| (status.ruleset, status.landlock))
        })
        .map_err(|e| format!("cannot start a thread to probe Landlock: {e}"))
        .and_then(|thread| {
            thread
                .join()
                .map_err(|_| "the Landlock probe panicked".to_string())
        });
    match outcome {
        Err(why) => SandboxStatus::Unavailable(why),
        Ok(Err(error)) => SandboxStatus::Unavailable(format!("Landlock failed: {error}")),
        Ok(Ok((ruleset, landlock))) => status_of(&ruleset, landlock),
    }
}

/// The status a probe's outcome means.
pub(crate) fn status_of(ruleset: &RulesetStatus, landlock: LandlockStatus) -> SandboxStatus {
    match (ruleset, landlock) {
        (RulesetStatus::NotEnforced, LandlockStatus::NotEnabled) => SandboxStatus::Unavailable(
            "Landlock is built into this kernel but not enabled (add it to the lsm= boot \
             parameter)"
                .into(),
        ),
        (RulesetStatus::NotEnforced, LandlockStatus::NotImplemented) => SandboxStatus::Unavailable(
            "this kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK), \
                 or a container's seccomp filter hides it"
                .into(),
        ),
        (RulesetStatus::NotEnforced, LandlockStatus::Available { .. }) => {
            SandboxStatus::Unavailable("the kernel enforced none of the requested rights".into())
        }
        (status, LandlockStatus::Available { effective_abi, .. }) => SandboxStatus::Enforced {
            abi: abi_number(effective_abi),
            partial: *status == RulesetStatus::PartiallyEnforced,
        },
        (_, LandlockStatus::NotEnabled | LandlockStatus::NotImplemented) => {
            SandboxStatus::Unavailable("the kernel reported no Landlock support".into())
        }
    }
}

fn abi_number(abi: ABI) -> u32 {
    [
        ABI::V1,
        ABI::V2,
        ABI::V3,
        ABI::V4,
        ABI::V5,
        ABI::V6,
        ABI::V7,
        ABI::V8,
        ABI::V9,
        ABI::V10,
    ]
    .iter()
    .zip(1..)
    .find_map(|(known, n)| (*known == abi).then_some(n))
    .unwrap_or(0)
}

/// A ruleset that handles every filesystem right of [`PINNED`] and grants
/// reading everywhere; TCP is handled (denied) unless `network`, and
/// signals and abstract sockets are scoped when `scoped`.
fn ruleset(network: bool, scoped: bool) -> Result<RulesetCreated, RulesetError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(PINNED))?;
    if !network {
        // Handled with no port rule: no TCP connect or bind at all.
        ruleset = ruleset.handle_access(AccessNet::from_all(PINNED))?;
    }
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(PINNED))?;
    }
    ruleset
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(PINNED)))
}

/// Every filesystem right but making device nodes: a char or block
/// device in a writable directory would open the host's disks or memory.
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(PINNED) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Restricts the calling thread (and what it spawns from now on) to
/// `policy`: its writable set, and its network and scope when `files`;
/// only the network and scope otherwise (bubblewrap, which the thread
/// spawns next, cannot start under a filesystem ruleset; the helper
/// applies that one inside). Call only on a thread made for one command.
pub(crate) fn confine(policy: &Policy, files: bool) -> Result<(), String> {
    let created = if files {
        ruleset(policy.network, policy.scoped)
            .and_then(|r| r.add_rules(path_beneath_rules(&policy.writable, write_rights())))
    } else if policy.network && !policy.scoped {
        // Nothing to restrict outside the files.
        return Ok(());
    } else {
        outside_files(policy.network, policy.scoped)
    };
    enforced(created.and_then(RulesetCreated::restrict_self))
}

/// A ruleset of the network (TCP denied unless `network`) and the scopes
/// (when `scoped`) alone; at least one of them is asked for.
fn outside_files(network: bool, scoped: bool) -> Result<RulesetCreated, RulesetError> {
    let mut ruleset = Ruleset::default();
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(PINNED))?;
    }
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(PINNED))?;
    }
    ruleset.create()
}

/// Restricts the calling process (the in-sandbox helper) to writing
/// only `writable`, TCP unless `network`, signals and abstract sockets to
/// its own processes when `scoped`; reading stays open. One layer for all
/// of it: a second layer would forbid moving files between directories.
pub(crate) fn confine_files(
    writable: &[PathBuf],
    network: bool,
    scoped: bool,
) -> Result<(), String> {
    let created = ruleset(network, scoped)
        .and_then(|r| r.add_rules(path_beneath_rules(writable, write_rights())));
    enforced(created.and_then(RulesetCreated::restrict_self))
}

/// An error unless the kernel enforced the ruleset.
fn enforced(status: Result<RestrictionStatus, RulesetError>) -> Result<(), String> {
    let status = status.map_err(|e| format!("the sandbox could not be applied: {e}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => {
            Err("the sandbox could not be applied: the kernel enforced none of its rules".into())
        }
    }
}
