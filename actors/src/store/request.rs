//! The store's requests: typed, owned data with a reply port each, so
//! none carries code and any could cross a process boundary.

use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, AgentReport, ChildState};
use cadre_runtime::goal::Goal;
use cadre_runtime::message::Message;
use cadre_runtime::permission::Posture;
use cadre_runtime::plan::{self, EntryError};
use cadre_runtime::store::{
    Admission, Admitted, AgentRecord, AnswerOutcome, InstanceRecord, LeaseOwner, ModeIntent,
    NewAgent, NewQuestionnaire, NewRun, NewSession, OpenedRun, QuestionnaireAnswer,
    QuestionnaireKind, QueuedMessage, RunRecord, RunStatus, SessionRecord, Source, Store,
    StoreError,
};
use ractor::RpcReplyPort;

/// What a session (or a sub-agent) starts from.
#[derive(Debug, Clone)]
pub struct SessionOpen {
    /// Its row in `sessions` (a sub-agent's own row, under its parent's).
    pub id: String,
    /// The workspace root, recorded with a new session so a later
    /// `--continue` in that directory finds it.
    pub workspace: PathBuf,
    /// The mode it starts in when new; applied to a stored one only when
    /// `mode_given`.
    pub mode: Mode,
    /// Whether the host chose the mode (a flag): otherwise a resumed
    /// session keeps its stored mode.
    pub mode_given: bool,
    /// The posture it starts with when new; see `posture_given`.
    pub posture: Posture,
    /// Whether the host chose the posture: otherwise a resumed session
    /// keeps its stored posture.
    pub posture_given: bool,
    /// Take the session's lease (a user's session); sub-agents live under
    /// their session's.
    pub lease: bool,
    /// For a sub-agent: its parent's row, its path and role.
    pub agent: Option<(String, AgentPath, String)>,
    /// The user message a new agent starts with: admitted, and its turn
    /// started, in the same transaction as the agent's creation. A resumed
    /// agent ignores it (its own queue comes first; the message is then
    /// admitted as any other).
    pub first: Option<FirstMessage>,
}

/// A new agent's first user message.
#[derive(Debug, Clone)]
pub struct FirstMessage {
    /// The message as its author (a person or the parent agent) wrote it.
    pub content: String,
    /// Its idempotency key: a start that is retried admits it once.
    pub key: String,
}

/// A session as read back.
#[derive(Debug, Clone)]
pub struct Opened {
    /// Its record (mode and posture as they are now).
    pub record: SessionRecord,
    /// Whether it was already stored (a resume).
    pub resumed: bool,
    /// Its stored messages, which a resume gives the model again.
    pub conversation: Vec<Message>,
    /// Messages not yet done, an interrupted one first.
    pub pending: Vec<QueuedMessage>,
    /// The id of a questionnaire still waiting for a person, which a
    /// resume asks again.
    pub questionnaire: Option<String>,
    /// Its sub-agents (any still marked running were interrupted by the
    /// crash and are now marked so).
    pub children: Vec<AgentRecord>,
    /// Its goal (a session's; a sub-agent has none).
    pub goal: Option<Goal>,
    /// Turns it has finished: its turn ids go on from there.
    pub turns: u64,
    /// The first message's admission (its turn started, stored at index
    /// 0), when the agent was created with one.
    pub first: Option<Admitted>,
}

/// A questionnaire to open, owned.
#[derive(Debug, Clone)]
pub struct QuestionnaireDraft {
    /// Its id, which the person's answer names.
    pub id: String,
    /// The session it holds until it is answered.
    pub session_id: String,
    /// What it asks.
    pub kind: QuestionnaireKind,
    /// The canonical plan file.
    pub plan_path: String,
    /// The frozen snapshot (or the model's reason for an entry request).
    pub snapshot: String,
    /// The snapshot's SHA-256, so an approval is of exactly this text.
    pub sha256: String,
    /// Whether `snapshot` was cut short, so a reader knows it is not the
    /// whole plan.
    pub truncated: bool,
}

type Reply<T> = RpcReplyPort<Result<T, StoreError>>;

/// An answer held until the commit: given the commit's failure, if any, it
/// sends either the request's own result or that failure.
pub(super) type Deferred = Box<dyn FnOnce(Option<&StoreError>) + Send>;

fn defer<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Deferred {
    Box::new(move |failed| {
        let _ = reply.send(match failed {
            Some(err) => Err(err.clone()),
            None => result,
        });
    })
}

