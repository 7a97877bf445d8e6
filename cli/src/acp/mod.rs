//! `cadre acp`: the Agent Client Protocol over stdio, for editors (E1,
//! `docs/editors.md`).
//!
//! The editor is the client; cadre is the agent. Each ACP session is a
//! cadre session started (or resumed) through [`crate::launch`] in the
//! editor's working directory, with a person to ask: every approval
//! prompt becomes a `session/request_permission`, and the answer an
//! `Op::Approve` with the prompt's own id, so a sub-agent's or a workflow
//! step's prompt is routed as the shell routes it. A prompt is an
//! `Op::UserInput` submitted under an id of its own; the turn's events
//! stream back as `session/update` notifications and its end answers the
//! prompt. Mode and posture changes go through the session, which refuses
//! them while a turn runs, and the refusal is the request's error.
//!
//! # Layout
//! - [`rpc`]: JSON-RPC framing, pure.
//! - [`updates`]: events → updates and questions, pure.
//! - [`files`]: `read_file`/`write_file`/`edit_file` through the editor's
//!   buffers when it offers them.
//! - this module: the loop: stdin, the sessions' events, the tools'
//!   requests of the client; stdout is the protocol's alone.

pub mod files;
pub mod rpc;
pub mod updates;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cadre_runtime::message::Message;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{ApprovalDecision, Envelope, Event, FailureCategory, Op};
use cadre_runtime::store::{QuestionnaireAnswer, Store, store_path};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::config::RunConfig;
use crate::exit::{self, CliError};
use crate::launch::{Launched, launch_with};

use self::files::{FsCall, FsOffer};
use self::rpc::{Incoming, RpcError};
use self::updates::{Action, Mapper};

/// The ACP version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

/// The id of the one authentication method: a key in the environment.
pub const ENV_KEY_METHOD: &str = "openai-api-key";

/// The run configuration of a session in a working directory (and, for a
/// load, which stored session), as `cadre` started there would read it.
pub type Configs =
    Box<dyn Fn(&Path, Option<&str>) -> Result<RunConfig, CliError> + Send + Sync + 'static>;

/// Serves the protocol on stdin and stdout until stdin closes; exits 0.
/// `key_set` says whether `OPENAI_API_KEY` is in the environment.
pub async fn run(configs: Configs, key_set: bool) -> Result<u8, CliError> {
    let (line_tx, mut lines) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = stdin.next_line().await {
            if line_tx.send(line).is_err() {
                return;
            }
        }
    });
    let (event_tx, mut events) = mpsc::unbounded_channel();
    let (fs_tx, mut fs_calls) = mpsc::unbounded_channel();
    let mut server = Server {
        configs,
        key_set,
        offer: FsOffer::default(),
        sessions: HashMap::new(),
        asked: HashMap::new(),
        next_id: 0,
        events: event_tx,
        fs: fs_tx,
    };
    loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(line) if line.trim().is_empty() => {}
                Some(line) => server.line(&line).await,
                None => break,
            },
            Some((session, envelope)) = events.recv() => server.event(&session, envelope),
            Some(call) = fs_calls.recv() => server.fs_call(call),
        }
    }
    server.close().await;
    Ok(exit::SUCCESS)
}

/// A live session.
struct Live {
    launched: Launched,
    mapper: Mapper,
    /// cadre's submissions waiting for their answer, by submission id.
    pending: HashMap<String, Pending>,
}

/// A client request answered once the session has answered cadre's op.
enum Pending {
    /// `session/prompt`: the turn's end.
    Prompt(Value),
    /// `session/set_mode` (or the mode option): `mode.changed`.
    Mode {
        request: Value,
        /// Answered with the options (`session/set_config_option`).
        option: bool,
    },
    /// The posture option: `posture.changed`.
    Posture(Value),
}

/// A question cadre asked the client, by cadre's request id.
enum Asked {
    Approval {
        session: String,
        approval: String,
    },
    Questionnaire {
        session: String,
        id: String,
        entry: bool,
    },
    Fs(tokio::sync::oneshot::Sender<Result<Value, String>>),
}

struct Server {
    configs: Configs,
    key_set: bool,
    /// What the client's `fs` capability offers.
    offer: FsOffer,
    sessions: HashMap<String, Live>,
    asked: HashMap<String, Asked>,
    next_id: u64,
    events: mpsc::UnboundedSender<(String, Envelope)>,
    fs: mpsc::UnboundedSender<FsCall>,
}

