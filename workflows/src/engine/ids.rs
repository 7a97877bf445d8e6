//! Approval and agent ids of steps, as the caller sees them.
//!
//! A step's agent is agent `k` under its run, and its own prompts are
//! `agent:k:approval:n`; the caller sees them as
//! `step:<name>[<i>]:approval:<n>` (and a step's sub-agent's as
//! `step:<name>[<i>]:agent:<sub>:approval:<n>`), stable whatever agent
//! number the attempt got. Answers are mapped back the same way.

use cadre_runtime::agent::AgentPath;

/// `step:<name>[<index>]`, the prefix of everything a step instance shows.
pub fn step_prefix(step: &str, index: usize) -> String {
    format!("step:{step}[{index}]")
}

/// An agent id inside a step (`k`, or `k.2.1`) as the caller sees it:
/// `step:<name>[<i>]`, or `step:<name>[<i>]/2.1` for a sub-agent.
pub fn outer_agent_id(prefix: &str, agent: &AgentPath, inner: &str) -> String {
    let own = agent.to_string();
    match inner.strip_prefix(own.as_str()) {
        Some("") => prefix.to_string(),
        Some(rest) => match rest.strip_prefix('.') {
            Some(sub) => format!("{prefix}/{sub}"),
            None => inner.to_string(),
        },
        None => inner.to_string(),
    }
}

/// An approval id raised inside a step (`agent:k:approval:n`,
/// `agent:k.2:approval:n`) as the caller sees it.
pub fn outer_approval_id(prefix: &str, agent: &AgentPath, inner: &str) -> String {
    let Some(rest) = inner.strip_prefix("agent:") else {
        return inner.to_string();
    };
    let Some((who, number)) = rest.split_once(":approval:") else {
        return inner.to_string();
    };
    let own = agent.to_string();
    match who.strip_prefix(own.as_str()) {
        Some("") => format!("{prefix}:approval:{number}"),
        Some(sub) => match sub.strip_prefix('.') {
            Some(sub) => format!("{prefix}:agent:{sub}:approval:{number}"),
            None => inner.to_string(),
        },
        None => inner.to_string(),
    }
}

/// Splits a caller-side approval id into the step, the index and the rest
/// (`approval:n` or `agent:<sub>:approval:n`).
pub fn parse_outer(id: &str) -> Option<(&str, usize, &str)> {
    let rest = id.strip_prefix("step:")?;
    let open = rest.find('[')?;
    let close = open + rest[open..].find("]:")?;
    let index = rest[open + 1..close].parse().ok()?;
    Some((&rest[..open], index, &rest[close + 2..]))
}

/// The id the step's agent knows for `rest` (from [`parse_outer`]).
pub fn inner_approval_id(agent: &AgentPath, rest: &str) -> Option<String> {
    if let Some(n) = rest.strip_prefix("approval:") {
        return Some(format!("agent:{agent}:approval:{n}"));
    }
    let (sub, n) = rest.strip_prefix("agent:")?.split_once(":approval:")?;
    Some(format!("agent:{agent}.{sub}:approval:{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(inner: &str, outer: &str) {
        let agent: AgentPath = "7".parse().expect("path");
        let prefix = step_prefix("review", 3);
        assert_eq!(outer_approval_id(&prefix, &agent, inner), outer);
        let (step, index, rest) = parse_outer(outer).expect("parses");
        assert_eq!((step, index), ("review", 3));
        assert_eq!(inner_approval_id(&agent, rest).as_deref(), Some(inner));
    }

    #[test]
    fn approval_ids_map_both_ways() {
        check("agent:7:approval:2", "step:review[3]:approval:2");
        check("agent:7.1:approval:1", "step:review[3]:agent:1:approval:1");
        check(
            "agent:7.1.4:approval:9",
            "step:review[3]:agent:1.4:approval:9",
        );
        let agent: AgentPath = "7".parse().expect("path");
        assert_eq!(outer_agent_id("step:a[0]", &agent, "7"), "step:a[0]");
        assert_eq!(outer_agent_id("step:a[0]", &agent, "7.2"), "step:a[0]/2");
        assert_eq!(outer_agent_id("step:a[0]", &agent, "70"), "70");
        assert_eq!(parse_outer("approval:1"), None);
        assert_eq!(parse_outer("step:x[a]:approval:1"), None);
    }
}
