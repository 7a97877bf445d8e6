//! Opening an agent and starting its turns.
//!
//! The opening reads the agent back from the store (creating its record
//! the first time, taking a session's lease) and hands the core what it
//! found; a message whose turn was interrupted continues (it is not run
//! again), and calls the crash left unanswered are closed. Admission, a
//! turn's start and its end are the core's decisions, each stored in its
//! own store trip before it is announced (`perform.rs`); this file builds
//! and spawns the turn the core starts.

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::core::{AgentInput, First, Opened, RestoredChild, TurnStart};
use cadre_runtime::context::Pinned;
use cadre_runtime::model::RequestContext;
use cadre_runtime::prompt::{PromptInput, system_prompt};
use cadre_runtime::snapshot::{Mark, TurnSnapshotter};
use cadre_runtime::store::StoreError;
use cadre_runtime::tool::{Offer, ToolContext};
use cadre_runtime::turn::{TurnConfig, TurnMachine};
use ractor::{Actor, ActorRef};

use super::perform::queued;
use super::{SessionMsg, SessionState, agents, authority, plan as plan_host};
use crate::store::{FirstMessage, SessionOpen, StoreRequest};
use crate::turn::{TurnActor, TurnArgs};

impl SessionState {
    /// Reads the agent back from the store (creating its record the first
    /// time, taking a session's lease): mode, posture, conversation, queue,
    /// pending questionnaire, sub-agents, goal.
    pub(super) async fn open(&mut self, myself: &ActorRef<SessionMsg>) -> Result<(), StoreError> {
        let spec = &self.spec;
        let agent = (!spec.is_session()).then(|| {
            let parent = match spec.path.parent() {
                Some(p) if !p.is_root() => format!("{}/{p}", spec.session_id),
                _ => spec.session_id.clone(),
            };
            (parent, spec.path.clone(), spec.role.clone())
        });
        let open = SessionOpen {
            id: self.row.to_string(),
            workspace: spec.workspace.root().to_path_buf(),
            mode: spec.authority.mode,
            mode_given: spec.mode_given,
            posture: spec.authority.posture,
            posture_given: spec.posture_given,
            lease: spec.is_session(),
            agent,
            first: spec.first_message.clone().map(|content| FirstMessage {
                content,
                key: uuid::Uuid::now_v7().to_string(),
            }),
        };
        let opened = self
            .store
            .ask(|reply| StoreRequest::Open(open, reply))
            .await?;
        let first = match (self.spec.first_message.clone(), opened.first) {
            (Some(text), Some(admitted)) => Some(First::Admitted {
                text,
                id: admitted.id,
            }),
            (Some(text), None) => Some(First::Queue(text)),
            (None, _) => None,
        };
        let pending = opened.pending.into_iter().map(queued).collect();
        self.start = Some((pending, first));
        let children = opened
            .children
            .into_iter()
            .map(|child| RestoredChild {
                path: child.path,
                role: child.role,
                state: child.state,
                report: child.report,
            })
            .collect();
        let opened = Opened {
            stored: Some((opened.record.mode, opened.record.posture)),
            conversation: opened.conversation,
            turns: opened.turns,
            questionnaire: opened.questionnaire,
            children,
            goal: opened.goal,
        };
        self.run(myself, AgentInput::Opened(Box::new(opened))).await;
        Ok(())
    }

    /// Starts the turn the core decided on; the answer is an input when
    /// its actor could not start.
    pub(super) async fn spawn_turn(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        start: TurnStart,
    ) -> Option<AgentInput> {
        let turn_id = start.turn_id;
        let mut args = self.turn_args(myself, &start);
        args.events = self.events.caused_by(start.cause);
        match Actor::spawn_linked(None, TurnActor, args, myself.get_cell()).await {
            Ok((actor, _join)) => {
                self.turn = Some(actor);
                None
            }
            Err(error) => Some(AgentInput::TurnUnstarted {
                turn_id,
                error: error.to_string(),
            }),
        }
    }

