//! The agent a step attempt starts: its spec (the caller's authority
//! narrowed by the workflow, the step and its role), its services, and the
//! order a node is sent for it.

use cadre_actors::kernel::{AgentServices, AgentSpec, Child};
use cadre_runtime::agent::{AgentPath, ModelSourceError};

use super::SupervisorState;
use crate::cluster::wire::Order;
use crate::scheduler::InstanceId;

impl SupervisorState {
    /// What a node is sent for a step agent: the agent's settings, its
    /// authority and its caller's, to be checked there.
    pub(super) fn order(&self, spec: &AgentSpec, prompt: &str) -> Order {
        let caller = &self.caller;
        Order {
            coordinator: String::new(),
            attempt: 0,
            run_id: spec.session_id.clone(),
            path: spec.path.clone(),
            role: spec.role.clone(),
            caller: (&caller.spec.authority).into(),
            authority: (&spec.authority).into(),
            live: (caller.live.mode(), caller.live.posture()),
            model: spec.model.clone(),
            system_prompt: spec.prompt.clone(),
            max_iterations: spec.max_iterations,
            workspace: spec.workspace.root().to_path_buf(),
            interactive: spec.interactive,
            prompt: prompt.to_string(),
            hooks: (*spec.hooks).clone(),
            step: spec.step.clone(),
        }
    }

    pub(super) fn role_name(&self, id: InstanceId) -> String {
        let step = &self.scheduler.workflow().steps[id.step];
        step.role.clone().unwrap_or_else(|| step.name.clone())
    }

    /// The step's agent: the caller's authority narrowed by the workflow's
    /// ceiling, the step's mode and role, and its scope; the caller's live
    /// authority its parent.
    pub(super) fn spec_for(
        &self,
        id: InstanceId,
        path: &AgentPath,
        scope: Vec<String>,
    ) -> Result<AgentSpec, String> {
        let workflow = self.scheduler.workflow();
        let step = &workflow.steps[id.step];
        let caller = &self.caller.spec;
        let mut role = step
            .role
            .as_ref()
            .and_then(|r| self.roles.get(r).cloned())
            .unwrap_or_default();
        role.mode = Some(role.mode.map_or(step.mode, |m| m.narrower(step.mode)));
        role.posture = match (role.posture, workflow.posture) {
            (Some(a), Some(b)) => Some(a.narrower(b)),
            (a, b) => a.or(b),
        };
        let role_name = self.role_name(id);
        let mut authority = caller
            .authority
            .narrow(&role_name, &role)
            .map_err(|e| format!("the step cannot start: {e}"))?;
        if !scope.is_empty() {
            authority.file_scopes.push(scope);
        }
        // A role with a client of its own (its server, provider or
        // parameters) names its model there; `services_for` gives it.
        let model = step.model.clone().or_else(|| {
            (!role.own_client())
                .then(|| role.model.clone().or_else(|| caller.model.clone()))
                .flatten()
        });
        Ok(caller.step(
            Child {
                path: path.clone(),
                role: role_name,
                authority,
                live: self.caller.live.clone(),
                model,
                prompt: role.system_prompt.clone(),
                dir: self.run_dir.join("agents").join(path.to_string()),
            },
            self.run_id.clone(),
            Some(step.name.clone()),
        ))
    }

    /// The caller's services, with a role's own model client when it needs
    /// one (another server or provider, or parameters of its own).
    pub(super) fn services_for(
        &self,
        role: Option<&str>,
    ) -> Result<AgentServices, ModelSourceError> {
        let mut services = self.caller.services.clone();
        if let Some(role) = role.and_then(|r| self.roles.get(r))
            && role.own_client()
            && let Some(subagents) = &self.caller.services.subagents
        {
            services.model = subagents.models.client(role)?;
        }
        Ok(services)
    }
}