fn send(line: &str) {
    crate::outln!("{line}");
}

fn update(session: &str, update: Value) {
    send(&rpc::notification(
        "session/update",
        json!({"sessionId": session, "update": update}),
    ));
}

impl Server {
    fn next(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    async fn line(&mut self, line: &str) {
        match rpc::parse(line) {
            Ok(Incoming::Request { id, method, params }) => {
                match self.request(&id, &method, params).await {
                    Ok(Some(result)) => send(&rpc::result(&id, result)),
                    // Answered later, when the session has answered.
                    Ok(None) => {}
                    Err(err) => send(&rpc::error(&id, &err)),
                }
            }
            Ok(Incoming::Notification { method, params }) => self.notification(&method, &params),
            Ok(Incoming::Response { id, outcome }) => self.response(&id, outcome),
            Err(err) => send(&rpc::error(&Value::Null, &err)),
        }
    }

    async fn request(
        &mut self,
        id: &Value,
        method: &str,
        params: Value,
    ) -> Result<Option<Value>, RpcError> {
        match method {
            "initialize" => {
                let fs = &params["clientCapabilities"]["fs"];
                self.offer = FsOffer {
                    read: fs["readTextFile"].as_bool().unwrap_or(false),
                    write: fs["writeTextFile"].as_bool().unwrap_or(false),
                };
                Ok(Some(json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "agentCapabilities": {
                        "loadSession": true,
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                        "mcpCapabilities": {"http": false, "sse": false},
                    },
                    "authMethods": [{
                        "id": ENV_KEY_METHOD,
                        "name": "API key from the environment",
                        "description": "cadre reads the model server's key from OPENAI_API_KEY in its \
                                        environment (set it in the editor's agent server env); a \
                                        server without a key needs nothing",
                    }],
                    "agentInfo": {"name": "cadre", "version": env!("CARGO_PKG_VERSION")},
                })))
            }
            "authenticate" => match params["methodId"].as_str() {
                Some(ENV_KEY_METHOD) if self.key_set => Ok(Some(json!({}))),
                Some(ENV_KEY_METHOD) => Err(RpcError::new(
                    rpc::AUTH_REQUIRED,
                    "OPENAI_API_KEY is not set in cadre's environment: set it in the editor's \
                     agent server configuration (env)",
                )),
                _ => Err(RpcError::params("unknown authentication method")),
            },
            "session/new" => {
                let cwd = cwd(&params)?;
                self.open(&cwd, None).await.map(Some)
            }
            "session/load" => {
                let cwd = cwd(&params)?;
                let session = params["sessionId"]
                    .as_str()
                    .ok_or_else(|| RpcError::params("'sessionId' is a string"))?
                    .to_string();
                self.open(&cwd, Some(&session)).await.map(|mut result| {
                    // `session/load` answers with the state, not the id.
                    if let Some(object) = result.as_object_mut() {
                        object.remove("sessionId");
                    }
                    Some(result)
                })
            }
            "session/prompt" => {
                let text = prompt_text(&params["prompt"])?;
                let op = self.next("prompt");
                let live = self.live(&params)?;
                submit(live, &op, Op::user(text))?;
                live.pending.insert(op, Pending::Prompt(id.clone()));
                Ok(None)
            }
            "session/set_mode" => {
                let mode = params["modeId"]
                    .as_str()
                    .and_then(updates::mode)
                    .ok_or_else(|| RpcError::params("'modeId' is plan, work or operate"))?;
                let op = self.next("mode");
                let live = self.live(&params)?;
                submit(live, &op, Op::SetMode { mode })?;
                let pending = Pending::Mode {
                    request: id.clone(),
                    option: false,
                };
                live.pending.insert(op, pending);
                Ok(None)
            }
            "session/set_config_option" => {
                let value = params["value"]
                    .as_str()
                    .or_else(|| params["value"]["value"].as_str())
                    .unwrap_or_default()
                    .to_string();
                let op = self.next("option");
                let live = self.live(&params)?;
                let (submission, pending) = match params["configId"].as_str() {
                    Some(updates::MODE_OPTION) => {
                        let mode = updates::mode(&value)
                            .ok_or_else(|| RpcError::params("the mode is plan, work or operate"))?;
                        let pending = Pending::Mode {
                            request: id.clone(),
                            option: true,
                        };
                        (Op::SetMode { mode }, pending)
                    }
                    Some(updates::POSTURE_OPTION) => {
                        let posture: Posture = value.parse().map_err(
                            |e: cadre_runtime::permission::UnknownPosture| {
                                RpcError::params(e.to_string())
                            },
                        )?;
                        if posture > live.mapper.ceiling {
                            return Err(RpcError::params(format!(
                                "posture {posture} is wider than {}, which cadre acp was started \
                                 with; restart it with a wider --posture to allow it",
                                live.mapper.ceiling
                            )));
                        }
                        (Op::SetPosture { posture }, Pending::Posture(id.clone()))
                    }
                    _ => return Err(RpcError::params("unknown option: mode or posture")),
                };
                submit(live, &op, submission)?;
                live.pending.insert(op, pending);
                Ok(None)
            }
            _ => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("cadre does not offer {method}"),
            )),
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method == "session/cancel"
            && let Ok(live) = self.live(params)
        {
            let _ = live.launched.handle.submit(Op::Cancel);
        }
    }

    /// The client answered one of cadre's questions.
    fn response(&mut self, id: &Value, outcome: Result<Value, RpcError>) {
        let Some(asked) = id.as_str().and_then(|id| self.asked.remove(id)) else {
            return;
        };
        let chosen = |outcome: &Result<Value, RpcError>| match outcome {
            Ok(result) if result["outcome"]["outcome"] == "selected" => {
                Ok(result["outcome"]["optionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string())
            }
            Ok(_) => Err("the editor cancelled the question".to_string()),
            Err(err) => Err(format!("the editor could not ask: {}", err.message)),
        };
        match asked {
            Asked::Fs(reply) => {
                let _ = reply.send(outcome.map_err(|e| e.message));
            }
            Asked::Approval { session, approval } => {
                let (decision, reason) = match chosen(&outcome).as_deref() {
                    Ok("allow_once") => (ApprovalDecision::AllowOnce, None),
                    Ok("allow_session") => (ApprovalDecision::AllowSession, None),
                    Ok(_) => (ApprovalDecision::Deny, None),
                    Err(why) => (ApprovalDecision::Deny, Some(why.clone())),
                };
                if let Some(live) = self.sessions.get(&session) {
                    let _ = live.launched.handle.submit(Op::Approve {
                        id: approval,
                        decision,
                        reason,
                    });
                }
            }
            Asked::Questionnaire { session, id, entry } => {
                let answer = match (chosen(&outcome).as_deref(), entry) {
                    (Ok("approve"), _) => QuestionnaireAnswer::Approve,
                    (_, true) => QuestionnaireAnswer::Withdraw,
                    (_, false) => QuestionnaireAnswer::Defer,
                };
                if let Some(live) = self.sessions.get(&session) {
                    let _ = live.launched.handle.submit(Op::Answer { id, answer });
                }
            }
        }
    }

    fn live(&mut self, params: &Value) -> Result<&mut Live, RpcError> {
        let id = params["sessionId"].as_str().unwrap_or_default();
        self.sessions.get_mut(id).ok_or_else(|| {
            RpcError::new(
                rpc::RESOURCE_NOT_FOUND,
                format!("no session {id} is open here"),
            )
        })
    }

    /// Starts a session in `cwd`, or resumes `resume` (replaying its
    /// conversation first); answers with its id, modes and options.
    async fn open(&mut self, cwd: &Path, resume: Option<&str>) -> Result<Value, RpcError> {
        if let Some(id) = resume
            && self.sessions.contains_key(id)
        {
            return Err(RpcError::params(format!("session {id} is open already")));
        }
        let mut config = (self.configs)(cwd, resume).map_err(|e| RpcError::internal(e.message))?;
        // Every session runs under the posture `cadre acp` was started
        // with, a loaded one too (never the wider one it may have stored);
        // the editor may only narrow it.
        config.posture_given = true;
        let history = match resume {
            Some(id) => history(&config.data_dir, id)?,
            None => Vec::new(),
        };
        let session = Arc::new(OnceLock::new());
        let client = files::Client::new(session.clone(), self.fs.clone());
        let instead = files::tools(self.offer, &client, config.limits);
        let mut launched = launch_with(&config, true, instead)
            .await
            .map_err(|e| RpcError::internal(e.message))?;
        let id = launched.session_id.clone();
        let _ = session.set(id.clone());
        let Some(Envelope {
            event:
                Event::SessionStarted {
                    mode,
                    posture,
                    workspace,
                    ..
                },
            ..
        }) = launched.events.recv().await
        else {
            return Err(RpcError::internal("the session stopped as it started"));
        };
        let mapper = Mapper::new(&PathBuf::from(workspace), mode, posture, config.posture);
        for message in &history {
            for update_value in replay(message) {
                update(&id, update_value);
            }
        }
        let result = json!({
            "sessionId": id,
            "modes": mapper.modes(),
            "configOptions": mapper.config_options(),
        });
        let mut events = std::mem::replace(&mut launched.events, cadre_actors::events::channel().1);
        let tx = self.events.clone();
        let forwarded = id.clone();
        tokio::spawn(async move {
            while let Some(envelope) = events.recv().await {
                if tx.send((forwarded.clone(), envelope)).is_err() {
                    return;
                }
            }
        });
        self.sessions.insert(
            id,
            Live {
                launched,
                mapper,
                pending: HashMap::new(),
            },
        );
        Ok(result)
    }

    fn event(&mut self, session: &str, envelope: Envelope) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let Envelope { op_id, event } = envelope;
        // The updates first: a client that asked for a change sees it
        // before the answer, and a prompt's last update before its end.
        let actions = live.mapper.event(&event);
        let answer = op_id.as_ref().and_then(|op| {
            let answer = answer(live.pending.get(op), &event, &live.mapper)?;
            live.pending.remove(op);
            Some(answer)
        });
        for action in actions {
            match action {
                Action::Update(value) => update(session, value),
                Action::Approval {
                    approval,
                    tool_call,
                } => {
                    let id = self.next("approval");
                    let params = json!({
                        "sessionId": session,
                        "toolCall": tool_call,
                        "options": updates::options(&updates::APPROVAL_OPTIONS),
                    });
                    send(&rpc::request(&id, "session/request_permission", params));
                    let session = session.to_string();
                    self.asked.insert(id, Asked::Approval { session, approval });
                }
                Action::Questionnaire {
                    id: questionnaire,
                    tool_call,
                    entry,
                } => {
                    let id = self.next("questionnaire");
                    let params = json!({
                        "sessionId": session,
                        "toolCall": tool_call,
                        "options": updates::options(&updates::PLAN_OPTIONS),
                    });
                    send(&rpc::request(&id, "session/request_permission", params));
                    let asked = Asked::Questionnaire {
                        session: session.to_string(),
                        id: questionnaire,
                        entry,
                    };
                    self.asked.insert(id, asked);
                }
            }
        }
        if let Some(answer) = answer {
            send(&answer);
        }
        if matches!(event, Event::SessionStopped { .. })
            && let Some(live) = self.sessions.remove(session)
        {
            for (_, pending) in live.pending {
                let request = match pending {
                    Pending::Prompt(r) | Pending::Mode { request: r, .. } | Pending::Posture(r) => {
                        r
                    }
                };
                send(&rpc::error(
                    &request,
                    &RpcError::internal("the session stopped"),
                ));
            }
            tokio::spawn(stop(live.launched));
        }
    }

    /// A tool asks the client for a file.
    fn fs_call(&mut self, call: FsCall) {
        let Some(session) = call.session.get() else {
            let _ = call.reply.send(Err("the session has no id yet".into()));
            return;
        };
        let mut params = call.params;
        params["sessionId"] = json!(session);
        let id = self.next("fs");
        send(&rpc::request(&id, call.method, params));
        self.asked.insert(id, Asked::Fs(call.reply));
    }

    /// stdin closed: every session stops, its records written.
    async fn close(self) {
        for (_, live) in self.sessions {
            let _ = live.launched.handle.submit(Op::Shutdown);
            stop(live.launched).await;
        }
    }
}

