//! What crosses between a coordinator and a node: the node service's
//! messages and the data they carry, all owned and serializable.
//!
//! ractor_cluster moves a message between nodes as a variant name and
//! bytes; [`NodeMsg`] says how its variants become bytes (JSON) and back.
//! The variants a coordinator sends are `Hello`, `Start` and `Pull` (calls,
//! answered on their reply ports) and `Op`, `Check` and `Stop` (casts); the
//! rest are the node's own messages to itself and never leave it.

use cadre_runtime::hooks::HookSet;
use std::collections::BTreeSet;
use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, Authority};
use cadre_runtime::permission::Posture;
use cadre_runtime::permission::rules::{RuleError, RuleKind, RuleSet, Scope};
use cadre_runtime::protocol::{Envelope, Op};
use ractor::RpcReplyPort;
use ractor::message::{BoxedDowncastErr, SerializedMessage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The version of this protocol; a node speaking another is not used.
/// Version 2: a check order carries its variables, and a refused
/// [`NodeMsg::Start`] answers a [`StartRefusal`],
/// not a bare message.
pub const PROTOCOL: u32 = 2;

/// The process group every node's service joins, where coordinators find
/// them.
pub const NODES_GROUP: &str = "cadre.nodes";

/// What a node says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Its name (unique in a cluster).
    pub name: String,
    /// [`PROTOCOL`] as the node speaks it.
    pub protocol: u32,
    /// Agents it runs at once.
    pub slots: u32,
    /// The coordinator-side workspace roots it serves (a step's workspace
    /// must be one of them or lie under one).
    pub workspaces: Vec<PathBuf>,
}

/// One rule as written, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRule {
    /// What it does.
    pub kind: RuleKind,
    /// Where it came from.
    pub scope: Scope,
    /// The rule as written.
    pub text: String,
}

/// An [`Authority`] as data: the rules travel as written and are parsed
/// again on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireAuthority {
    /// The mode.
    pub mode: Mode,
    /// The posture.
    pub posture: Posture,
    /// The tools it may use; `None` means every tool.
    pub allowed_tools: Option<BTreeSet<String>>,
    /// Path globs its writes must match, one list per ancestor.
    pub file_scopes: Vec<Vec<String>>,
    /// Every rule in force.
    pub rules: Vec<WireRule>,
    /// Its depth.
    pub depth: u32,
    /// The deepest level its descendants may reach.
    pub max_depth: u32,
}

impl From<&Authority> for WireAuthority {
    fn from(authority: &Authority) -> Self {
        Self {
            mode: authority.mode,
            posture: authority.posture,
            allowed_tools: authority.allowed_tools.clone(),
            file_scopes: authority.file_scopes.clone(),
            rules: authority
                .rules
                .iter()
                .map(|rule| WireRule {
                    kind: rule.kind(),
                    scope: rule.scope(),
                    text: rule.text().to_string(),
                })
                .collect(),
            depth: authority.depth,
            max_depth: authority.max_depth,
        }
    }
}

impl WireAuthority {
    /// The authority again; a rule that does not parse refuses it whole.
    pub fn parse(&self) -> Result<Authority, RuleError> {
        let mut rules = RuleSet::new();
        for rule in &self.rules {
            rules.add(rule.kind, rule.scope, &rule.text)?;
        }
        Ok(Authority {
            mode: self.mode,
            posture: self.posture,
            allowed_tools: self.allowed_tools.clone(),
            file_scopes: self.file_scopes.clone(),
            rules: std::sync::Arc::new(rules),
            depth: self.depth,
            max_depth: self.max_depth,
        })
    }
}

/// A step agent a coordinator asks a node to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The coordinator's name: whose outbox the agent's events go to.
    pub coordinator: String,
    /// The coordinator's number for this attempt.
    pub attempt: u64,
    /// The run (the agent's session id).
    pub run_id: String,
    /// The agent's place under the run.
    pub path: AgentPath,
    /// Its role's name.
    pub role: String,
    /// The caller's authority, which the step's must be within.
    pub caller: WireAuthority,
    /// The step's authority.
    pub authority: WireAuthority,
    /// The caller's mode and posture in force now (its live authority).
    pub live: (Mode, Posture),
    /// The model name to ask, when not the node's own.
    pub model: Option<String>,
    /// The role's system prompt.
    pub system_prompt: Option<String>,
    /// Model requests one turn may make.
    pub max_iterations: u32,
    /// The workspace root, as the coordinator sees it.
    pub workspace: PathBuf,
    /// Whether a person can answer the agent's prompts.
    pub interactive: bool,
    /// The rendered prompt.
    pub prompt: String,
    /// The coordinator's hooks, which the node runs for this agent as the
    /// coordinator would (`docs/hooks.md`).
    #[serde(default)]
    pub hooks: HookSet,
    /// The workflow step it runs, if it is one (for its hooks' events).
    #[serde(default)]
    pub step: Option<String>,
}

