//! Opening the session, admission, and the life of a turn, kept in the store.
//!
//! A user message is admitted (one store transaction with its mode intent
//! and position) before it is acknowledged. Starting its turn marks it
//! running and stores it in the conversation, in one transaction; finishing
//! marks it done. Recorded messages, events and audit records are batched
//! by the store. On resume, the conversation and the queue are read
//! back: a message whose turn was interrupted continues (it is not run
//! again), and calls the crash left unanswered are closed.
//!
//! These handlers wait for the store (one trip to its thread, a few
//! hundred microseconds): an admitted message must be stored before it is
//! acknowledged, and a turn's end before it is announced. Nothing else
//! waits on the mailbox.

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::context::{Pinned, goal_state};
use cadre_runtime::lifecycle::{QueueInput, Queued};
use cadre_runtime::message::Message;
use cadre_runtime::model::RequestContext;
use cadre_runtime::plan::lifecycle::entry_refusal;
use cadre_runtime::prompt::{PromptInput, system_prompt};
use cadre_runtime::protocol::{Event, FailureCategory, Usage};
use cadre_runtime::snapshot::{Mark, TurnSnapshotter};
use cadre_runtime::store::{ModeIntent, QueuedMessage, StoreError};
use cadre_runtime::tool::{Offer, ToolContext};
use cadre_runtime::turn::{TurnConfig, TurnMachine};
use ractor::{Actor, ActorRef, RpcReplyPort};

/// The answer a resume gives a call the stopped process left unanswered.
pub(super) const INTERRUPTED: &str = "interrupted: this call may have run before cadre stopped (a \
     crash or a kill), and cadre did not run it again; check its effects before repeating it";

use super::{SessionMsg, SessionState, agents, authority, plan as plan_host};
use crate::store::{FirstMessage, SessionOpen, StoreRequest};
use crate::turn::{TurnActor, TurnArgs};

/// The message an agent starts with (`AgentSpec::first_message`).
pub(super) enum First {
    /// Admitted by the opening, its turn started.
    Admitted(String, cadre_runtime::store::Admitted),
    /// To admit once the agent runs (a resumed agent's).
    Queue(String),
}

fn queued(m: QueuedMessage) -> Queued {
    Queued {
        id: Some(m.id),
        text: m.content,
        interrupted: m.interrupted,
        cause: None,
        internal: m.source == cadre_runtime::store::Source::Continuation,
    }
}

impl SessionState {
    /// Runs a write against the store; a failure is logged (the session
    /// keeps its state in memory; the turn's end reports a lost write).
    pub(super) async fn persist(
        &self,
        request: impl FnOnce(RpcReplyPort<Result<(), StoreError>>) -> StoreRequest,
    ) {
        if let Err(err) = self.store.ask(request).await {
            tracing::error!(parent: &self.span, %err, "the store could not record a change");
        }
    }

    /// Reads the agent back from the store (creating its record the first
    /// time, taking a session's lease): mode, posture, conversation, queue,
    /// pending questionnaire, sub-agents.
    pub(super) async fn open(&mut self) -> Result<(), StoreError> {
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
        // A sub-agent's mode and posture come from its parent, at spawn;
        // a session's from the store (the host's flags already applied).
        if self.spec.is_session() {
            self.live.set_mode(opened.record.mode);
            self.authority.posture = opened.record.posture;
            self.publish_posture();
        }
        self.conversation = opened.conversation.into_iter().map(Arc::new).collect();
        self.resumed_queue = opened.pending.into_iter().map(queued).collect();
        self.queue = cadre_runtime::lifecycle::TurnQueue::after(opened.turns);
        self.questionnaire = opened.questionnaire;
        for child in opened.children {
            self.children
                .table
                .restored(&child.path, child.role, child.state, child.report);
        }
        // A crash can leave calls without answers; the next request must
        // answer every one. A side-effecting call was stored before it
        // started, so it may have run: the model is told so, and cadre never
        // runs it again itself (the exactly-once rule).
        self.answer_unanswered(INTERRUPTED);
        self.goal.machine.restore(opened.goal);
        self.first = match (self.spec.first_message.clone(), opened.first) {
            (Some(text), Some(admitted)) => Some(First::Admitted(text, admitted)),
            (Some(text), None) => Some(First::Queue(text)),
            (None, _) => None,
        };
        Ok(())
    }

