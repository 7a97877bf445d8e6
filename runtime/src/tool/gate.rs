//! The two mode gates (M2, M3), derived from the same definitions.
//!
//! The definition gate decides what the model is shown; the execution gate
//! re-checks every call before it runs, because a provider can return a call
//! for a tool it was never shown. Both ask one question of a definition,
//! [`plan_access`], so there is no second list of names to drift.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::definition::{ErrorCode, Safety, ToolContext, ToolDefinition, ToolError};
use super::registry::{ToolRegistry, admits};
use crate::mode::Mode;

/// What the model is shown of one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The routing name.
    pub name: String,
    /// The description, narrowed to what the mode allows.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// How much of a tool Plan mode lets through.
enum PlanAccess {
    /// Every call (the tool is read-only).
    Full,
    /// Only the calls the tool classifies read-only (T5): `bash` with a
    /// command proven read-only.
    ReadOnlyCalls,
    /// Only calls whose `path` is exactly the canonical plan file.
    PlanFileOnly,
    /// Nothing.
    Denied,
}

fn plan_access(def: &ToolDefinition) -> PlanAccess {
    match (def.safety, def.writes_path_only, def.classifies_calls) {
        (Safety::ReadOnly, _, _) => PlanAccess::Full,
        (Safety::SideEffect, true, _) => PlanAccess::PlanFileOnly,
        (Safety::SideEffect, false, true) => PlanAccess::ReadOnlyCalls,
        (Safety::SideEffect, false, false) => PlanAccess::Denied,
    }
}

/// The definition gate: the tools a model request offers in `mode`, in
/// registry order, after the allow-list.
pub fn definition_gate(
    registry: &ToolRegistry,
    mode: Mode,
    allow: Option<&[String]>,
    plan_file: Option<&Path>,
) -> Vec<ToolSpec> {
    registry
        .allowed(allow)
        .filter(|def| def.only_in.is_none_or(|only| only == mode))
        .filter_map(|def| {
            let description = match mode {
                Mode::Work | Mode::Operate => def.description.clone(),
                Mode::Plan => match plan_access(def) {
                    PlanAccess::Full => def.description.clone(),
                    PlanAccess::ReadOnlyCalls => match &def.plan_note {
                        Some(note) => format!("{note} {}", def.description),
                        None => format!(
                            "Plan mode: read-only commands only (ls, cat, head, wc, grep, rg, \
                             find without -delete/-exec, git status|diff|log|show, …), with no \
                             redirection to files, no `$(…)` and no `&`; anything else is \
                             refused. {}",
                            def.description
                        ),
                    },
                    // An agent without a plan file (a sub-agent) writes nothing.
                    PlanAccess::PlanFileOnly => match plan_file {
                        Some(plan_file) => format!(
                            "Plan mode: limited to the canonical plan file. The only \
                             accepted `path` is exactly {}; every other path is refused. {}",
                            plan_file.display(),
                            def.description
                        ),
                        None => return None,
                    },
                    PlanAccess::Denied => return None,
                },
            };
            Some(ToolSpec {
                name: def.name.clone(),
                description,
                parameters: def.input_schema.clone(),
            })
        })
        .collect()
}

/// The execution gate: whether one call may run in the context's mode.
///
/// `safety` is the tool's classification of this concrete call (T5). The
/// allow-list is checked first, then whether a plan-control tool has a plan
/// lifecycle to drive, then the mode: Plan lets read-only calls
/// through (including calls a classifying tool proved read-only), and path
/// writers only when `path` is exactly the plan file.
pub fn execution_gate(
    def: &ToolDefinition,
    safety: Safety,
    args: &Value,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    if !admits(ctx.allowed_tools.as_deref(), def) {
        return Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!("'{}' is not among this agent's allowed tools", def.name),
        ));
    }
    if def.goal_control && ctx.goals.is_none() {
        return Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!(
                "'{}' works on the session's goal, which this agent does not have",
                def.name
            ),
        ));
    }
    if def.plan_control && ctx.plans.is_none() {
        return Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!(
                "'{}' drives the plan lifecycle, which this agent does not have",
                def.name
            ),
        ));
    }
    let mode = ctx.mode();
    if let Some(only) = def.only_in
        && only != mode
    {
        return Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!(
                "'{}' is only available in {only} mode; the session is in {} mode",
                def.name, mode
            ),
        ));
    }
    match mode {
        Mode::Work | Mode::Operate => Ok(()),
        Mode::Plan if safety == Safety::ReadOnly => Ok(()),
        Mode::Plan => match plan_access(def) {
            PlanAccess::PlanFileOnly => {
                let path = def.path_in(args).unwrap_or_default();
                match ctx.plan_file.as_deref() {
                    _ if ctx.is_plan_file(path) => Ok(()),
                    Some(plan_file) => Err(ToolError::new(
                        ErrorCode::ToolNotAllowed,
                        format!(
                            "Plan mode is read-only: '{}' may only write the plan file {} \
                             (exactly that path), not '{path}'",
                            def.name,
                            plan_file.display()
                        ),
                    )),
                    None => Err(ToolError::new(
                        ErrorCode::ToolNotAllowed,
                        format!(
                            "Plan mode is read-only: this agent has no plan file, so '{}' \
                             may not write anything; report what you found in your answer",
                            def.name
                        ),
                    )),
                }
            }
            PlanAccess::ReadOnlyCalls => Err(ToolError::new(
                ErrorCode::ToolNotAllowed,
                format!(
                    "Plan mode is read-only: this '{}' call is not proven read-only and is \
                     not allowed; run only known read-only commands (no redirection to \
                     files, no substitution, no `&`) or use the read-only tools",
                    def.name
                ),
            )),
            PlanAccess::Full | PlanAccess::Denied => Err(ToolError::new(
                ErrorCode::ToolNotAllowed,
                format!(
                    "Plan mode is read-only: '{}' can change things and is not allowed; \
                     investigate with read-only tools and write the plan file instead",
                    def.name
                ),
            )),
        },
    }
}