/// A request to the store.
#[derive(Debug)]
pub enum StoreRequest {
    /// A goal request (`store/goal.rs`).
    Goal(super::goal::GoalRequest),
    /// Opens a session: creates or reads it, takes its lease, applies the
    /// host's mode and posture when given, marks interrupted sub-agents,
    /// and reads back what it needs.
    Open(SessionOpen, Reply<Opened>),
    /// Admits a user message (with a Plan entry's backup around it when the
    /// intent enters Plan); with `start_seq`, its turn starts in the same trip.
    Admit {
        /// The session whose queue the message joins.
        session_id: String,
        /// The message as the person wrote it; it becomes the
        /// conversation's user message when its turn starts.
        content: String,
        /// Whether it enters or leaves Plan (`None`: the mode stays).
        intent: Option<ModeIntent>,
        /// Its idempotency key: a submission retried with the same key is
        /// admitted once.
        key: String,
        /// The plan file, backed up by a Plan entry.
        plan_file: PathBuf,
        /// Start its turn at once, storing it at this conversation index.
        start_seq: Option<i64>,
        /// The backup made, and the admission.
        reply: Reply<(Option<PathBuf>, Admitted)>,
    },
    /// Starts a queued message's turn.
    StartTurn {
        /// The session whose turn starts.
        session_id: String,
        /// The queued message the turn answers.
        queue_id: i64,
        /// The message to store at its index (none when continuing an
        /// interrupted turn).
        user: Option<(i64, Message)>,
        /// `Ok` once the start is committed.
        reply: Reply<()>,
    },
    /// Marks a turn's message done.
    FinishTurn {
        /// The session whose turn ended.
        session_id: String,
        /// The message the turn answered: once done, a crash no longer
        /// replays it.
        queue_id: i64,
        /// `Ok` once it is marked done.
        reply: Reply<()>,
    },
    /// The messages not yet done.
    Pending {
        /// The session whose queue is read.
        session_id: String,
        /// The unfinished messages in queue order, an interrupted one
        /// first.
        reply: Reply<Vec<QueuedMessage>>,
    },
    /// Records the mode; with `enter_plan`, backs the old plan up around it.
    SetMode {
        /// The session whose mode a resume restores.
        session_id: String,
        /// The new mode.
        mode: Mode,
        /// The plan file, when this enters Plan.
        enter_plan: Option<PathBuf>,
        /// The backup made.
        reply: Reply<Option<PathBuf>>,
    },
    /// Records the posture.
    SetPosture {
        /// The session whose posture a resume restores.
        session_id: String,
        /// The new posture.
        posture: Posture,
        /// `Ok` once it is stored.
        reply: Reply<()>,
    },
    /// Opens a questionnaire.
    OpenQuestionnaire(QuestionnaireDraft, Reply<()>),
    /// Answers a questionnaire in one transaction; an approved Plan entry
    /// backs up the old plan around it.
    Answer {
        /// The session the questionnaire holds.
        session_id: String,
        /// The questionnaire's id, as it was opened with.
        id: String,
        /// What the person chose.
        answer: QuestionnaireAnswer,
        /// The plan file, backed up when the answer confirms a Plan entry.
        plan_file: PathBuf,
        /// What changed.
        reply: Reply<AnswerOutcome>,
    },
    /// Records a new sub-agent, running.
    CreateAgent {
        /// Its own session row, where its conversation and queue are kept.
        id: String,
        /// The row of the session or agent that spawned it, so a resume
        /// rebuilds the tree.
        parent_id: String,
        /// Its place in the tree (`1`, `1/2`): the id events name it by.
        path: AgentPath,
        /// The role it was spawned as, whose configuration a resume applies
        /// again.
        role: String,
        /// Its mode at spawn (its parent's or narrower).
        mode: Mode,
        /// Its posture at spawn (its parent's or narrower).
        posture: Posture,
        /// `Ok` once it is recorded.
        reply: Reply<()>,
    },
    /// Records a sub-agent's state and last report.
    AgentState {
        /// The sub-agent's own session row.
        id: String,
        /// What its parent sees it doing; one stored as running when the
        /// process died is read back as interrupted.
        state: ChildState,
        /// Its report, when a run ended: kept so a resumed parent can read
        /// it again.
        report: Option<Box<AgentReport>>,
        /// `Ok` once it is recorded.
        reply: Reply<()>,
    },
    /// Gives up a session's lease.
    ReleaseLease {
        /// The session this process holds, which another process may open
        /// afterwards.
        session_id: String,
        /// `Ok` once the lease is given up.
        reply: Reply<()>,
    },
    /// Finds a session by id, unique prefix or `latest` (in a workspace
    /// when given).
    Resolve {
        /// The id, prefix or `latest`.
        spec: String,
        /// Only sessions in this workspace.
        workspace: Option<PathBuf>,
        /// The one session meant; none, or a prefix of several, is
        /// [`StoreError::NotFound`].
        reply: Reply<SessionRecord>,
    },
    /// The audit records (JSON), oldest first.
    Audit {
        /// The session whose permission decisions were audited.
        session_id: String,
        /// Each record as its JSON text, oldest first.
        reply: Reply<Vec<String>>,
    },
    /// Every message admitted: (source, state, content).
    Admitted {
        /// The session whose queue is read.
        session_id: String,
        /// Each message as (source, state, content) in admission order,
        /// done ones included.
        reply: Reply<Vec<(String, String, String)>>,
    },
    /// The stored conversation.
    Conversation {
        /// The session (or sub-agent row) whose conversation is read.
        session_id: String,
        /// Its messages in order, as a resume gives them to the model.
        reply: Reply<Vec<Message>>,
    },
    /// Nothing of its own: answered once everything buffered before it is
    /// committed, the write-ahead of a side-effecting call (its call and
    /// its decision stored before it starts).
    Commit(Reply<()>),
    /// Records a new workflow run and takes its lease.
    CreateRun(Box<RunDraft>, Reply<RunRecord>),
    /// Opens a stored run to resume it (takes its lease): the run and its
    /// instances.
    OpenRun {
        /// The run's id, a unique prefix, or `latest`.
        spec: String,
        /// The run, its instances (read back by key) and how many agents
        /// it started.
        reply: Reply<OpenedRun>,
    },
    /// Records step instances as they are now.
    RecordInstances {
        /// The run the instances belong to.
        run_id: String,
        /// Each instance with its step's place in the workflow, which
        /// orders them when they are read back.
        instances: Vec<(i64, InstanceRecord)>,
        /// `Ok` once they are stored.
        reply: Reply<()>,
    },
    /// Records how a run ended and gives up its lease.
    FinishRun {
        /// The run, whose lease this process gives up with it.
        run_id: String,
        /// How it ended (`Running` would leave it looking resumable).
        status: RunStatus,
        /// `Ok` once the end is stored and the lease given up.
        reply: Reply<()>,
    },
    /// Takes the cancel requests other processes left for a run.
    TakeCancels {
        /// The run this process runs, which the requests name.
        run_id: String,
        /// The targets (`*`, `step`, `step[i]`).
        reply: Reply<Vec<String>>,
    },
}