/// Waits for a session to stop, then stops its MCP servers and its host.
async fn stop(launched: Launched) {
    let Launched {
        handle,
        host,
        attached,
        ..
    } = launched;
    handle.stopped().await;
    attached.mcp.shutdown().await;
    host.close().await;
}

fn submit(live: &Live, op_id: &str, op: Op) -> Result<(), RpcError> {
    live.launched
        .handle
        .submit_as(op_id, op)
        .map_err(|_| RpcError::internal("the session has stopped"))
}

/// The answer to a client request that `event` settles, if it does.
fn answer(pending: Option<&Pending>, event: &Event, mapper: &Mapper) -> Option<String> {
    let refused = |request: &Value, message: &str| {
        Some(rpc::error(request, &RpcError::params(message.to_string())))
    };
    match (pending?, event) {
        (Pending::Prompt(request), Event::TurnCompleted { .. }) => {
            Some(rpc::result(request, json!({"stopReason": "end_turn"})))
        }
        (
            Pending::Prompt(request),
            Event::TurnFailed {
                category, message, ..
            },
        ) => match category {
            FailureCategory::Cancelled => {
                Some(rpc::result(request, json!({"stopReason": "cancelled"})))
            }
            // The iteration limit (`--max-iterations`), which has no
            // category of its own.
            FailureCategory::Agent if message.contains("model requests without a final answer") => {
                Some(rpc::result(
                    request,
                    json!({"stopReason": "max_turn_requests"}),
                ))
            }
            FailureCategory::Agent
            | FailureCategory::Infrastructure
            | FailureCategory::PausedByDenials => {
                Some(rpc::error(request, &RpcError::internal(message.clone())))
            }
        },
        (
            Pending::Prompt(request) | Pending::Mode { request, .. } | Pending::Posture(request),
            Event::OpRejected { message, .. },
        ) => refused(request, message),
        (Pending::Mode { request, option }, Event::ModeChanged { mode }) => {
            let mut after = mapper.clone();
            after.mode = *mode;
            Some(rpc::result(
                request,
                if *option {
                    json!({"configOptions": after.config_options()})
                } else {
                    json!({})
                },
            ))
        }
        (Pending::Posture(request), Event::PostureChanged { posture }) => {
            let mut after = mapper.clone();
            after.posture = *posture;
            Some(rpc::result(
                request,
                json!({"configOptions": after.config_options()}),
            ))
        }
        _ => None,
    }
}

