//! Typed agent and approval ids.
//!
//! An agent's place in its session's tree is an [`AgentPath`]: the empty
//! path is the session itself (shown `main`), `1` its first sub-agent,
//! `1.2` that agent's second. An approval prompt's id names the asking
//! agent and its number there ([`ApprovalId`]: `approval:3` for the
//! session's own, `agent:1.2:approval:3` for a sub-agent's), so an answer
//! is routed down the tree by the path, one hop at a time, never by
//! matching strings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where an agent sits under its session.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentPath(Vec<u32>);

impl AgentPath {
    /// The session itself.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// Whether this is the session itself.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The `n`-th child of this agent.
    pub fn child(&self, n: u32) -> Self {
        let mut segments = self.0.clone();
        segments.push(n);
        Self(segments)
    }

    /// How many levels below the session.
    pub fn depth(&self) -> usize {
        self.0.len()
    }

    /// The parent's path; `None` for the session.
    pub fn parent(&self) -> Option<AgentPath> {
        let (_, parent) = self.0.split_last()?;
        Some(Self(parent.to_vec()))
    }

    /// Which child of `here` leads to this agent: [`Hop::Here`] when it is
    /// `here`, [`Hop::Child`] with the child's number when it is below it,
    /// [`Hop::Elsewhere`] when it is not in `here`'s subtree.
    pub fn hop_from(&self, here: &AgentPath) -> Hop {
        if !self.0.starts_with(&here.0) {
            return Hop::Elsewhere;
        }
        match self.0.get(here.0.len()) {
            None => Hop::Here,
            Some(&n) => Hop::Child(n),
        }
    }
}

/// One step of routing towards an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// The agent is this one.
    Here,
    /// The agent is below the child with this number.
    Child(u32),
    /// The agent is not below this one.
    Elsewhere,
}

impl fmt::Display for AgentPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("main");
        }
        for (i, n) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{n}")?;
        }
        Ok(())
    }
}

/// A string that is not an agent id (`main`, `1`, `1.2`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an agent id (expected main, or numbers joined by dots such as 1.2)")]
pub struct BadAgentId(pub String);

impl FromStr for AgentPath {
    type Err = BadAgentId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "main" {
            return Ok(Self::root());
        }
        s.split('.')
            .map(|segment| {
                segment
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0 && n.to_string() == segment)
            })
            .collect::<Option<Vec<u32>>>()
            .map(Self)
            .ok_or_else(|| BadAgentId(s.to_string()))
    }
}

impl Serialize for AgentPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AgentPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The id of one approval prompt: the asking agent and its number there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApprovalId {
    /// The agent whose call waits.
    pub agent: AgentPath,
    /// The prompt's number within that agent (1, 2, …).
    pub n: u64,
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.agent.is_root() {
            write!(f, "approval:{}", self.n)
        } else {
            write!(f, "agent:{}:approval:{}", self.agent, self.n)
        }
    }
}

/// A string that is not an approval id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an approval id (expected approval:N or agent:ID:approval:N)")]
pub struct BadApprovalId(pub String);

impl FromStr for ApprovalId {
    type Err = BadApprovalId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadApprovalId(s.to_string());
        let (agent, number) = match s.strip_prefix("agent:") {
            Some(rest) => {
                let (agent, number) = rest.split_once(":approval:").ok_or_else(bad)?;
                let agent: AgentPath = agent.parse().map_err(|_| bad())?;
                if agent.is_root() {
                    return Err(bad());
                }
                (agent, number)
            }
            None => (
                AgentPath::root(),
                s.strip_prefix("approval:").ok_or_else(bad)?,
            ),
        };
        let n = number
            .parse::<u64>()
            .ok()
            .filter(|n| n.to_string() == number)
            .ok_or_else(bad)?;
        Ok(Self { agent, n })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_parse_back() {
        for (text, path) in [
            ("main", vec![]),
            ("1", vec![1]),
            ("1.2", vec![1, 2]),
            ("3.10.1", vec![3, 10, 1]),
        ] {
            let parsed: AgentPath = text.parse().expect(text);
            assert_eq!(parsed, AgentPath(path));
            assert_eq!(parsed.to_string(), text);
        }
        for bad in [
            "", ".", "1.", ".1", "0", "01", "1..2", "a", "1.x", "-1", "main.1",
        ] {
            assert!(bad.parse::<AgentPath>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn approval_ids_round_trip_and_refuse_lookalikes() {
        for text in [
            "approval:1",
            "approval:12",
            "agent:1:approval:3",
            "agent:2.1:approval:1",
        ] {
            let id: ApprovalId = text.parse().expect(text);
            assert_eq!(id.to_string(), text);
        }
        for bad in [
            "approval:",
            "approval:x",
            "approval:01",
            "agent::approval:1",
            "agent:main:approval:1",
            "agent:1:approval:",
            "agent:1:1:approval:2",
            "agent:1.:approval:2",
            "other:1",
        ] {
            assert!(bad.parse::<ApprovalId>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn routing_takes_one_hop_at_a_time() {
        let target: AgentPath = "2.1.3".parse().expect("path");
        assert_eq!(target.hop_from(&AgentPath::root()), Hop::Child(2));
        assert_eq!(target.hop_from(&"2".parse().expect("path")), Hop::Child(1));
        assert_eq!(
            target.hop_from(&"2.1".parse().expect("path")),
            Hop::Child(3)
        );
        assert_eq!(target.hop_from(&target), Hop::Here);
        assert_eq!(target.hop_from(&"1".parse().expect("path")), Hop::Elsewhere);
        assert_eq!(
            target.hop_from(&"2.1.3.1".parse().expect("path")),
            Hop::Elsewhere
        );
        assert_eq!(
            target.parent().map(|p| p.to_string()).as_deref(),
            Some("2.1")
        );
        assert_eq!(AgentPath::root().parent(), None);
    }
}
