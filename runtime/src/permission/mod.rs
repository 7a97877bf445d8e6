//! Permissions: who may run what, and who decided (P1–P8, T5).
//!
//! One call passes, in order: the execution gate (mode and allow-list, in
//! `tool::gate`) → rules → the deterministic floor → the posture (Ask
//! prompts, Auto-Review asks the guardian, Full Access allows, Never denies).
//!
//! # Layout
//! - `shell`: a conservative parser for `bash` command lines.
//! - `classify`: per-call safety of `bash` (T5): read-only only when proven.
//! - `floor`: the deterministic floor (P4): proven safe, hard-blocked, or unproven.
//! - `call`: one call as the layers see it, and the paths it names in both
//!   spellings (as written, and where symlinks lead).
//! - `protected`: the paths no tool call writes (P10).
//! - `rules`: allow / ask / deny rules with scopes (P2).
//! - `engine`: the order of the layers, as a pure function (P3).
//! - `guardian`: the Auto-Review guardian's request and answer (P5).
//! - `ledger`: the denial ledger (P8).
//! - `approvals`: calls waiting for a person or the guardian, and their answers.

pub mod approvals;
pub mod call;
pub mod classify;
pub mod engine;
pub mod floor;
pub mod guardian;
pub mod ledger;
pub mod protected;
pub mod rules;
pub mod shell;

pub use call::{Call, RealPaths};
pub use engine::{
    Decision, Evaluation, Layer, Policy, Risk, Verdict, denied_by_rule, evaluate,
    evaluate_with_hook,
};
pub use protected::ProtectedPaths;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How much a session may do without a person (P1). Ordered from the
/// narrowest authority to the widest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Posture {
    /// Only calls classified read-only run; everything else is denied.
    Never,
    /// Ask: a person approves what the floor cannot prove safe (the default).
    #[default]
    #[serde(alias = "ask")]
    Suggest,
    /// Auto-Review: the model guardian reviews what the floor cannot prove safe.
    #[serde(alias = "auto-review", alias = "auto_review")]
    Auto,
    /// Full Access: ordinary calls run; the floor's hard blocks still hold.
    #[serde(alias = "full-access", alias = "full_access")]
    Bypass,
}

impl Posture {
    /// The name written in config and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Posture::Never => "never",
            Posture::Suggest => "suggest",
            Posture::Auto => "auto",
            Posture::Bypass => "bypass",
        }
    }

    /// The narrower of two postures.
    pub fn narrower(self, other: Posture) -> Posture {
        self.min(other)
    }
}

impl fmt::Display for Posture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A posture name that is not one of `suggest` (`ask`), `auto`
/// (`auto-review`), `bypass` (`full-access`), `never`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown posture '{0}': expected suggest (ask), auto (auto-review), bypass (full-access) or never"
)]
pub struct UnknownPosture(pub String);

impl FromStr for Posture {
    type Err = UnknownPosture;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "suggest" | "ask" => Ok(Posture::Suggest),
            "auto" | "auto-review" => Ok(Posture::Auto),
            "bypass" | "full-access" => Ok(Posture::Bypass),
            "never" => Ok(Posture::Never),
            _ => Err(UnknownPosture(s.to_string())),
        }
    }
}