/// A workflow run to record, owned.
#[derive(Debug, Clone)]
pub struct RunDraft {
    /// The run's id, also its row in `sessions` (its steps are agents
    /// under it).
    pub id: String,
    /// The calling session, if any.
    pub caller_id: Option<String>,
    /// The workflow's name.
    pub name: String,
    /// The file it was read from; `None` for a workflow an Operate
    /// session wrote.
    pub file: Option<String>,
    /// The workflow's TOML as it runs, so a resume runs this text even
    /// when the file has changed since.
    pub source: String,
    /// Its variables and flags (JSON), read back on resume.
    pub settings: String,
    /// The workspace its steps run in.
    pub workspace: PathBuf,
    /// The widest mode of its steps.
    pub mode: Mode,
    /// The posture it runs under.
    pub posture: Posture,
}

impl StoreRequest {
    /// Answers the request with `error` without running it.
    pub(super) fn refuse(self, error: StoreError) {
        macro_rules! no {
            ($reply:expr) => {{
                let _ = $reply.send(Err(error));
            }};
        }
        match self {
            StoreRequest::Goal(request) => request.refuse(error),
            StoreRequest::Open(_, reply) => no!(reply),
            StoreRequest::Admit { reply, .. } => no!(reply),
            StoreRequest::StartTurn { reply, .. }
            | StoreRequest::FinishTurn { reply, .. }
            | StoreRequest::SetPosture { reply, .. }
            | StoreRequest::OpenQuestionnaire(_, reply)
            | StoreRequest::CreateAgent { reply, .. }
            | StoreRequest::AgentState { reply, .. }
            | StoreRequest::ReleaseLease { reply, .. }
            | StoreRequest::Commit(reply) => no!(reply),
            StoreRequest::Pending { reply, .. } => no!(reply),
            StoreRequest::SetMode { reply, .. } => no!(reply),
            StoreRequest::Answer { reply, .. } => no!(reply),
            StoreRequest::Audit { reply, .. } => no!(reply),
            StoreRequest::Resolve { reply, .. } => no!(reply),
            StoreRequest::Admitted { reply, .. } => no!(reply),
            StoreRequest::Conversation { reply, .. } => no!(reply),
            StoreRequest::CreateRun(_, reply) => no!(reply),
            StoreRequest::OpenRun { reply, .. } => no!(reply),
            StoreRequest::RecordInstances { reply, .. } | StoreRequest::FinishRun { reply, .. } => {
                no!(reply)
            }
            StoreRequest::TakeCancels { reply, .. } => no!(reply),
        }
    }

