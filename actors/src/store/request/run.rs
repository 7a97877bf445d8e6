//! How each [`StoreRequest`] runs on the store's thread: in a savepoint of
//! the group's transaction, its answer held until the commit.

use std::path::PathBuf;

use cadre_runtime::context::Conversation;
use cadre_runtime::message::Message;
use cadre_runtime::plan::{self, EntryError};
use cadre_runtime::store::{
    Admission, Admitted, AnswerOutcome, LeaseOwner, ModeIntent, NewAgent, NewQuestionnaire, NewRun,
    NewSession, QuestionnaireAnswer, QuestionnaireKind, Source, Store, StoreError,
};

use super::{Deferred, FirstMessage, Opened, Reply, SessionOpen, StoreRequest};

fn defer<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Deferred {
    Box::new(move |failed| {
        let _ = reply.send(match failed {
            Some(err) => Err(err.clone()),
            None => result,
        });
    })
}

impl StoreRequest {
    /// Runs the request in a savepoint of the caller's transaction (undone
    /// alone if it fails); its answer is sent once the transaction commits,
    /// or replaced by the commit's failure.
    pub(in crate::store) fn run(self, s: &mut Store, owner: &LeaseOwner) -> Deferred {
        match self {
            StoreRequest::Goal(request) => request.run(s),
            StoreRequest::Open(open, reply) => {
                defer(reply, s.isolated(|s| open_session(s, &open, owner)))
            }
            StoreRequest::Admit {
                session_id,
                content,
                intent,
                key,
                plan_file,
                start_seq,
                reply,
            } => {
                let admitted = s.isolated(|s| match start_seq {
                    // Entering Plan moves the plan file around the admission.
                    Some(seq) if intent != Some(ModeIntent::PlanEntry) => {
                        let admission = user_admission(&session_id, &content, intent, &key);
                        let message = Message::user(content.clone());
                        Ok((None, s.admit_and_start(&admission, seq, &message)?))
                    }
                    _ => {
                        let (backup, admitted) =
                            admit(s, &session_id, &content, intent, &key, &plan_file)?;
                        if let Some(seq) = start_seq {
                            s.start_turn(
                                &session_id,
                                admitted.id,
                                Some((seq, &Message::user(content.clone()))),
                            )?;
                        }
                        Ok((backup, admitted))
                    }
                });
                defer(reply, admitted)
            }
            StoreRequest::StartTurn {
                session_id,
                queue_id,
                user,
                reply,
            } => {
                let started = s.isolated(|s| {
                    s.start_turn(&session_id, queue_id, user.as_ref().map(|(i, m)| (*i, m)))
                });
                defer(reply, started)
            }
            StoreRequest::FinishTurn {
                session_id,
                queue_id,
                reply,
            } => defer(reply, s.isolated(|s| s.finish_turn(&session_id, queue_id))),
            StoreRequest::Pending { session_id, reply } => {
                defer(reply, s.isolated(|s| s.pending(&session_id)))
            }
            StoreRequest::SetMode {
                session_id,
                mode,
                enter_plan,
                reply,
            } => {
                let set = s.isolated(|s| match enter_plan {
                    Some(plan_file) => entry(&plan_file, || s.set_mode(&session_id, mode)),
                    None => s.set_mode(&session_id, mode).map(|()| None),
                });
                defer(reply, set)
            }
            StoreRequest::SetPosture {
                session_id,
                posture,
                reply,
            } => defer(reply, s.isolated(|s| s.set_posture(&session_id, posture))),
            StoreRequest::OpenQuestionnaire(q, reply) => {
                let opened = s.isolated(|s| {
                    s.open_questionnaire(&NewQuestionnaire {
                        id: &q.id,
                        session_id: &q.session_id,
                        kind: q.kind,
                        plan_path: &q.plan_path,
                        snapshot: &q.snapshot,
                        sha256: &q.sha256,
                        truncated: q.truncated,
                    })
                });
                defer(reply, opened)
            }
            StoreRequest::Answer {
                session_id,
                id,
                answer,
                plan_file,
                reply,
            } => defer(
                reply,
                s.isolated(|s| answer_questionnaire(s, &session_id, &id, &answer, &plan_file)),
            ),
            StoreRequest::CreateAgent {
                id,
                parent_id,
                path,
                role,
                mode,
                posture,
                reply,
            } => {
                let created = s.isolated(|s| {
                    s.create_agent(&NewAgent {
                        id: &id,
                        parent_id: &parent_id,
                        path: &path,
                        role: &role,
                        mode,
                        posture,
                    })
                });
                defer(reply, created)
            }
            StoreRequest::AgentState {
                id,
                state,
                report,
                reply,
            } => defer(
                reply,
                s.isolated(|s| s.set_agent_state(&id, state, report.as_deref())),
            ),
            StoreRequest::ReleaseLease { session_id, reply } => {
                defer(reply, s.isolated(|s| s.release_lease(&session_id, owner)))
            }
            StoreRequest::Resolve {
                spec,
                workspace,
                reply,
            } => defer(
                reply,
                s.isolated(|s| s.resolve(&spec, workspace.as_deref())),
            ),
            StoreRequest::Audit { session_id, reply } => {
                defer(reply, s.isolated(|s| s.audit(&session_id)))
            }
            StoreRequest::Admitted { session_id, reply } => {
                defer(reply, s.isolated(|s| s.admitted(&session_id)))
            }
            StoreRequest::Conversation { session_id, reply } => {
                defer(reply, s.isolated(|s| s.conversation(&session_id)))
            }
            // The job wrote the buffered appends before it; the answer waits
            // for the commit like every other.
            StoreRequest::Commit(reply) => defer(reply, Ok(())),
            StoreRequest::CreateRun(draft, reply) => {
                let created = s.isolated(|s| {
                    s.create_run(
                        &NewRun {
                            id: &draft.id,
                            caller_id: draft.caller_id.as_deref(),
                            name: &draft.name,
                            file: draft.file.as_deref(),
                            source: &draft.source,
                            settings: &draft.settings,
                            workspace: &draft.workspace,
                            mode: draft.mode,
                            posture: draft.posture,
                        },
                        owner,
                    )
                });
                defer(reply, created)
            }
            StoreRequest::OpenRun { spec, reply } => {
                let opened = s.isolated(|s| {
                    s.resolve_run(&spec)
                        .and_then(|run| s.open_run(&run.id, owner))
                });
                defer(reply, opened)
            }
            StoreRequest::RecordInstances {
                run_id,
                instances,
                reply,
            } => defer(
                reply,
                s.isolated(|s| s.record_instances(&run_id, &instances)),
            ),
            StoreRequest::FinishRun {
                run_id,
                status,
                reply,
            } => {
                let finished = s.isolated(|s| {
                    s.finish_run(&run_id, status)
                        .and_then(|()| s.release_lease(&run_id, owner))
                });
                defer(reply, finished)
            }
            StoreRequest::TakeCancels { run_id, reply } => {
                defer(reply, s.isolated(|s| s.take_cancels(&run_id)))
            }
        }
    }
}

