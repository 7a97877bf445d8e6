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
/// `step:<name>[<i>]`, or `step:<name>[<i>]/2.1` for a sub-agent; `None`
/// for an id that is not the step's agent or under it (a node cannot
/// speak for other agents).
pub fn outer_agent_id(prefix: &str, agent: &AgentPath, inner: &str) -> Option<String> {
    match under(agent, inner)? {
        "" => Some(prefix.to_string()),
        sub => Some(format!("{prefix}/{sub}")),
    }
}

/// An approval id raised inside a step (`agent:k:approval:n`,
/// `agent:k.2:approval:n`) as the caller sees it; `None` for an id that is
/// not the step's agent's or one of its sub-agents' (a node cannot raise a
/// prompt the caller would answer for another agent).
pub fn outer_approval_id(prefix: &str, agent: &AgentPath, inner: &str) -> Option<String> {
    let (who, number) = inner.strip_prefix("agent:")?.split_once(":approval:")?;
    if !is_number(number) {
        return None;
    }
    match under(agent, who)? {
        "" => Some(format!("{prefix}:approval:{number}")),
        sub => Some(format!("{prefix}:agent:{sub}:approval:{number}")),
    }
}

/// Where `inner` lies under `agent`: `""` for the agent itself, `2.1`
/// for a sub-agent, `None` elsewhere.
fn under<'a>(agent: &AgentPath, inner: &'a str) -> Option<&'a str> {
    let own = agent.to_string();
    match inner.strip_prefix(own.as_str())? {
        "" => Some(""),
        rest => {
            let sub = rest.strip_prefix('.')?;
            sub.split('.').all(is_number).then_some(sub)
        }
    }
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
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
        assert_eq!(
            outer_approval_id(&prefix, &agent, inner).as_deref(),
            Some(outer)
        );
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
        assert_eq!(
            outer_agent_id("step:a[0]", &agent, "7").as_deref(),
            Some("step:a[0]")
        );
        assert_eq!(
            outer_agent_id("step:a[0]", &agent, "7.2").as_deref(),
            Some("step:a[0]/2")
        );
        assert_eq!(parse_outer("approval:1"), None);
        assert_eq!(parse_outer("step:x[a]:approval:1"), None);
    }

    /// An id a step's agent (or a node speaking for it) raises that is not
    /// its own or its sub-agents' is not shown to the caller at all.
    fn check_foreign(inner: &str) {
        let agent: AgentPath = "7".parse().expect("path");
        let prefix = step_prefix("review", 3);
        assert_eq!(outer_approval_id(&prefix, &agent, inner), None, "{inner}");
        assert_eq!(outer_agent_id(&prefix, &agent, inner), None, "{inner}");
    }

    #[test]
    fn a_node_cannot_raise_a_prompt_for_another_agent() {
        // The caller's own prompts, another step's, another agent's.
        check_foreign("approval:3");
        check_foreign("step:other[0]:approval:1");
        check_foreign("agent:8:approval:1");
        check_foreign("agent:70:approval:1");
        check_foreign("agent:7x:approval:1");
        check_foreign("agent:7.:approval:1");
        check_foreign("agent:7.1a:approval:1");
        check_foreign("agent:7:approval:");
        check_foreign("agent:7:approval:1:agent:8:approval:2");
        check_foreign("main");
        check_foreign("70");
        check_foreign("");
    }
}
