//! An agent's hooks as its tasks run them: the hook set of its tree and
//! who it is, so each event says which agent it is about and each hook
//! runs under that agent's sandbox (`docs/hooks.md`).

use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::hooks::{HookEnv, HookEvent, HookOutcome, HookSet, HookVerdict, Who};
use cadre_runtime::permission::{Call, Posture};
use cadre_runtime::sandbox::SandboxConfig;
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