    /// Runs the first message its opening admitted (its turn's start is
    /// stored already), as an admission through `admit_user` ends.
    pub(super) async fn admitted_first(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        text: String,
        admitted: cadre_runtime::store::Admitted,
    ) {
        let recorded = self.queue.would_start_now();
        if !recorded {
            tracing::warn!(parent: &self.span, "a new agent's first message found its queue busy");
        }
        let message = Queued {
            id: Some(admitted.id),
            text,
            interrupted: false,
            cause: None,
            internal: false,
        };
        let effects = self.queue.step(QueueInput::Admitted(message));
        self.perform(myself, effects, recorded).await;
    }

    /// Re-reads the queue after the store changed it (an answer admitted a
    /// message at the front) and starts what may start.
    pub(super) async fn reload_queue(&mut self, myself: &ActorRef<SessionMsg>) {
        let session_id = self.row.to_string();
        match self
            .store
            .ask(|reply| StoreRequest::Pending { session_id, reply })
            .await
        {
            Ok(pending) => {
                let stored = pending.into_iter().map(queued).collect();
                let effects = self.queue.step(QueueInput::Reloaded(stored));
                self.perform(myself, effects, false).await;
            }
            Err(err) => tracing::error!(parent: &self.span, %err, "the queue could not be read"),
        }
    }

    /// Admits a user message (with its mode intent), then runs it or queues it.
    pub(super) async fn admit_user(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        text: String,
        intent: Option<ModeIntent>,
    ) {
        if intent.is_some() && self.queue.running().is_some() {
            return self.reject(
                "user_input",
                "a turn is running: a mode change cannot ride on this message; cancel first, or send it without one",
            );
        }
        if intent == Some(ModeIntent::PlanEntry)
            && let Some(refusal) = entry_refusal(self.mode(), self.questionnaire.as_deref())
        {
            return self.reject("user_input", refusal);
        }
        // When the message runs at once, its admission and its turn's start
        // share one trip to the store (two transactions, in that order).
        let starts_now = self.queue.would_start_now();
        let session_id = self.row.to_string();
        let content = text.clone();
        let plan_file = self.spec.paths.plan_file();
        let start_seq = starts_now.then_some(self.conversation.len() as i64);
        let admitted = self
            .store
            .ask(|reply| StoreRequest::Admit {
                session_id,
                content,
                intent,
                key: uuid::Uuid::now_v7().to_string(),
                plan_file,
                start_seq,
                reply,
            })
            .await;
        let (backup, admitted) = match admitted {
            Ok(done) => done,
            Err(err) => {
                return self.emit(Event::OpRejected {
                    op: "user_input".into(),
                    message: format!("the message was not admitted: {err}"),
                    retryable: err.is_retryable(),
                });
            }
        };
        match intent {
            Some(ModeIntent::PlanEntry) => {
                self.live.set_mode(Mode::Plan);
                self.emit(Event::PlanEntered {
                    plan_path: self.spec.paths.plan_file().display().to_string(),
                    backup: backup.map(|b| b.display().to_string()),
                });
                self.emit(Event::ModeChanged { mode: Mode::Plan });
            }
            Some(ModeIntent::PlanExit) => {
                self.live.set_mode(Mode::Work);
                self.withdraw_plan_questionnaire().await;
                self.emit(Event::ModeChanged { mode: Mode::Work });
            }
            None => {}
        }
        let message = Queued {
            id: Some(admitted.id),
            text,
            interrupted: false,
            cause: self.events.cause().map(str::to_string),
            internal: false,
        };
        let effects = self.queue.step(QueueInput::Admitted(message));
        self.perform(myself, effects, starts_now).await;
    }

    /// Appends a recorded message to the conversation (and the store).
    pub(super) fn record(&mut self, message: Arc<Message>) {
        let seq = self.conversation.len() as i64;
        self.store.append(
            &self.row,
            vec![(seq, message.clone())],
            Vec::new(),
            Vec::new(),
        );
        self.conversation.push(message);
    }

