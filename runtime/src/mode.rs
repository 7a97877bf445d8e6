//! Interaction modes: what the model may do, and how work is scheduled.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A session's interaction mode (M1).
///
/// Plan is read-only but for the canonical plan file; Work has every tool,
/// subject to the permission posture; Operate has Work's authority and
/// schedules multi-step work as workflows (until workflows land it schedules
/// like Work).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Investigate and write a plan; nothing else changes.
    Plan,
    /// Do the work. Its internal name is `agent`; `act` and `normal` are aliases.
    #[default]
    #[serde(rename = "work", alias = "agent", alias = "act", alias = "normal")]
    Work,
    /// Work's authority, with multi-step work delegated to workflows.
    Operate,
}

impl Mode {
    /// The name shown to users and written to stream-json.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Work => "work",
            Mode::Operate => "operate",
        }
    }
}

impl Mode {
    /// Authority order: Plan < Work < Operate. Plan may change nothing but
    /// its plan file; Operate has Work's tools and delegates. A sub-agent's
    /// mode is never above its parent's.
    pub fn rank(self) -> u8 {
        match self {
            Mode::Plan => 0,
            Mode::Work => 1,
            Mode::Operate => 2,
        }
    }

    /// The narrower of two modes (the lower [`Mode::rank`]).
    pub fn narrower(self, other: Mode) -> Mode {
        if other.rank() < self.rank() {
            other
        } else {
            self
        }
    }

    /// Whether this mode allows no more than `other`.
    pub fn within(self, other: Mode) -> bool {
        self.rank() <= other.rank()
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of `plan`, `work` (`agent`, `act`, `normal`), `operate`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode '{0}': expected plan, work (or agent, act, normal) or operate")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "plan" => Ok(Mode::Plan),
            "work" | "agent" | "act" | "normal" => Ok(Mode::Work),
            "operate" => Ok(Mode::Operate),
            _ => Err(UnknownMode(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_parse_to_work_and_serialize_as_work() {
        for alias in ["work", "agent", "act", "normal", " Work "] {
            assert_eq!(alias.parse::<Mode>(), Ok(Mode::Work), "{alias}");
        }
        assert_eq!(
            serde_json::to_string(&Mode::Work).ok().as_deref(),
            Some("\"work\"")
        );
        let parsed: Mode = serde_json::from_str("\"agent\"").unwrap_or(Mode::Plan);
        assert_eq!(parsed, Mode::Work);
        assert!("drive".parse::<Mode>().is_err());
    }

    #[test]
    fn modes_narrow_plan_below_work_below_operate() {
        let all = [Mode::Plan, Mode::Work, Mode::Operate];
        for a in all {
            for b in all {
                let n = a.narrower(b);
                assert!(n.within(a) && n.within(b), "{a} ∧ {b} = {n}");
                assert!(n == a || n == b);
            }
        }
        assert_eq!(Mode::Operate.narrower(Mode::Plan), Mode::Plan);
        assert_eq!(Mode::Work.narrower(Mode::Operate), Mode::Work);
        assert!(!Mode::Operate.within(Mode::Work));
    }
}