fn cwd(params: &Value) -> Result<PathBuf, RpcError> {
    let cwd = params["cwd"]
        .as_str()
        .ok_or_else(|| RpcError::params("'cwd' is a string"))?;
    let path = PathBuf::from(cwd);
    if !path.is_absolute() {
        return Err(RpcError::params("'cwd' is an absolute path"));
    }
    Ok(path)
}

/// A prompt's content blocks as one message: text as it is, a linked or
/// embedded file named (and an embedded one's text quoted).
pub fn prompt_text(prompt: &Value) -> Result<String, RpcError> {
    let blocks = prompt
        .as_array()
        .ok_or_else(|| RpcError::params("'prompt' is a list of content blocks"))?;
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().unwrap_or_default().to_string()),
            Some("resource_link") => {
                parts.push(format!("@{}", block["uri"].as_str().unwrap_or_default()))
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                match resource["text"].as_str() {
                    Some(text) => parts.push(format!("@{uri}:\n```\n{text}\n```")),
                    None => parts.push(format!("@{uri}")),
                }
            }
            other => {
                return Err(RpcError::params(format!(
                    "cadre takes text and resources, not {}",
                    other.unwrap_or("an untyped block")
                )));
            }
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err(RpcError::params("the prompt is empty"));
    }
    Ok(text)
}

