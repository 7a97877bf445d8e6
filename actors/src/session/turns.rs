//! Admission, the queue, and the life of a turn, kept in the store.
//!
//! A user message is admitted (one store transaction with its mode intent
//! and position) before it is acknowledged. Starting its turn marks it
//! running and stores it in the conversation, in one transaction; finishing
//! marks it done. Recorded messages, events and audit records are batched
//! by the store actor. On resume, the conversation and the queue are read
//! back: a message whose turn was interrupted continues (it is not run
//! again), and calls the crash left unanswered are closed.

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::message::Message;
use cadre_runtime::model::RequestContext;
use cadre_runtime::plan;
use cadre_runtime::prompt::system_prompt;
use cadre_runtime::protocol::{Event, FailureCategory, Usage};
use cadre_runtime::store::{
    Admission, ModeIntent, NewSession, QueuedMessage, Source, Store, StoreError,
};
use cadre_runtime::tool::{AGENT_TOOL, ENTER_PLAN_TOOL, ToolContext, definition_gate};
use cadre_runtime::turn::{TurnConfig, TurnMachine};
use ractor::{Actor, ActorRef};

use super::{Running, SessionMsg, SessionState, agents, authority, plan as plan_host};
use crate::turn::{TurnActor, TurnArgs};

/// A message waiting for its turn.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    /// Its queue row; `None` in a session without a store.
    pub(super) id: Option<i64>,
    /// The text.
    pub(super) text: String,
    /// Its turn started before a crash: continue it, do not run it again.
    pub(super) interrupted: bool,
}

impl From<QueuedMessage> for Queued {
    fn from(m: QueuedMessage) -> Self {
        Queued {
            id: Some(m.id),
            text: m.content,
            interrupted: m.interrupted,
        }
    }
}

impl SessionState {
    /// Runs a write against the store, if the session has one; a failure is
    /// logged, never fatal (the session keeps its state in memory).
    pub(super) async fn persist(
        &self,
        write: impl FnOnce(&mut Store, &str) -> Result<(), StoreError> + Send + 'static,
    ) {
        let Some(store) = &self.store else {
            return;
        };
        let id = self.config.session_id.clone();
        if let Err(err) = store.call(move |s| write(s, &id)).await {
            tracing::error!(parent: &self.span, %err, "the store could not record a change");
        }
    }

    /// Reads the session back from the store (creating its record the first
    /// time): mode, conversation, queue, pending questionnaire.
    pub(super) async fn restore(&mut self) -> Result<(), StoreError> {
        let Some(store) = self.store.clone() else {
            return Ok(());
        };
        let id = self.config.session_id.clone();
        let workspace = self.config.workspace.root().to_path_buf();
        let (mode, posture) = (self.mode, self.authority.posture);
        let (record, conversation, pending, questionnaire) = store
            .call(move |s| {
                let record = match s.session(&id)? {
                    Some(record) => record,
                    None => s.create_session(&NewSession {
                        id: &id,
                        workspace: &workspace,
                        mode,
                        posture,
                    })?,
                };
                if record.posture != posture {
                    s.set_posture(&id, posture)?;
                }
                Ok((
                    record,
                    s.conversation(&id)?,
                    s.pending(&id)?,
                    s.pending_questionnaire(&id)?.map(|q| q.id),
                ))
            })
            .await?;
        self.mode = record.mode;
        self.conversation = conversation.into_iter().map(Arc::new).collect();
        self.queue = pending.into_iter().map(Queued::from).collect();
        self.questionnaire = questionnaire;
        self.turns = 0;
        // A crash can leave calls without answers; the next request must
        // answer every one.
        self.close_unanswered(
            "the session stopped (a crash or a kill) before this call was answered",
        );
        Ok(())
    }

