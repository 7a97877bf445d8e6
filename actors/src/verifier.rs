//! The verifier (G5, W4): one read-only judge, used for a goal's completion
//! claim and for a workflow step's `check = { verifier = true }`.
//!
//! A verifier is a kernel agent like any other, placed under the agent
//! whose work it judges. Whatever a `[roles.verifier]` in the configuration
//! says, it reads only: its authority is the judged agent's narrowed to
//! Plan mode and posture `never` (read-only tools and read-only bash), with
//! no file scope to write, no sub-agents and no person to ask (a call that
//! would need one is denied). The role may give its model and add to its
//! prompt, never widen it. It gets `run_check`, so it can run the project's
//! own build and tests and still change nothing. It must end its answer
//! with `VERDICT: PASS | FAIL | PARTIAL`, read by
//! `cadre_runtime::goal::parse_verdict`.
//!
//! What it is asked (the objective, the claim, the evidence) is the
//! caller's: a goal and a workflow step describe their work differently.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, Authority, LiveAuthority};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::goal::{VERIFIER_PROMPT, Verdict, parse_verdict};
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Envelope, Event, TurnEvent, Usage};
use cadre_runtime::tool::{RUN_CHECK, RunCheck, ToolRegistry, ToolRunner};

use crate::events::Events;
use crate::kernel::{AgentServices, AgentSpec, Child};
use crate::session::Subagents;

/// The role a verifier runs under (a `[roles.verifier]` may give its
/// model and prompt).
pub const VERIFIER_ROLE: &str = "verifier";

/// How long one of a verifier's `run_check` calls may take: a project's
/// build and tests, not a quick read.
const RUN_CHECK_TIMEOUT: Duration = cadre_runtime::sandbox::DEFAULT_CHECK_TIMEOUT;

/// Where a verifier is placed, and whose work it judges.
pub struct Seat<'a> {
    /// The agent whose work is judged: the verifier shares its session,
    /// workspace, sandbox, guardian and limits, and starts from its model.
    pub judged: &'a AgentSpec,
    /// The judged agent's authority as it is now (a session's mode and
    /// posture may have changed since it started): the verifier's is this,
    /// narrowed.
    pub authority: Authority,
    /// The live authority the verifier answers to: a change of mode or
    /// posture there narrows it too.
    pub parent: Arc<LiveAuthority>,
    /// Its place in the tree.
    pub path: AgentPath,
    /// Its directory (its session files).
    pub dir: PathBuf,
    /// The roles and models, for a configured `[roles.verifier]`: the
    /// judged agent's services' (a workflow step passes its caller's,
    /// unmetered: the verifier's tokens are counted from its turn).
    pub subagents: Option<&'a Subagents>,
    /// The judged agent's services: the verifier's model unless its role
    /// names one, its tools (with `run_check` added) and its store; never
    /// its sub-agents.
    pub services: &'a AgentServices,
}

/// Why a verifier could not be made. Not retryable: the configuration or
/// the tool set must change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifierError {
    /// The narrowed authority was refused (a role that would widen it).
    /// Not retryable.
    Authority(String),
    /// The configured role's model client could not be built. Not
    /// retryable.
    Model(String),
    /// `run_check` could not join the judged agent's tools. Not retryable.
    Tools(String),
}

impl std::fmt::Display for VerifierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifierError::Authority(e) => write!(f, "the verifier's authority: {e}"),
            VerifierError::Model(e) => write!(f, "the verifier's model: {e}"),
            VerifierError::Tools(e) => write!(f, "the verifier's tools: {e}"),
        }
    }
}

impl std::error::Error for VerifierError {}

/// The verifier's spec and services at `seat`.
pub fn verifier(seat: Seat<'_>) -> Result<(AgentSpec, AgentServices), VerifierError> {
    let configured = seat
        .subagents
        .and_then(|s| s.roles.get(VERIFIER_ROLE).cloned());
    // Whatever the configuration says, the verifier reads only.
    let role = RoleConfig {
        mode: Some(Mode::Plan),
        posture: Some(Posture::Never),
        file_scope: None,
        ..configured.clone().unwrap_or_default()
    };
    let mut parent = seat.authority;
    // It starts nothing itself, so an agent at the depth limit can still
    // be verified.
    parent.max_depth = parent.max_depth.max(parent.depth + 1);
    let authority = parent
        .narrow(VERIFIER_ROLE, &role)
        .map_err(|e| VerifierError::Authority(e.to_string()))?;
    let model = match (seat.subagents, configured.is_some()) {
        (Some(subagents), true) => subagents
            .models
            .client(&role)
            .map_err(|e| VerifierError::Model(e.to_string()))?,
        _ => seat.services.model.clone(),
    };
    let prompt = match &role.system_prompt {
        Some(extra) => format!("{VERIFIER_PROMPT}\n\n{extra}"),
        None => VERIFIER_PROMPT.to_string(),
    };
    let judged = seat.judged;
    let spec = judged.verifier(Child {
        path: seat.path,
        role: VERIFIER_ROLE.into(),
        authority,
        live: seat.parent,
        // A role with its own server sends its own model name (or the
        // client's); otherwise the judged agent's model is the default.
        model: match role.base_url {
            Some(_) => role.model.clone(),
            None => role.model.clone().or_else(|| judged.model.clone()),
        },
        prompt: Some(prompt),
        dir: seat.dir,
    });
    let services = AgentServices {
        model,
        tools: with_run_check(&seat.services.tools)?,
        store: seat.services.store.clone(),
        summarizer: seat.services.summarizer.clone(),
        // It starts nothing itself.
        subagents: None,
    };
    Ok((spec, services))
}

/// `tools` and `run_check`, so the verifier can run the project's build
/// and tests and still change nothing.
fn with_run_check(tools: &ToolRunner) -> Result<ToolRunner, VerifierError> {
    let failed = |e: cadre_runtime::tool::RegistryError| VerifierError::Tools(e.to_string());
    let mut registry = ToolRegistry::new();
    for tool in tools.registry().tools() {
        registry.register(tool.clone()).map_err(failed)?;
    }
    if registry.get(RUN_CHECK).is_none() {
        registry
            .register(Arc::new(RunCheck::new(RUN_CHECK_TIMEOUT)))
            .map_err(failed)?;
    }
    Ok(ToolRunner::new(Arc::new(registry), tools.default_timeout()))
}

/// Reads a verifier's events until its turn ends: the verdict of its final
/// answer, and the tokens it spent. Its tool calls go to `shown` as
/// `agent.tool_call` / `agent.tool_result` under `agent`, so a person
/// watching the judged agent sees what the verifier checks.
pub async fn read_verdict(
    mut events: Events,
    agent: &str,
    shown: impl Fn(Event),
) -> (Verdict, Usage) {
    let mut answer = String::new();
    while let Some(Envelope { event, .. }) = events.recv().await {
        if let Some(call) = event.forwarded_call(agent) {
            shown(call);
        }
        match event.turn_event() {
            Some(TurnEvent::Answer(text)) => text.clone_into(&mut answer),
            Some(TurnEvent::Completed { usage }) => return (parse_verdict(&answer), usage),
            Some(TurnEvent::Failed { message, usage, .. }) => {
                return (Verdict::Unavailable(message.to_string()), usage);
            }
            // Its calls reach `shown` above; everything else the verifier
            // does is its own business.
            Some(TurnEvent::Call { .. } | TurnEvent::Result { .. }) | None => {}
        }
    }
    (
        Verdict::Unavailable("the verifier stopped before it answered".into()),
        Usage::default(),
    )
}