/// A stored session's conversation, for `session/load` to replay.
fn history(data_dir: &Path, id: &str) -> Result<Vec<Message>, RpcError> {
    let path = store_path(data_dir);
    let not_found = || RpcError::new(rpc::RESOURCE_NOT_FOUND, format!("no stored session {id}"));
    if !path.exists() {
        return Err(not_found());
    }
    let store = Store::open(&path).map_err(|e| RpcError::internal(e.to_string()))?;
    let found = store.resolve(id, None).map_err(|_| not_found())?;
    if found.id != id {
        return Err(not_found());
    }
    store
        .conversation(id)
        .map_err(|e| RpcError::internal(e.to_string()))
}

/// A stored message as the updates that show it again.
pub fn replay(message: &Message) -> Vec<Value> {
    let text = |kind: &str, text: &str| json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}});
    match message {
        Message::User { content } => vec![text("user_message_chunk", content)],
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = Vec::new();
            if !content.is_empty() {
                out.push(text("agent_message_chunk", content));
            }
            out.extend(tool_calls.iter().map(|call| {
                json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "title": call.name,
                    "status": "completed",
                    "rawInput": serde_json::from_str::<Value>(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                })
            }));
            out
        }
        Message::Tool { .. } | Message::Compaction(_) => Vec::new(),
    }
}