    /// What a new turn runs with: the tools the mode offers now, the
    /// prompt, and the hooks its tool calls use.
    fn turn_args(&self, myself: &ActorRef<SessionMsg>, start: &TurnStart) -> TurnArgs {
        let turn_id = start.turn_id;
        let spec = &self.spec;
        let mode = self.mode();
        // A sub-agent has no plan file and no plan lifecycle of its own.
        let plan_file = spec.is_session().then(|| spec.paths.plan_file());
        let allowed: Option<Arc<[String]>> = spec
            .authority
            .allowed_tools
            .as_ref()
            .map(|tools| tools.iter().cloned().collect());
        let plans = spec.is_session();
        let subagents = &self.services.subagents;
        let workflows = subagents.as_ref().is_some_and(|s| s.workflows().is_some());
        let offer = Offer {
            mode,
            allow: allowed.clone(),
            // Only Plan's descriptions name the plan file.
            plan_file: plan_file.clone().filter(|_| mode == Mode::Plan),
            agents: subagents.is_some(),
            plans,
            plan_entry: spec.plan_agent_entry,
            workflows,
            goals: spec.is_session(),
        };
        // The summary turn after a goal's budget stop runs with no tools.
        let tools = if start.tools {
            self.services.tools.offered(&offer)
        } else {
            Arc::from(Vec::new())
        };
        let root = spec.workspace.root();
        let system = system_prompt(&PromptInput {
            mode,
            posture: self.live.posture(),
            session: spec.is_session(),
            delegates: subagents.is_some(),
            environment: spec.grounding.environment.as_deref(),
            workspace: root,
            instructions: spec.grounding.instructions.as_deref(),
            role: spec.prompt.as_deref(),
        });
        let shown_plan_file = plan_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let turn_hooks = crate::hooks::AgentTurnHooks::of(spec, &self.live);
        let turn = TurnConfig {
            turn_id,
            mode,
            max_iterations: spec.max_iterations,
            system: cadre_runtime::prompt::shared(system),
            tools,
            context: RequestContext {
                agent_id: spec.path.to_string().into(),
                role: spec.role.as_str().into(),
                mode,
                turn: turn_id,
                iteration: 0,
                session_id: spec.session_id.as_str().into(),
                workspace: root.display().to_string().into(),
                plan_file: shown_plan_file.into(),
            },
            plan_file: plan_file.clone(),
            model: spec.model.as_deref().map(Arc::from),
            budget: start.budget.clone(),
            context_budget: spec.context,
            pinned: Pinned {
                role: spec.role.clone(),
                mode,
                goal: start.goal.clone(),
                plan: plan_file.as_ref().map(|p| p.display().to_string()),
                instructions: spec
                    .grounding
                    .instructions
                    .as_deref()
                    .filter(|i| !i.is_empty())
                    .map(|i| {
                        let files: Vec<String> =
                            i.files.iter().map(|f| f.display().to_string()).collect();
                        format!("{} (SHA-256 {})", files.join(", "), i.sha256)
                    }),
            },
            compact_first: start.compact_first,
            stop_checks: turn_hooks.as_ref().map_or(0, |h| h.stop_checks()),
        };
        let tool_context = ToolContext {
            workspace: spec.workspace.clone(),
            authority: self.live.clone(),
            sandbox: spec.sandbox.clone(),
            session_dir: spec.paths.dir.clone(),
            plan_file: plan_file.clone(),
            allowed_tools: allowed,
            authorizer: Some(Arc::new(authority::SessionAuthorizer {
                session: myself.clone(),
                turn_id,
                policy: authority::task_policy(&self.spec, &self.live),
                store: self.store.clone(),
            })),
            file_scopes: spec.authority.file_scopes.clone(),
            agents: subagents.is_some().then(|| {
                Arc::new(agents::SessionAgentHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::AgentHost>
            }),
            plans: plans.then(|| {
                Arc::new(plan_host::SessionPlanHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::PlanHost>
            }),
            workflows: workflows.then(|| {
                Arc::new(agents::SessionWorkflowHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::WorkflowHost>
            }),
            goals: spec.is_session().then(|| {
                Arc::new(super::goal::SessionGoalHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::GoalHost>
            }),
            rules: Some(spec.authority.rules.clone()),
            snapshots: spec.snapshots.clone().map(|snapshots| {
                let mark = Mark {
                    session: spec.session_id.clone(),
                    agent: spec.path.to_string(),
                    turn: Some(turn_id),
                    label: format!("before turn {turn_id} of {}", spec.path),
                };
                Arc::new(TurnSnapshotter::new(snapshots, mark))
                    as Arc<dyn cadre_runtime::tool::Snapshotter>
            }),
            processes: Some(spec.process_scope()),
            hooks: turn_hooks
                .map(|hooks| Arc::new(hooks) as Arc<dyn cadre_runtime::hooks::TurnHooks>),
        };
        TurnArgs {
            machine: TurnMachine::new(turn, &start.conversation),
            supervisor: myself.get_derived(),
            model: self.services.model.clone(),
            summarizer: self.services.summarizer.clone(),
            tools: self.services.tools.clone(),
            tool_context: Arc::new(tool_context),
            events: self.events.clone(),
            span: self.span.clone(),
        }
    }
}
