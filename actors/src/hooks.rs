//! An agent's hooks as its tasks run them: the hook set of its tree and
//! who it is, so each event says which agent it is about and each hook
//! runs under that agent's sandbox (`docs/hooks.md`).

use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::hooks::{
    HookEnv, HookEvent, HookFuture, HookOutcome, HookSet, HookVerdict, TurnHooks, Who,
    additional_context, continuation, matching, report_failures, tool_event,
};
use cadre_runtime::permission::{Call, Posture};
use cadre_runtime::sandbox::SandboxConfig;
use cadre_runtime::tool::{Safety, Tool, ToolError};
use serde_json::Value;

use crate::kernel::AgentSpec;

/// One agent's hooks, ready to run from any of its tasks.
#[derive(Debug, Clone)]
pub struct AgentHooks {
    hooks: Arc<HookSet>,
    session_id: String,
    agent: String,
    role: String,
    step: Option<String>,
    root: PathBuf,
    dir: PathBuf,
    sandbox: Arc<SandboxConfig>,
}

impl AgentHooks {
    /// The hooks of `spec`'s agent.
    pub fn of(spec: &AgentSpec) -> Self {
        Self {
            hooks: spec.hooks.clone(),
            session_id: spec.session_id.clone(),
            agent: spec.path.to_string(),
            role: spec.role.clone(),
            step: spec.step.clone(),
            root: spec.workspace.root().to_path_buf(),
            dir: spec.paths.dir.clone(),
            sandbox: spec.sandbox.clone(),
        }
    }

    /// Whether any `pre_tool_use` hook is configured.
    pub fn has_pre_tool_use(&self) -> bool {
        !self.hooks.pre_tool_use.is_empty()
    }

    /// Whether any hook of `event` is configured.
    pub fn has(&self, event: HookEvent) -> bool {
        !self.hooks.of(event).is_empty()
    }

    fn who(&self, mode: Mode, posture: Posture) -> Who<'_> {
        Who {
            session_id: &self.session_id,
            agent: &self.agent,
            role: &self.role,
            step: self.step.as_deref(),
            mode,
            posture,
            cwd: &self.root,
        }
    }

    fn env(&self, mode: Mode, posture: Posture) -> HookEnv<'_> {
        HookEnv {
            mode,
            posture,
            root: &self.root,
            dir: &self.dir,
            sandbox: &self.sandbox,
        }
    }

    /// The `pre_tool_use` verdict on `call`, made in `mode` under `posture`.
    pub async fn pre_tool_use(&self, mode: Mode, posture: Posture, call: &Call<'_>) -> HookVerdict {
        let who = self.who(mode, posture);
        let (verdict, ran) =
            cadre_runtime::hooks::pre_tool_use(&self.hooks, &who, call, self.env(mode, posture))
                .await;
        if !ran.is_empty() {
            tracing::info!(hooks = ?ran, ?verdict, tool = %call.def.name, "pre_tool_use hooks");
        }
        verdict
    }

    /// Runs the hooks of a non-tool `event` with its own `fields` added to
    /// the event; each outcome with its command (failures are logged).
    pub async fn run(
        &self,
        event: HookEvent,
        mode: Mode,
        posture: Posture,
        fields: Value,
    ) -> Vec<(String, HookOutcome)> {
        let hooks: Vec<_> = self.hooks.of(event).iter().collect();
        if hooks.is_empty() {
            return Vec::new();
        }
        let json = cadre_runtime::hooks::with(
            cadre_runtime::hooks::base(event, &self.who(mode, posture)),
            fields,
        );
        let outcomes =
            cadre_runtime::hooks::run_hooks(&hooks, &json, self.env(mode, posture)).await;
        for line in cadre_runtime::hooks::report_failures(event, &outcomes) {
            tracing::warn!("{line}");
        }
        outcomes
    }
}

/// The hooks a turn runs itself: the agent's stop hooks after a final
/// answer, its `post_tool_use` hooks after each call, each under its mode
/// and posture in force.
#[derive(Debug)]
pub struct AgentTurnHooks {
    hooks: AgentHooks,
    live: Arc<LiveAuthority>,
    /// `stop` for a session, `step_stop` for a workflow step,
    /// `subagent_stop` for any other agent.
    stop_event: HookEvent,
}

impl AgentTurnHooks {
    /// `spec`'s turn hooks, when it has stop, `post_tool_use` or
    /// `pre_compact` hooks.
    pub fn of(spec: &AgentSpec, live: &Arc<LiveAuthority>) -> Option<Self> {
        let hooks = AgentHooks::of(spec);
        let stop_event = match (spec.is_session(), spec.step.is_some()) {
            (true, _) => HookEvent::Stop,
            (false, true) => HookEvent::StepStop,
            (false, false) => HookEvent::SubagentStop,
        };
        let any = [stop_event, HookEvent::PostToolUse, HookEvent::PreCompact]
            .into_iter()
            .any(|event| hooks.has(event));
        any.then(|| Self {
            hooks,
            live: live.clone(),
            stop_event,
        })
    }

    /// How many continuations its stop hooks may ask for in one turn.
    pub fn stop_checks(&self) -> u32 {
        match self.hooks.has(self.stop_event) {
            true => cadre_runtime::hooks::MAX_STOP_CONTINUATIONS,
            false => 0,
        }
    }
}

impl TurnHooks for AgentTurnHooks {
    fn stop(&self, answer: String) -> HookFuture {
        let hooks = self.hooks.clone();
        let (mode, posture) = (self.live.mode(), self.live.posture());
        let event = self.stop_event;
        Box::pin(async move {
            let outcomes = hooks
                .run(
                    event,
                    mode,
                    posture,
                    serde_json::json!({ "answer": answer }),
                )
                .await;
            continuation(&outcomes)
        })
    }

    fn after_tool(
        &self,
        tool: Arc<dyn Tool>,
        args: Value,
        safety: Safety,
        result: Result<String, ToolError>,
    ) -> HookFuture {
        let hooks = self.hooks.clone();
        let (mode, posture) = (self.live.mode(), self.live.posture());
        Box::pin(async move {
            if !hooks.has(HookEvent::PostToolUse) {
                return None;
            }
            let call = Call::new(tool.definition(), &args, safety, &hooks.root);
            let matched = matching(&hooks.hooks.post_tool_use, &call);
            if matched.is_empty() {
                return None;
            }
            let (ok, output) = match result {
                Ok(text) => (true, text),
                Err(err) => (false, err.to_string()),
            };
            let event = cadre_runtime::hooks::with(
                tool_event(HookEvent::PostToolUse, &hooks.who(mode, posture), &call),
                serde_json::json!({ "tool_result": { "ok": ok, "output": output } }),
            );
            let outcomes =
                cadre_runtime::hooks::run_hooks(&matched, &event, hooks.env(mode, posture)).await;
            for line in report_failures(HookEvent::PostToolUse, &outcomes) {
                tracing::warn!("{line}");
            }
            additional_context(&outcomes)
        })
    }

    fn pre_compact(&self, tokens: u64, window: u64) -> HookFuture {
        let hooks = self.hooks.clone();
        let (mode, posture) = (self.live.mode(), self.live.posture());
        Box::pin(async move {
            let fields = serde_json::json!({ "tokens": tokens, "window": window });
            let outcomes = hooks
                .run(HookEvent::PreCompact, mode, posture, fields)
                .await;
            if !outcomes.is_empty() {
                tracing::info!(
                    hooks = outcomes.len(),
                    tokens,
                    window,
                    "pre_compact hooks ran"
                );
            }
            None
        })
    }
}
