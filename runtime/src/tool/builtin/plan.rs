//! `exit_plan_mode` and `enter_plan_mode` (PL1, PL4): the model's side of
//! the plan lifecycle. The session (through [`PlanHost`]) does the work;
//! both end the turn, because the user answers next.

use serde_json::{Value, json};

use super::optional_str;
use crate::mode::Mode;
use crate::tool::definition::{
    PlanRequest, Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};

/// The name of the tool the session offers only when `plan.agent_entry` is on.
pub const ENTER_PLAN_TOOL: &str = "enter_plan_mode";

/// Submits the plan for approval.
pub struct ExitPlanMode(ToolDefinition);

impl ExitPlanMode {
    pub fn new() -> Self {
        Self(
            ToolDefinition::new(
                "exit_plan_mode",
                "Submit the plan for the user's approval once it is written to the canonical \
                 plan file (beginning with a non-empty `## Summary`). The plan is frozen as it \
                 is now; the turn ends and the user approves, revises or withdraws it.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                // It changes nothing in the workspace; it hands the plan to the user.
                Safety::ReadOnly,
            )
            .only_in(Mode::Plan)
            .as_system()
            .controlling_plan(),
        )
    }
}

impl Tool for ExitPlanMode {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, _args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(host) = &ctx.plans else {
                return Err(ToolError::failed("there is no plan lifecycle in this host"));
            };
            host.request(PlanRequest::Exit).await
        })
    }
}

/// Asks the user to confirm entering Plan mode.
pub struct EnterPlanMode(ToolDefinition);

impl EnterPlanMode {
    pub fn new() -> Self {
        Self(
            ToolDefinition::new(
                ENTER_PLAN_TOOL,
                "Ask the user to switch to Plan mode before changing anything: use it for work \
                 that needs an implementation plan, or when the user asked to approve a plan \
                 first. The turn ends; the user confirms or declines.",
                json!({
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "description": "Why a plan should come first"}
                    },
                    "additionalProperties": false
                }),
                Safety::ReadOnly,
            )
            .only_in(Mode::Work)
            .as_system()
            .controlling_plan(),
        )
    }
}

impl Tool for EnterPlanMode {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(host) = &ctx.plans else {
                return Err(ToolError::failed("there is no plan lifecycle in this host"));
            };
            let reason = optional_str(&args, "reason")
                .unwrap_or_default()
                .to_string();
            host.request(PlanRequest::Enter { reason }).await
        })
    }
}
