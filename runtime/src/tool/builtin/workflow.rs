//! `workflow`: delegate a multi-step plan to the workflow engine (M5, W8),
//! offered only in Operate.
//!
//! The tool only hands the plan to its host ([`WorkflowHost`]); the host
//! validates it (an invalid plan comes back as this call's error, naming
//! each problem), runs its steps as agents under the caller's authority,
//! and answers once the run is done, blocked or out of budget with the
//! report: completed steps with their outputs, failed and blocked ones
//! with their causes, and what is next. Delegating is not itself a side
//! effect: every call a step makes passes its own gates.

use serde_json::{Value, json};

use crate::mode::Mode;
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// The `workflow` tool's name: hosts without a workflow engine do not offer it.
pub const WORKFLOW_TOOL: &str = "workflow";

/// Delegates a plan to the workflow engine.
pub struct Workflow(ToolDefinition);

impl Workflow {
    pub fn new() -> Self {
        let steps = json!({
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Unique, lowercase letters, digits, _ and -"},
                    "prompt": {"type": "string", "description": "The step's task; may use {{steps.NAME.output}}, {{steps.NAME.outputs}} (a fan-out's answers), {{item}} and {{index}}"},
                    "needs": {"type": "array", "items": {"type": "string"}, "description": "Steps that must have a result first"},
                    "for_each": {"description": "Fan-out: a list, or \"{{steps.NAME.output}}\" of a needed step whose output is \"json\""},
                    "output": {"type": "string", "enum": ["text", "json"]},
                    "mode": {"type": "string", "enum": ["plan", "work"], "description": "plan makes the step read-only"},
                    "role": {"type": "string"},
                    "scope": {"type": "array", "items": {"type": "string"}, "description": "Globs the step may write, relative to the workspace"},
                    "check": {
                        "description": "A command run read-only in the workspace (exit 0 verifies the step), or {\"verifier\": true}: a read-only verifier agent judges the answer against the calls behind it",
                        "anyOf": [
                            {"type": "string"},
                            {"type": "object", "properties": {"verifier": {"const": true}}, "required": ["verifier"], "additionalProperties": false}
                        ]
                    },
                    "isolation": {"type": "string", "enum": ["none", "worktree"], "description": "worktree: the step works in a git worktree of its own"},
                    "merge": {"type": "boolean", "description": "With isolation worktree: bring the step's changes back once it succeeds (a file changed in the workspace too fails it)"},
                    "timeout": {"type": "string", "description": "e.g. 10m"},
                    "retries": {"type": "integer", "minimum": 0, "maximum": 10},
                    "on_failure": {"type": "string", "enum": ["continue", "fail_fast"]},
                    "min_success": {"type": "integer", "minimum": 0}
                },
                "required": ["name", "prompt"],
                "additionalProperties": false
            }
        });
        Self(
            ToolDefinition::new(
                WORKFLOW_TOOL,
                "Delegate multi-step work as a workflow: named steps, each run by its own \
                 sub-agent, with `needs` (dependencies), optional `for_each` fan-out, a write \
                 `scope` and a completion `check`. Independent steps run in parallel; a step \
                 starts only when what it needs has a (verified) result; a failed step blocks \
                 its dependents. Blocks until the run ends, then returns the report: completed \
                 steps with outputs, failed and blocked ones with causes, and what is next. \
                 Do small or tightly coupled work yourself.",
                json!({
                    "type": "object",
                    "properties": {
                        "workflow": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "max_parallel": {"type": "integer", "minimum": 1},
                                "mode": {"type": "string", "enum": ["plan", "work"]}
                            },
                            "required": ["name"],
                            "additionalProperties": false
                        },
                        "steps": steps
                    },
                    "required": ["workflow", "steps"],
                    "additionalProperties": false
                }),
                Safety::ReadOnly,
            )
            .only_in(Mode::Operate),
        )
    }
}

impl Tool for Workflow {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(host) = &ctx.workflows else {
                return Err(ToolError::failed(
                    "workflows are not available in this host",
                ));
            };
            host.run(args).await
        })
    }
}

#[cfg(test)]
mod tests;
