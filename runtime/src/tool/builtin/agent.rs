//! `agent`: delegate to a sub-agent (S1).
//!
//! The tool only parses the request; the host (the session actor, through
//! [`AgentHost`]) spawns, resumes and waits for sub-agents. Delegating is
//! not itself a side effect: every call a sub-agent makes passes its own
//! gates, under an authority never wider than its parent's.

use serde_json::{Value, json};

use super::{optional_str, required_str};
use crate::tool::AgentRequest;
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// The `agent` tool's name: hosts without sub-agents do not offer it.
pub const AGENT_TOOL: &str = "agent";

/// Delegates to sub-agents.
pub struct Agent(ToolDefinition);

impl Agent {
    pub fn new() -> Self {
        Self(ToolDefinition::new(
            AGENT_TOOL,
            "Delegate work to a sub-agent with its own conversation. action=spawn starts one \
             with `prompt` (and an optional `role`); it returns the agent's report (summary, \
             changes, commands run with exit codes, risks, blockers), or at once with \
             background=true. action=followup sends `prompt` to an existing `agent_id`; \
             action=wait returns a background agent's report; action=roster lists the roles \
             and models. Sub-agents never have more authority than you.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["spawn", "followup", "wait", "roster"]},
                    "prompt": {"type": "string", "description": "The task (spawn, followup)"},
                    "role": {"type": "string", "description": "A configured role (spawn)"},
                    "agent_id": {"type": "string", "description": "The agent (followup, wait)"},
                    "background": {"type": "boolean", "description": "Return at once; collect the report with action=wait"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        ))
    }
}

impl Tool for Agent {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let background = args
                .get("background")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let request = match required_str(&args, "action")? {
                "spawn" => AgentRequest::Spawn {
                    prompt: required_str(&args, "prompt")?.to_string(),
                    role: optional_str(&args, "role").map(str::to_string),
                    background,
                },
                "followup" => AgentRequest::Followup {
                    agent_id: required_str(&args, "agent_id")?.to_string(),
                    prompt: required_str(&args, "prompt")?.to_string(),
                    background,
                },
                "wait" => AgentRequest::Wait {
                    agent_id: required_str(&args, "agent_id")?.to_string(),
                },
                "roster" => AgentRequest::Roster,
                other => return Err(ToolError::invalid(format!("unknown action '{other}'"))),
            };
            let Some(host) = &ctx.agents else {
                return Err(ToolError::failed(
                    "sub-agents are not available in this host",
                ));
            };
            host.call(request).await
        })
    }
}
