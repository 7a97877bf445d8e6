//! The one entry point every tool call goes through (T3).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use super::definition::{Authorization, ErrorCode, Safety, ToolContext, ToolError};
use super::gate::{Offer, ToolSpec, execution_gate, offered_tools, scope_gate};
use super::registry::ToolRegistry;
use crate::message::ToolCall;
use crate::permission::Layer;
use crate::permission::Verdict;

/// What one call produced: its output, or a coded error.
pub type ToolOutcome = Result<String, ToolError>;

/// Runs tool calls: lookup, argument parsing, the execution gate, schema
/// validation, the permission decision, the turn's workspace snapshot (for
/// a call that may change files), the timeout and panic capture, in that
/// order.
#[derive(Debug, Clone)]
pub struct ToolRunner {
    registry: Arc<ToolRegistry>,
    default_timeout: Duration,
    /// Tool specs per [`Offer`], built once and shared by every turn that
    /// gets the same offer.
    offers: Arc<Mutex<HashMap<Offer, Arc<[ToolSpec]>>>>,
}

/// How many offers are kept before the cache starts over (each Plan-mode
/// session has its own, naming its plan file).
const OFFERS_KEPT: usize = 64;

impl ToolRunner {
    /// A runner over `registry` whose calls time out after `default_timeout`
    /// unless a definition says otherwise.
    pub fn new(registry: Arc<ToolRegistry>, default_timeout: Duration) -> Self {
        Self {
            registry,
            default_timeout,
            offers: Arc::default(),
        }
    }

    /// The tool specs a turn with `offer` is offered, shared with every
    /// other turn offered the same.
    pub fn offered(&self, offer: &Offer) -> Arc<[ToolSpec]> {
        let mut offers = self.offers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(specs) = offers.get(offer) {
            return specs.clone();
        }
        if offers.len() >= OFFERS_KEPT {
            offers.clear();
        }
        let specs: Arc<[ToolSpec]> = offered_tools(&self.registry, offer).into();
        offers.insert(offer.clone(), specs.clone());
        specs
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// How long a call may take when its tool sets no timeout of its own.
    pub fn default_timeout(&self) -> Duration {
        self.default_timeout
    }

    /// Executes one call. Never panics and never hangs past the timeout:
    /// every failure comes back as a [`ToolError`] the model can read.
    pub async fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutcome {
        let span = tracing::info_span!("tool_call", call_id = %call.id, tool = %call.name);
        let outcome = self.execute_inner(call, ctx).instrument(span.clone()).await;
        span.in_scope(|| match &outcome {
            Ok(_) => tracing::debug!("tool call succeeded"),
            Err(err) => tracing::debug!(code = %err.code, "tool call failed"),
        });
        outcome
    }

    async fn execute_inner(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutcome {
        let Some(entry) = self.registry.entry(&call.name) else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("there is no tool named '{}'", call.name),
            ));
        };
        let def = entry.tool.definition();
        let args = parse_arguments(&call.arguments)?;
        let safety = entry.tool.classify(&args);
        let gated = execution_gate(def, safety, &args, ctx)
            .map_err(|e| (Layer::Mode, e))
            .and_then(|()| scope_gate(def, safety, &args, ctx).map_err(|e| (Layer::Scope, e)));
        if let Err((gate, mut refused)) = gated {
            if safety == Safety::SideEffect
                && let Some(why) = entry.tool.unproven_because(&args)
            {
                refused.message = format!("{} (why: {why})", refused.message);
            }
            if let Some(authorizer) = &ctx.authorizer {
                // Recorded like every automatic decision; the refusal stands.
                let _ = authorizer
                    .authorize(Authorization {
                        call_id: call.id.clone(),
                        tool: entry.tool.clone(),
                        args,
                        safety,
                        refused: Some((gate, refused.clone())),
                        preview: None,
                        paths: Default::default(),
                    })
                    .await;
            }
            return Err(refused);
        }
        let problems: Vec<String> = entry
            .validator
            .iter_errors(&args)
            .map(|err| match err.instance_path().to_string() {
                path if path.is_empty() => err.to_string(),
                path => format!("{err} at '{path}'"),
            })
            .collect();
        if !problems.is_empty() {
            return Err(ToolError::invalid(format!(
                "arguments for '{}' do not match its schema: {}",
                def.name,
                problems.join("; ")
            )));
        }
        if let Some(authorizer) = &ctx.authorizer {
            let decision = authorizer
                .authorize(Authorization {
                    call_id: call.id.clone(),
                    tool: entry.tool.clone(),
                    paths: ctx.real_paths(def, &args, safety),
                    args: args.clone(),
                    safety,
                    refused: None,
                    preview: None,
                })
                .await;
            if decision.verdict == Verdict::Deny {
                return Err(ToolError::new(ErrorCode::PermissionDenied, decision.reason));
            }
            // The scope again, after the decision: authority only narrows,
            // and a person's approval never widens a scope.
            scope_gate(def, safety, &args, ctx)?;
        }
        if let Some(snapshots) = &ctx.snapshots
            && may_change_workspace(def, safety, &args, ctx)
        {
            snapshots.before_change().await.map_err(|err| {
                ToolError::failed(format!(
                    "the workspace could not be recorded before this call, so it did not run: {err}"
                ))
            })?;
        }
        let limit = def.timeout.unwrap_or(self.default_timeout);
        let after = ctx
            .hooks
            .as_ref()
            .map(|hooks| (hooks.clone(), args.clone()));
        let run = AssertUnwindSafe(entry.tool.run(args, ctx)).catch_unwind();
        let outcome = match tokio::time::timeout(limit, run).await {
            Err(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!("'{}' did not finish within {}", def.name, human(limit)),
            )),
            Ok(Err(panic)) => Err(ToolError::failed(format!(
                "'{}' crashed: {}",
                def.name,
                panic_message(panic.as_ref())
            ))),
            Ok(Ok(outcome)) => outcome,
        };
        // The `post_tool_use` hooks see what ran; their context goes to
        // the model with the result.
        let Some((hooks, args)) = after else {
            return outcome;
        };
        match hooks
            .after_tool(entry.tool.clone(), args, safety, outcome.clone())
            .await
        {
            None => outcome,
            Some(context) => {
                let note = format!("\n[post_tool_use hook]\n{context}");
                match outcome {
                    Ok(text) => Ok(format!("{text}{note}")),
                    Err(mut err) => {
                        err.message.push_str(&note);
                        Err(err)
                    }
                }
            }
        }
    }
}

/// Whether a call that passed every gate may change the workspace, so the
/// turn's snapshot must be taken first (ST4): not a read-only call, nor one
/// that touches only the agent's own state (its task list, its plan file).
fn may_change_workspace(
    def: &super::definition::ToolDefinition,
    safety: Safety,
    args: &Value,
    ctx: &ToolContext,
) -> bool {
    let plan_file = def.writes_path_only
        && ctx.is_plan_file(args.get("path").and_then(Value::as_str).unwrap_or_default());
    safety == Safety::SideEffect && !def.session_state_only && !plan_file
}

/// Arguments must be a JSON object; an empty string means no arguments,
/// which some servers send for tools without parameters.
fn parse_arguments(raw: &str) -> Result<Value, ToolError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(ToolError::invalid(format!(
            "arguments must be a JSON object, got {}",
            kind(&other)
        ))),
        Err(err) => Err(ToolError::invalid(format!(
            "arguments are not valid JSON ({err})"
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn human(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", d.as_secs_f64())
    }
}