/// The file-scope gate: in an agent with a file scope, a path writer may
/// only write paths matching every scope, and other calls that can change
/// things are refused (a shell command can write anywhere). Checked before
/// the permission decision and again just before the call runs.
pub fn scope_gate(
    def: &ToolDefinition,
    safety: Safety,
    args: &Value,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    if ctx.file_scopes.is_empty() || safety == Safety::ReadOnly {
        return Ok(());
    }
    let shown = |scopes: &[Vec<String>]| {
        scopes
            .iter()
            .map(|s| s.join(", "))
            .collect::<Vec<_>>()
            .join("] and [")
    };
    if !def.writes_path_only {
        return Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!(
                "'{}' can change files anywhere, and this agent may only write [{}]; use the file tools",
                def.name,
                shown(&ctx.file_scopes)
            ),
        ));
    }
    let path = def.path_in(args).unwrap_or_default();
    let relative = ctx.resolve(path).ok().and_then(|p| {
        p.strip_prefix(ctx.workspace.root())
            .ok()
            .map(Path::to_path_buf)
    });
    let inside = relative.is_some_and(|rel| {
        ctx.file_scopes.iter().all(|scope| {
            scope.iter().any(|glob| {
                globset::GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .is_ok_and(|g| g.compile_matcher().is_match(&rel))
            })
        })
    });
    if inside {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorCode::ToolNotAllowed,
            format!(
                "'{path}' is outside this agent's file scope [{}]",
                shown(&ctx.file_scopes)
            ),
        ))
    }
}

/// What one turn is offered, beyond the mode: the key under which a host's
/// turns share one list of tool specs instead of building it every turn.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Offer {
    /// The mode.
    pub mode: Mode,
    /// The agent's tool allow-list, when it has one.
    pub allow: Option<Arc<[String]>>,
    /// The agent's plan file (it shows in Plan's descriptions); `None` for an
    /// agent without one.
    pub plan_file: Option<PathBuf>,
    /// Whether the `agent` tool can work here.
    pub agents: bool,
    /// Whether the plan lifecycle exists here (a session, not a sub-agent).
    pub plans: bool,
    /// Whether `enter_plan_mode` is offered (config `plan.agent_entry`).
    pub plan_entry: bool,
    /// Whether the Operate `workflow` tool can work here (a workflow engine
    /// is attached).
    pub workflows: bool,
    /// Whether the goal tools work here (a session, not a sub-agent).
    pub goals: bool,
}

/// The tool specs `offer` gets: the definition gate, then the tools that
/// could only fail here left out.
pub fn offered_tools(registry: &ToolRegistry, offer: &Offer) -> Vec<ToolSpec> {
    let mut tools = definition_gate(
        registry,
        offer.mode,
        offer.allow.as_deref(),
        offer.plan_file.as_deref(),
    );
    tools.retain(|t| {
        let Some(def) = registry.get(&t.name).map(|tool| tool.definition()) else {
            return true;
        };
        if def.name == super::AGENT_TOOL {
            return offer.agents;
        }
        if def.name == super::WORKFLOW_TOOL {
            return offer.workflows;
        }
        // The plan lifecycle is the session's alone; entering Plan on the
        // model's request only where configured.
        if def.goal_control {
            return offer.goals;
        }
        if def.plan_control {
            return offer.plans && (def.name != super::ENTER_PLAN_TOOL || offer.plan_entry);
        }
        true
    });
    tools
}