/// A coordinator's poll for what its agents on a node did; it is also the
/// heartbeat both sides watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pull {
    /// The coordinator.
    pub coordinator: String,
    /// Every item up to this sequence number arrived: the node forgets them.
    pub after: u64,
    /// Each running attempt's caller's mode and posture in force now.
    pub live: Vec<(u64, Mode, Posture)>,
}

/// The answer to a [`Pull`]: what happened since, possibly nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// In order.
    pub items: Vec<Item>,
    /// Slots free on the node now.
    pub free: u32,
}

/// One thing an agent on a node did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Its number in the coordinator's outbox.
    pub seq: u64,
    /// The attempt it belongs to.
    pub attempt: u64,
    /// What happened.
    pub what: Outbound,
}

/// What an agent on a node did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outbound {
    /// One of its events.
    Event(Envelope),
    /// Its check ran.
    Checked {
        /// Exit 0.
        passed: bool,
        /// What it printed.
        detail: String,
    },
    /// It is gone: stopped, crashed or refused by the node after it had
    /// started.
    Ended(AgentEnd),
}

/// Why an agent on a node is gone. It crosses the wire as the text it
/// always did: `stopped`, or the words of its failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AgentEnd {
    /// It stopped when told to, its work done or given up.
    Stopped,
    /// It crashed, or the node ended it; why.
    Failed(String),
}

/// The word of [`AgentEnd::Stopped`] on the wire.
const STOPPED: &str = "stopped";

impl From<String> for AgentEnd {
    fn from(text: String) -> Self {
        match text.as_str() {
            STOPPED => AgentEnd::Stopped,
            _ => AgentEnd::Failed(text),
        }
    }
}

impl From<AgentEnd> for String {
    fn from(end: AgentEnd) -> Self {
        match end {
            AgentEnd::Stopped => STOPPED.to_string(),
            AgentEnd::Failed(why) => why,
        }
    }
}

impl std::fmt::Display for AgentEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentEnd::Stopped => f.write_str(STOPPED),
            AgentEnd::Failed(why) => f.write_str(why),
        }
    }
}

/// Why a node refuses to start an order's agent: [`NodeMsg::Start`]'s
/// answer. It crosses the wire as JSON tagged by `kind`, so a change here
/// is a change of [`PROTOCOL`]; the messages of an io, store or actor
/// failure travel as text, their types staying on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StartRefusal {
    /// Every slot of the node is taken. Retryable: on another node, or on
    /// this one once one of its agents ends.
    #[error("node {node} is full")]
    Full {
        /// The node's name.
        node: String,
    },
    /// This attempt already runs on the node (the coordinator sent it
    /// twice). Not retryable: the attempt runs.
    #[error("attempt {attempt} already runs here")]
    AlreadyRunning {
        /// The attempt.
        attempt: u64,
    },
    /// The order fails the node's admission (a workspace it does not
    /// serve, an authority wider than its ceiling or its caller's); the
    /// text is the node's [`Refusal`](super::admit::Refusal). Not
    /// retryable on this node: the order or the node's configuration must
    /// change.
    #[error("{reason}")]
    Admission {
        /// Why the order was not admitted.
        reason: String,
    },
    /// The workspace root the order maps to on the node cannot be
    /// resolved. Not retryable until that directory exists on the node.
    #[error("workspace {}: {message}", path.display())]
    Workspace {
        /// The node-side workspace root.
        path: PathBuf,
        /// What the file system said.
        message: String,
    },
    /// The node's store would not record the run. Retryable when the
    /// store was only busy.
    #[error("the node's store refused the run: {message}")]
    Store {
        /// What the store said.
        message: String,
    },
    /// The agent's actor did not start on the node. Not retryable.
    #[error("the agent could not start: {message}")]
    Agent {
        /// Why it did not start.
        message: String,
    },
    /// The agent stopped before it could take its first message. Not
    /// retryable.
    #[error("the agent stopped at once: {message}")]
    Stopped {
        /// Why the message could not be sent.
        message: String,
    },
}

