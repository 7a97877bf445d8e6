//! `create_goal`, `get_goal` and `update_goal` (G3): the model's side of
//! the session's goal. The session (through [`GoalHost`]) does the work.
//!
//! None of them touches the workspace, and none can settle the goal:
//! `update_goal` with `status` only proposes `complete` or `blocked` for
//! the turn's settlement, which verifies a completion claim with a
//! separate read-only verifier.

use serde_json::{Value, json};

use super::{optional_str, required_str};
use crate::goal::{Proposal, parse_tokens};
use crate::tool::definition::{
    GoalHost, GoalToolRequest, Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};

fn goal_tool(name: &str, description: &str, schema: Value) -> ToolDefinition {
    // They change nothing in the workspace; the goal is the session's own
    // state, and its status changes only at settlement.
    ToolDefinition::new(name, description, schema, Safety::ReadOnly)
        .as_system()
        .controlling_goal()
}

fn host(ctx: &ToolContext) -> Result<&dyn GoalHost, ToolError> {
    ctx.goals
        .as_deref()
        .ok_or_else(|| ToolError::failed("there is no goal in this agent"))
}

/// A budget argument: a number, or a string such as `50K`; `null` clears.
fn budget_arg(args: &Value) -> Result<Option<u64>, ToolError> {
    match args.get("token_budget") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolError::invalid("token_budget must be a positive whole number")),
        Some(Value::String(s)) => parse_tokens(s)
            .map(Some)
            .ok_or_else(|| ToolError::invalid(format!("token_budget '{s}' is not a count"))),
        Some(_) => Err(ToolError::invalid(
            "token_budget must be a number or a string such as 50K",
        )),
    }
}

/// Sets a goal, when the user asked for one.
pub struct CreateGoal(ToolDefinition);

impl CreateGoal {
    pub fn new() -> Self {
        Self(goal_tool(
            "create_goal",
            "Set a goal for this session, only when the user explicitly asked you to work \
             toward a goal across turns. The host then continues you turn after turn until a \
             separate verifier confirms the objective is met, a budget runs out, or progress \
             stops.",
            json!({
                "type": "object",
                "properties": {
                    "objective": {"type": "string", "description": "What must be true when the goal is done, checkably"},
                    "token_budget": {"type": ["integer", "string"], "description": "Optional token budget, e.g. 50000 or \"50K\""}
                },
                "required": ["objective"],
                "additionalProperties": false
            }),
        ))
    }
}

impl Tool for CreateGoal {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let objective = required_str(&args, "objective")?.trim().to_string();
            if objective.is_empty() {
                return Err(ToolError::invalid("the objective is empty"));
            }
            let token_budget = budget_arg(&args)?;
            host(ctx)?
                .request(GoalToolRequest::Create {
                    objective,
                    token_budget,
                })
                .await
        })
    }
}

/// Reads the goal.
pub struct GetGoal(ToolDefinition);

impl GetGoal {
    pub fn new() -> Self {
        Self(goal_tool(
            "get_goal",
            "Read the session's goal: objective, status, budgets, usage, and the verifier's \
             last gaps.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ))
    }
}

impl Tool for GetGoal {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, _args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move { host(ctx)?.request(GoalToolRequest::Get).await })
    }
}

/// Proposes a status, or changes the token budget.
pub struct UpdateGoal(ToolDefinition);

impl UpdateGoal {
    pub fn new() -> Self {
        Self(goal_tool(
            "update_goal",
            "Either propose a status for the goal, or change its token budget. status=complete \
             claims the objective is met (give the claim: what you did and how to check it); \
             a separate read-only verifier checks it after this turn, which ends here. \
             status=blocked reports you cannot go on (give the reason). token_budget changes \
             the budget, only when the user asked for it in their own message.",
            json!({
                "type": "object",
                "properties": {
                    "status": {"enum": ["complete", "blocked"]},
                    "claim": {"type": "string", "description": "With complete: what is done and how to verify it"},
                    "reason": {"type": "string", "description": "With blocked: why you cannot go on"},
                    "token_budget": {"type": ["integer", "string", "null"], "description": "A new token budget (null clears it)"}
                },
                "additionalProperties": false
            }),
        ))
    }
}

impl Tool for UpdateGoal {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let status = optional_str(&args, "status");
            let budget = args.get("token_budget").is_some();
            let request = match (status, budget) {
                (Some(_), true) | (None, false) => {
                    return Err(ToolError::invalid(
                        "give either status or token_budget, not both and not neither",
                    ));
                }
                (None, true) => GoalToolRequest::TokenBudget(budget_arg(&args)?),
                (Some("complete"), false) => GoalToolRequest::Propose(Proposal::Complete {
                    claim: optional_str(&args, "claim")
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                }),
                (Some(_), false) => GoalToolRequest::Propose(Proposal::Blocked {
                    reason: optional_str(&args, "reason")
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                }),
            };
            host(ctx)?.request(request).await
        })
    }
}