    /// Whether the request's sender can wait a moment for other sessions'
    /// requests to share its commit (see `gather.rs`): a turn's end, and an
    /// agent's opening with its first message (a workflow step's, a host's
    /// new session's: the agent has nothing to do before it). A sub-agent
    /// that a session starts is opened without one, and is not: its parent
    /// starts the next one only when it is answered.
    pub(super) fn patient(&self) -> bool {
        match self {
            StoreRequest::FinishTurn { .. } => true,
            StoreRequest::Open(open, _) => open.first.is_some(),
            StoreRequest::Goal(_)
            | StoreRequest::Admit { .. }
            | StoreRequest::StartTurn { .. }
            | StoreRequest::Pending { .. }
            | StoreRequest::SetMode { .. }
            | StoreRequest::SetPosture { .. }
            | StoreRequest::OpenQuestionnaire(..)
            | StoreRequest::Answer { .. }
            | StoreRequest::CreateAgent { .. }
            | StoreRequest::AgentState { .. }
            | StoreRequest::ReleaseLease { .. }
            | StoreRequest::Resolve { .. }
            | StoreRequest::Audit { .. }
            | StoreRequest::Admitted { .. }
            | StoreRequest::Conversation { .. }
            | StoreRequest::Commit(_)
            | StoreRequest::CreateRun(..)
            | StoreRequest::OpenRun { .. }
            | StoreRequest::RecordInstances { .. }
            | StoreRequest::FinishRun { .. }
            | StoreRequest::TakeCancels { .. } => false,
        }
    }

    /// Whether the request moves files around its commit (a Plan entry
    /// backs up the old plan), so it must commit on its own: a later failure
    /// of a shared commit could not put the files back.
    pub(super) fn commits_alone(&self) -> bool {
        match self {
            StoreRequest::Admit { intent, .. } => *intent == Some(ModeIntent::PlanEntry),
            StoreRequest::SetMode { enter_plan, .. } => enter_plan.is_some(),
            StoreRequest::Answer { .. } => true,
            StoreRequest::Goal(_)
            | StoreRequest::Open(..)
            | StoreRequest::StartTurn { .. }
            | StoreRequest::FinishTurn { .. }
            | StoreRequest::Pending { .. }
            | StoreRequest::SetPosture { .. }
            | StoreRequest::OpenQuestionnaire(..)
            | StoreRequest::CreateAgent { .. }
            | StoreRequest::AgentState { .. }
            | StoreRequest::ReleaseLease { .. }
            | StoreRequest::Resolve { .. }
            | StoreRequest::Audit { .. }
            | StoreRequest::Admitted { .. }
            | StoreRequest::Conversation { .. }
            | StoreRequest::Commit(_)
            | StoreRequest::CreateRun(..)
            | StoreRequest::OpenRun { .. }
            | StoreRequest::RecordInstances { .. }
            | StoreRequest::FinishRun { .. }
            | StoreRequest::TakeCancels { .. } => false,
        }
    }

    /// Runs the request in a savepoint of the caller's transaction (undone
    /// alone if it fails); its answer is sent once the transaction commits,
    /// or replaced by the commit's failure.
    pub(super) fn run(self, s: &mut Store, owner: &LeaseOwner) -> Deferred {
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
            conversation: Vec::new(),
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
            conversation: Vec::new(),
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
        conversation: s.conversation(id)?,
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