/// Messages to a node's service actor.
#[derive(Debug)]
pub enum NodeMsg {
    /// Who the node is.
    Hello(RpcReplyPort<NodeInfo>),
    /// Run an agent; the error says why the node refuses.
    Start(Box<Order>, RpcReplyPort<Result<(), StartRefusal>>),
    /// What happened since; answered at once when something did, else
    /// within a heartbeat.
    Pull(Pull, RpcReplyPort<Batch>),
    /// An op for one attempt's agent (cancel, shutdown, an approval answer).
    Op(Addressed<Op>),
    /// Run a check in the attempt's workspace; the result comes back as
    /// [`Outbound::Checked`].
    Check(Addressed<CheckOrder>),
    /// Forget the attempt: stop its agent, drop what it has not sent.
    Stop(Addressed<()>),
    /// The node's own messages.
    Local(super::node::Local),
}

/// A message for one attempt of one coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Addressed<T> {
    /// The coordinator.
    pub coordinator: String,
    /// The attempt.
    pub attempt: u64,
    /// The message.
    pub body: T,
}

/// A check to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOrder {
    /// The command line.
    pub command: String,
    /// The variables it runs with (its references' values).
    pub env: Vec<(String, String)>,
    /// How long it may run, in milliseconds.
    pub timeout_ms: u64,
}

impl ractor::Message for NodeMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        let call = |variant: &str, args: Vec<u8>, reply| SerializedMessage::Call {
            variant: variant.to_string(),
            args,
            reply,
            metadata: None,
        };
        let cast = |variant: &str, args: Vec<u8>| SerializedMessage::Cast {
            variant: variant.to_string(),
            args,
            metadata: None,
        };
        Ok(match self {
            NodeMsg::Hello(reply) => call("hello", Vec::new(), bytes_port(reply)),
            NodeMsg::Start(order, reply) => call("start", to_bytes(&order)?, bytes_port(reply)),
            NodeMsg::Pull(pull, reply) => call("pull", to_bytes(&pull)?, bytes_port(reply)),
            NodeMsg::Op(op) => cast("op", to_bytes(&op)?),
            NodeMsg::Check(check) => cast("check", to_bytes(&check)?),
            NodeMsg::Stop(stop) => cast("stop", to_bytes(&stop)?),
            NodeMsg::Local(_) => return Err(BoxedDowncastErr),
        })
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match message {
            SerializedMessage::Call {
                variant,
                args,
                reply,
                ..
            } => match variant.as_str() {
                "hello" => Ok(NodeMsg::Hello(typed_port(reply))),
                "start" => Ok(NodeMsg::Start(from_bytes(&args)?, typed_port(reply))),
                "pull" => Ok(NodeMsg::Pull(from_bytes(&args)?, typed_port(reply))),
                _ => Err(BoxedDowncastErr),
            },
            SerializedMessage::Cast { variant, args, .. } => match variant.as_str() {
                "op" => Ok(NodeMsg::Op(from_bytes(&args)?)),
                "check" => Ok(NodeMsg::Check(from_bytes(&args)?)),
                "stop" => Ok(NodeMsg::Stop(from_bytes(&args)?)),
                _ => Err(BoxedDowncastErr),
            },
            SerializedMessage::CallReply(..) => Err(BoxedDowncastErr),
        }
    }
}

fn to_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, BoxedDowncastErr> {
    serde_json::to_vec(value).map_err(|_| BoxedDowncastErr)
}

fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BoxedDowncastErr> {
    serde_json::from_slice(bytes).map_err(|_| BoxedDowncastErr)
}

/// A byte reply port standing for a typed one (the caller's side): the
/// bytes that come back are decoded and handed to `reply`.
fn bytes_port<T>(reply: RpcReplyPort<T>) -> RpcReplyPort<Vec<u8>>
where
    T: DeserializeOwned + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let port = match reply.get_timeout() {
        Some(timeout) => RpcReplyPort::from((tx, timeout)),
        None => RpcReplyPort::from(tx),
    };
    tokio::spawn(async move {
        if let Ok(bytes) = rx.await
            && let Ok(value) = serde_json::from_slice::<T>(&bytes)
        {
            let _ = reply.send(value);
        }
    });
    port
}

/// A typed reply port standing for a byte one (the node's side): what the
/// handler answers is encoded and sent back.
fn typed_port<T>(reply: RpcReplyPort<Vec<u8>>) -> RpcReplyPort<T>
where
    T: Serialize + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<T>();
    tokio::spawn(async move {
        if let Ok(value) = rx.await
            && let Ok(bytes) = serde_json::to_vec(&value)
        {
            let _ = reply.send(bytes);
        }
    });
    RpcReplyPort::from(tx)
}

#[cfg(test)]
mod tests;