fn open_session(
    s: &mut Store,
    open: &SessionOpen,
    owner: &LeaseOwner,
) -> Result<Opened, StoreError> {
    let id = open.id.as_str();
    let stored = s.session(id)?;
    let resumed = stored.is_some();
    let created = match (stored, &open.agent) {
        (Some(_), _) => None,
        (None, Some((parent_id, path, role))) => {
            s.create_agent(&NewAgent {
                id,
                parent_id,
                path,
                role,
                mode: open.mode,
                posture: open.posture,
            })?;
            None
        }
        (None, None) => Some(s.create_session(&NewSession {
            id,
            workspace: &open.workspace,
            mode: open.mode,
            posture: open.posture,
        })?),
    };
    if open.lease && resumed {
        s.acquire_lease(id, owner)?;
    } else if open.lease {
        s.lease_new(id, owner)?;
    }
    if let Some(record) = created {
        // A new session has nothing stored to read back.
        return Ok(Opened {
            record,
            resumed,
            conversation: Conversation::default(),
            pending: Vec::new(),
            questionnaire: None,
            children: Vec::new(),
            goal: None,
            turns: 0,
            first: admit_first(s, id, open.first.as_ref())?,
        });
    }
    if resumed && open.mode_given {
        s.set_mode(id, open.mode)?;
    }
    if resumed && open.posture_given {
        s.set_posture(id, open.posture)?;
    }
    let record = s
        .session(id)?
        .ok_or_else(|| StoreError::NotFound(format!("session {id} vanished")))?;
    if !resumed {
        // A new agent has nothing stored to read back.
        return Ok(Opened {
            record,
            resumed,
            conversation: Conversation::default(),
            pending: Vec::new(),
            questionnaire: None,
            children: Vec::new(),
            goal: None,
            turns: 0,
            first: admit_first(s, id, open.first.as_ref())?,
        });
    }
    s.interrupt_agents(id)?;
    Ok(Opened {
        record,
        resumed,
        conversation: s.held_conversation(id)?,
        pending: s.pending(id)?,
        questionnaire: s.pending_questionnaire(id)?.map(|q| q.id),
        children: s.agents(id)?,
        goal: match open.agent {
            None => s.goal(id)?,
            Some(_) => None,
        },
        turns: s.turns_done(id)?,
        first: None,
    })
}