    /// Re-reads the queue after the store changed it (an answer admitted a
    /// message at the front).
    pub(super) async fn reload_queue(&mut self) {
        let Some(store) = &self.store else {
            return;
        };
        let id = self.config.session_id.clone();
        match store.call(move |s| s.pending(&id)).await {
            Ok(pending) => {
                let running = self.running.as_ref().and_then(|r| r.queue_id);
                self.queue = pending
                    .into_iter()
                    .filter(|m| Some(m.id) != running)
                    .map(Queued::from)
                    .collect();
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
        if intent.is_some() && self.running.is_some() {
            return self.reject(
                "user_input",
                "a turn is running: a mode change cannot ride on this message; cancel first, or send it without one",
            );
        }
        if intent == Some(ModeIntent::PlanEntry) {
            if let Some(id) = &self.questionnaire {
                return self.reject(
                    "user_input",
                    format!("questionnaire {id} waits for an answer: answer it before entering Plan mode"),
                );
            }
            if self.mode == Mode::Plan {
                return self.reject("user_input", "the session is already in Plan mode");
            }
        }
        // When the message runs at once, its admission and its turn's start
        // share one trip to the store (two transactions, in that order).
        let starts_now = self.running.is_none() && self.queue.is_empty();
        let (queue_id, backup) = match &self.store {
            None => (None, None),
            Some(store) => {
                let id = self.config.session_id.clone();
                let key = uuid::Uuid::new_v4().to_string();
                let content = text.clone();
                let plan_file = self.config.paths.plan_file();
                let seq = self.conversation.len() as i64;
                let admitted = store
                    .call(move |s| {
                        let (backup, admitted) = admit(s, &id, &content, intent, &key, &plan_file)?;
                        if starts_now {
                            s.start_turn(&id, admitted.id, Some((seq, &Message::user(content))))?;
                        }
                        Ok((backup, admitted))
                    })
                    .await;
                match admitted {
                    Ok((backup, admitted)) => (Some(admitted.id), backup),
                    Err(err) => {
                        return self
                            .reject("user_input", format!("the message was not admitted: {err}"));
                    }
                }
            }
        };
        match intent {
            Some(ModeIntent::PlanEntry) => {
                self.mode = Mode::Plan;
                self.emit(Event::PlanEntered {
                    plan_path: self.config.paths.plan_file().display().to_string(),
                    backup: backup.map(|b| b.display().to_string()),
                });
                self.emit(Event::ModeChanged { mode: Mode::Plan });
            }
            Some(ModeIntent::PlanExit) => {
                self.mode = Mode::Work;
                self.withdraw_plan_questionnaire().await;
                self.emit(Event::ModeChanged { mode: Mode::Work });
            }
            None => {}
        }
        let queued = Queued {
            id: queue_id,
            text,
            interrupted: false,
        };
        if starts_now {
            self.emit(Event::InputAdmitted { queue_length: 0 });
            self.launch(myself, queued).await;
        } else {
            self.queue.push_back(queued);
            self.emit(Event::InputAdmitted {
                queue_length: self.queue.len(),
            });
        }
    }

    /// Appends a recorded message to the conversation (and the store).
    pub(super) fn record(&mut self, message: Arc<Message>) {
        let seq = self.conversation.len() as i64;
        if let Some(store) = &self.store {
            store.append(
                &self.config.session_id,
                vec![(seq, message.clone())],
                Vec::new(),
                Vec::new(),
            );
        }
        self.conversation.push(message);
    }

    /// Marks a turn's message done.
    pub(super) async fn finish_turn(&self, queue_id: Option<i64>) {
        if let Some(queue_id) = queue_id {
            self.persist(move |s, id| s.finish_turn(id, queue_id)).await;
        }
    }

    /// Starts the next queued message's turn.
    pub(super) async fn start_next(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(next) = self.queue.pop_front() else {
            return;
        };
        let seq = self.conversation.len() as i64;
        if let (Some(store), Some(queue_id)) = (&self.store, next.id) {
            let id = self.config.session_id.clone();
            let user = (!next.interrupted).then(|| Message::user(next.text.clone()));
            let started = store
                .call(move |s| s.start_turn(&id, queue_id, user.as_ref().map(|m| (seq, m))))
                .await;
            if let Err(err) = started {
                tracing::error!(parent: &self.span, %err, "the turn could not be recorded as started");
            }
        }
        self.launch(myself, next).await;
    }

    /// Runs a message's turn, its start already recorded.
    async fn launch(&mut self, myself: &ActorRef<SessionMsg>, next: Queued) {
        if !next.interrupted {
            self.conversation
                .push(Arc::new(Message::user(next.text.clone())));
        }
        self.turns += 1;
        let turn_id = self.turns;
        let config = &self.config;
        let plan_file = config.paths.plan_file();
        let mut tools = definition_gate(
            self.services.tools.registry(),
            self.mode,
            config.allowed_tools.as_deref(),
            &plan_file,
        );
        // Tools that could only fail here are not offered.
        let plans = self.store.is_some();
        tools.retain(|spec| match spec.name.as_str() {
            AGENT_TOOL => config.subagents.is_some(),
            ENTER_PLAN_TOOL => plans && config.plan_agent_entry,
            "exit_plan_mode" => plans,
            _ => true,
        });
        let turn = TurnConfig {
            turn_id,
            mode: self.mode,
            max_iterations: config.max_iterations,
            system: match &config.role_prompt {
                Some(role) => format!(
                    "{}\n\n{role}",
                    system_prompt(self.mode, config.workspace.root())
                ),
                None => system_prompt(self.mode, config.workspace.root()),
            }
            .into(),
            tools: tools.into(),
            context: RequestContext {
                agent_id: config.agent_id.as_str().into(),
                role: config.role.as_str().into(),
                mode: self.mode,
                turn: turn_id,
                iteration: 0,
                session_id: config.session_id.as_str().into(),
                workspace: config.workspace.root().display().to_string().into(),
                plan_file: plan_file.display().to_string().into(),
            },
            plan_file: plan_file.clone(),
            model: config.model_override.as_deref().map(Arc::from),
        };
        let tool_context = ToolContext {
            workspace: config.workspace.clone(),
            mode: self.mode,
            session_dir: config.paths.dir.clone(),
            plan_file,
            allowed_tools: config.allowed_tools.clone(),
            authorizer: Some(Arc::new(authority::SessionAuthorizer {
                session: myself.clone(),
                turn_id,
            })),
            file_scopes: config.file_scopes.clone(),
            agents: config.subagents.is_some().then(|| {
                Arc::new(agents::SessionAgentHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::AgentHost>
            }),
            plans: plans.then(|| {
                Arc::new(plan_host::SessionPlanHost {
                    session: myself.clone(),
                }) as Arc<dyn cadre_runtime::tool::PlanHost>
            }),
            rules: Some(config.permissions.rules.clone()),
        };
        let args = TurnArgs {
            machine: TurnMachine::new(turn, self.conversation.as_slice().into()),
            session: myself.clone(),
            model: self.services.model.clone(),
            tools: self.services.tools.clone(),
            tool_context: Arc::new(tool_context),
            events: self.events.clone(),
            span: self.span.clone(),
        };
        match Actor::spawn_linked(None, TurnActor, args, myself.get_cell()).await {
            Ok((actor, _join)) => {
                self.running = Some(Running {
                    turn_id,
                    actor,
                    queue_id: next.id,
                })
            }
            Err(error) => {
                self.finish_turn(next.id).await;
                self.emit(Event::TurnFailed {
                    turn_id,
                    category: FailureCategory::Agent,
                    message: format!("the turn could not start: {error}"),
                    retryable: false,
                    usage: Usage::default(),
                    iterations: 0,
                });
            }
        }
    }
}

/// Admits one user message; a Plan entry backs up the old plan around the
/// admission, and restores it if the admission fails (PL2).
fn admit(
    s: &mut Store,
    session_id: &str,
    content: &str,
    intent: Option<ModeIntent>,
    key: &str,
    plan_file: &std::path::Path,
) -> Result<(Option<std::path::PathBuf>, cadre_runtime::store::Admitted), StoreError> {
    let admission = Admission {
        session_id,
        content,
        source: Source::User,
        intent,
        idempotency_key: key,
        front: false,
        plan_sha256: None,
    };
    match intent {
        Some(ModeIntent::PlanEntry) => {
            plan::enter(plan_file, || s.admit(&admission)).map_err(|e| match e {
                plan::EntryError::Backup(why) => {
                    StoreError::Conflict(format!("the earlier plan could not be backed up: {why}"))
                }
                plan::EntryError::Commit(err) => err,
            })
        }
        Some(ModeIntent::PlanExit) | None => s.admit(&admission).map(|a| (None, a)),
    }
}