    /// Marks a turn's message done.
    pub(super) async fn finish_turn(&self, queue_id: Option<i64>) -> Result<(), StoreError> {
        let Some(queue_id) = queue_id else {
            return Ok(());
        };
        let session_id = self.row.to_string();
        self.store
            .ask(|reply| StoreRequest::FinishTurn {
                session_id,
                queue_id,
                reply,
            })
            .await
    }

    /// Starts a message's turn: records its start (unless the admission
    /// already did), then spawns the turn actor. The error is the
    /// `turn.failed` to announce.
    pub(super) async fn start_turn(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        next: Queued,
        recorded: bool,
    ) -> Result<(), Event> {
        let failed = |message: String, category: FailureCategory| Event::TurnFailed {
            turn_id,
            category,
            message,
            retryable: category == FailureCategory::Infrastructure,
            usage: Usage::default(),
            iterations: 0,
        };
        if let (false, Some(queue_id)) = (recorded, next.id) {
            let seq = self.conversation.len() as i64;
            let user = (!next.interrupted).then(|| (seq, Message::user(next.text.clone())));
            let session_id = self.row.to_string();
            let started = self
                .store
                .ask(|reply| StoreRequest::StartTurn {
                    session_id,
                    queue_id,
                    user,
                    reply,
                })
                .await;
            if let Err(err) = started {
                return Err(failed(
                    format!("the turn could not be recorded as started: {err}"),
                    FailureCategory::Infrastructure,
                ));
            }
        }
        if !next.interrupted {
            self.conversation
                .push(Arc::new(Message::user(next.text.clone())));
        }
        self.turn_cause = next.cause.clone();
        let mut args = self.turn_args(myself, turn_id);
        // An `Op::Compact` sent while idle is for this turn.
        self.compact_next = false;
        args.events = self.events.caused_by(next.cause);
        match Actor::spawn_linked(None, TurnActor, args, myself.get_cell()).await {
            Ok((actor, _join)) => {
                self.turn = Some(actor);
                Ok(())
            }
            Err(error) => {
                let _ = self.finish_turn(next.id).await;
                Err(failed(
                    format!("the turn could not start: {error}"),
                    FailureCategory::Agent,
                ))
            }
        }
    }

    /// What a new turn runs with: the tools the mode offers now, the
    /// prompt, and the hooks its tool calls use.
    fn turn_args(&self, myself: &ActorRef<SessionMsg>, turn_id: u64) -> TurnArgs {
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
        let workflows = spec
            .subagents
            .as_ref()
            .is_some_and(|s| s.workflows().is_some());
        let offer = Offer {
            mode,
            allow: allowed.clone(),
            // Only Plan's descriptions name the plan file.
            plan_file: plan_file.clone().filter(|_| mode == Mode::Plan),
            agents: spec.subagents.is_some(),
            plans,
            plan_entry: spec.plan_agent_entry,
            workflows,
            goals: spec.is_session(),
        };
        // The summary turn after a goal's budget stop runs with no tools.
        let tools = if self.summary_turn() {
            Arc::from(Vec::new())
        } else {
            self.services.tools.offered(&offer)
        };
        let root = spec.workspace.root();
        let system = system_prompt(&PromptInput {
            mode,
            posture: self.live.posture(),
            session: spec.is_session(),
            delegates: spec.subagents.is_some(),
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
            system: system.into(),
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
            budget: self.budget_guard(),
            context_budget: spec.context,
            pinned: Pinned {
                role: spec.role.clone(),
                mode,
                goal: self.goal.machine.goal().map(goal_state),
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
            compact_first: self.compact_next,
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
                policy: self.authority.task_policy(&self.spec, &self.live),
                store: self.store.clone(),
            })),
            file_scopes: spec.authority.file_scopes.clone(),
            agents: spec.subagents.is_some().then(|| {
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
            machine: TurnMachine::new(turn, self.conversation.as_slice().into()),
            supervisor: myself.get_derived(),
            model: self.services.model.clone(),
            tools: self.services.tools.clone(),
            tool_context: Arc::new(tool_context),
            events: self.events.clone(),
            span: self.span.clone(),
        }
    }
}