/// Admits a new agent's first message and starts its turn (the
/// conversation's first entry), as `Admit` with `start_seq` 0 does; the
/// agent was created in this request, so it has no queue yet.
fn admit_first(
    s: &mut Store,
    id: &str,
    first: Option<&FirstMessage>,
) -> Result<Option<Admitted>, StoreError> {
    let Some(first) = first else {
        return Ok(None);
    };
    let admission = user_admission(id, &first.content, None, &first.key);
    let message = Message::user(first.content.clone());
    s.start_first(&admission, &message).map(Some)
}

/// A message the user sent, at the back of the queue.
fn user_admission<'a>(
    session_id: &'a str,
    content: &'a str,
    intent: Option<ModeIntent>,
    key: &'a str,
) -> Admission<'a> {
    Admission {
        session_id,
        content,
        source: Source::User,
        intent,
        idempotency_key: key,
        front: false,
        plan_sha256: None,
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
) -> Result<(Option<PathBuf>, Admitted), StoreError> {
    let admission = user_admission(session_id, content, intent, key);
    match intent {
        Some(ModeIntent::PlanEntry) => {
            let mut admitted = None;
            let backup = entry(plan_file, || {
                admitted = Some(s.admit(&admission)?);
                Ok(())
            })?;
            admitted
                .map(|a| (backup, a))
                .ok_or_else(|| StoreError::Sql("the admission vanished".into()))
        }
        Some(ModeIntent::PlanExit) | None => s.admit(&admission).map(|a| (None, a)),
    }
}

fn answer_questionnaire(
    s: &mut Store,
    session_id: &str,
    id: &str,
    answer: &QuestionnaireAnswer,
    plan_file: &std::path::Path,
) -> Result<AnswerOutcome, StoreError> {
    let kind = s.questionnaire(id)?.map(|q| q.kind);
    if kind == Some(QuestionnaireKind::PlanEntry) && *answer == QuestionnaireAnswer::Approve {
        // A confirmed entry backs up the old plan like any entry.
        let mut outcome = None;
        entry(plan_file, || {
            outcome = Some(s.answer(session_id, id, answer)?);
            Ok(())
        })?;
        outcome.ok_or_else(|| StoreError::Sql("the answer vanished".into()))
    } else {
        s.answer(session_id, id, answer)
    }
}

/// Enters Plan around `commit`, backing up (and on failure restoring) the
/// old plan; store errors pass through.
fn entry(
    plan_file: &std::path::Path,
    commit: impl FnOnce() -> Result<(), StoreError>,
) -> Result<Option<PathBuf>, StoreError> {
    plan::enter(plan_file, commit)
        .map(|(backup, ())| backup)
        .map_err(|e| match e {
            EntryError::Backup(why) => {
                StoreError::Conflict(format!("the earlier plan could not be backed up: {why}"))
            }
            EntryError::Commit(err) => err,
        })
}
