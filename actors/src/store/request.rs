//! The store's requests: typed, owned data with a reply port each, so
//! none carries code and any could cross a process boundary. This file
//! says what each request is and how it is grouped into commits;
//! `request/run.rs` says what each one does to the store.

use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, AgentReport, ChildState};
use cadre_runtime::context::Conversation;
use cadre_runtime::goal::Goal;
use cadre_runtime::message::Message;
use cadre_runtime::permission::Posture;
use cadre_runtime::store::{
    Admitted, AgentRecord, AnswerOutcome, InstanceRecord, ModeIntent, OpenedRun,
    QuestionnaireAnswer, QuestionnaireKind, QueuedMessage, RunRecord, RunStatus, SessionRecord,
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
    /// Its stored messages as the agent holds them (what a resume gives
    /// the model again), read row by row.
    pub conversation: Conversation,
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
    /// What it asks: to approve the frozen plan, or to enter Plan.
    pub kind: QuestionnaireKind,
    /// The canonical plan file, shown to the person who answers.
    pub plan_path: String,
    /// The frozen snapshot (or the model's reason for an entry request).
    pub snapshot: String,
    /// The snapshot's SHA-256, so an approval is of exactly this text.
    pub sha256: String,
    /// Whether `snapshot` was cut short, so a reader knows it is not the
    /// whole plan.
    pub truncated: bool,
}

/// The port a request is answered on: its result, or the store's failure.
type Reply<T> = RpcReplyPort<Result<T, StoreError>>;

/// An answer held until the commit: given the commit's failure, if any, it
/// sends either the request's own result or that failure.
pub(super) type Deferred = Box<dyn FnOnce(Option<&StoreError>) + Send>;

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
        /// The old plan's backup, when a Plan entry made one, and the
        /// admission.
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
        /// The old plan's backup, when one was made.
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
        /// What the person chose, which decides the mode and the message
        /// admitted to carry it on.
        answer: QuestionnaireAnswer,
        /// The plan file, backed up when the answer confirms a Plan entry.
        plan_file: PathBuf,
        /// The mode now, the message admitted, and whether the answer was
        /// new (a repeated answer changes nothing).
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
    /// The workflow's name, by which `cadre workflow list` shows it.
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
    /// The widest mode of its steps, kept on its `sessions` row.
    pub mode: Mode,
    /// The posture it runs under, kept on its `sessions` row.
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
}

mod run;
