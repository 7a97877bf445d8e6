//! `cadre acp`: a scripted editor talks to the binary over pipes, as Zed
//! would (newline-delimited JSON-RPC), against the scripted model.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::cli::{dirs, s};
use crate::support::hermetic::Hermetic;

/// A guard against a hang, never a speed assertion.
const PATIENCE: Duration = Duration::from_secs(120);

/// An editor: the process, its pipes, and every message it received.
struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next: u64,
    seen: Vec<Value>,
}

impl Editor {
    /// Starts `cadre acp` with `flags` (the model, the data dir, a posture)
    /// and initializes it; `fs` offers the editor's file access.
    async fn start(flags: &[&str], fs: bool) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
            .hermetic()
            .arg("acp")
            .args(flags)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn cadre acp");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut editor = Self {
            child,
            stdin,
            lines,
            next: 0,
            seen: Vec::new(),
        };
        let init = editor
            .call(
                "initialize",
                json!({
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}},
                    "clientInfo": {"name": "test-editor", "version": "0"},
                }),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
        editor
    }

    async fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write to cadre");
        stdin.flush().await.expect("flush");
    }

    /// Sends a request and returns its id.
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and reads until its answer (keeping what came
    /// before in `seen`).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.until(|m| m["id"] == id && m.get("method").is_none())
            .await
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("cadre answered in time")
            .expect("read cadre's stdout")
            .expect("cadre's stdout is open");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        self.seen.push(message.clone());
        message
    }

    /// Reads until a message matches.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.recv().await;
            if wanted(&message) {
                return message;
            }
        }
    }

    /// The next question cadre asks (`method`), answered by nobody yet.
    async fn asked(&mut self, method: &str) -> Value {
        self.until(|m| m["method"] == method && m.get("id").is_some())
            .await
    }

    /// Answers a permission request with `option`.
    async fn choose(&mut self, request: &Value, option: &str) {
        let id = request["id"].clone();
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "selected", "optionId": option}}}))
            .await;
    }

    async fn new_session(&mut self, cwd: &Path) -> String {
        let answer = self
            .call("session/new", json!({"cwd": s(cwd), "mcpServers": []}))
            .await;
        let result = &answer["result"];
        assert_eq!(result["modes"]["currentModeId"], "work", "{answer}");
        result["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string()
    }

    /// The `session/update`s seen so far, of `kind`.
    fn updates(&self, kind: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }

    /// Closes stdin and waits for a clean exit.
    async fn finish(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("cadre acp exits when stdin closes")
            .expect("wait");
        assert!(status.success(), "cadre acp exited with {status}");
    }
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

fn script(dir: &Path, text: &str) -> String {
    let path = dir.join("script.toml");
    std::fs::write(&path, text).expect("script");
    path.display().to_string()
}

#[tokio::test]
async fn the_editor_is_asked_before_a_write_and_its_answer_decides() {
    let (ws, data) = dirs();
    let script = script(
        data.path(),
        r#"
[[response]]
iteration = 1
text = "Writing two files."
[[response.tool_calls]]
name = "write_file"
arguments = { path = "kept.txt", content = "kept\n" }
[[response.tool_calls]]
name = "write_file"
arguments = { path = "refused.txt", content = "refused\n" }

[[response]]
iteration = 2
text = "done"
"#,
    );
    let mut editor =
        Editor::start(&["--script", &script, "--data-dir", s(data.path())], false).await;
    let session = editor.new_session(ws.path()).await;
    let id = editor
        .request("session/prompt", prompt(&session, "write"))
        .await;

    let first = editor.asked("session/request_permission").await;
    assert_eq!(first["params"]["sessionId"], session.as_str());
    assert_eq!(first["params"]["toolCall"]["rawInput"]["path"], "kept.txt");
    let options: Vec<&str> = first["params"]["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| o["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    editor.choose(&first, "allow_once").await;

    let second = editor.asked("session/request_permission").await;
    assert_eq!(
        second["params"]["toolCall"]["rawInput"]["path"],
        "refused.txt"
    );
    editor.choose(&second, "deny").await;

    let end = editor.until(|m| m["id"] == id).await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("kept.txt")).expect("the allowed write ran"),
        "kept\n"
    );
    assert!(
        !ws.path().join("refused.txt").exists(),
        "a denied write ran"
    );
    let statuses: Vec<(String, String)> = editor
        .updates("tool_call_update")
        .iter()
        .map(|u| (u["toolCallId"].to_string(), u["status"].to_string()))
        .collect();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert_eq!(statuses[0].1, "\"completed\"");
    assert_eq!(statuses[1].1, "\"failed\"");
    // The calls were shown, with the file each touches, before they ran.
    let calls = editor.updates("tool_call");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0]["locations"][0]["path"],
        s(&ws.path().join("kept.txt"))
    );
    assert_eq!(calls[0]["kind"], "edit");
    let text: String = editor
        .updates("agent_message_chunk")
        .iter()
        .map(|u| {
            u["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(text, "Writing two files.done");
    editor.finish().await;
}

#[tokio::test]
async fn a_mode_change_mid_turn_is_refused_and_a_cancel_ends_the_turn_with_nothing_run() {
    let (ws, data) = dirs();
    let script = script(
        data.path(),
        r#"
[[response]]
turn = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "late.txt", content = "late\n" }

[[response]]
turn = 2
text = "planned"
"#,
    );
    let mut editor =
        Editor::start(&["--script", &script, "--data-dir", s(data.path())], false).await;
    let session = editor.new_session(ws.path()).await;
    let id = editor
        .request("session/prompt", prompt(&session, "write late"))
        .await;
    let asked = editor.asked("session/request_permission").await;

    // The turn waits for the editor: a mode change now is refused.
    let refused = editor
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("turn"), "not refused: {refused}");
    // The posture cannot be widened past what cadre acp was started with.
    let wider = editor
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "posture", "value": "bypass"}),
        )
        .await;
    assert!(
        wider["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("wider"),
        "{wider}"
    );

    editor
        .send(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    let end = editor.until(|m| m["id"] == id).await;
    assert_eq!(end["result"]["stopReason"], "cancelled", "{end}");
    // Allowing the withdrawn prompt afterwards runs nothing.
    editor.choose(&asked, "allow_once").await;

    // Idle now: the mode change goes through and the editor is told.
    let changed = editor
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert_eq!(changed["result"], json!({}), "{changed}");
    let modes = editor.updates("current_mode_update");
    assert_eq!(
        modes.last().expect("a mode update")["currentModeId"],
        "plan"
    );
    let end = editor
        .call("session/prompt", prompt(&session, "plan it"))
        .await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    assert!(
        !ws.path().join("late.txt").exists(),
        "the cancelled write ran"
    );
    editor.finish().await;
}

#[tokio::test]
async fn a_session_loaded_in_another_process_replays_its_conversation_and_goes_on() {
    let (ws, data) = dirs();
    let script = script(
        data.path(),
        r#"
[[response]]
turn = 1
text = "first answer"

[[response]]
turn = 2
text = "second answer"
"#,
    );
    let flags = ["--script", &script, "--data-dir", s(data.path())];
    let mut editor = Editor::start(&flags, false).await;
    // No key in the environment: the env-key method says where to set it.
    let auth = editor
        .call("authenticate", json!({"methodId": "openai-api-key"}))
        .await;
    assert_eq!(auth["error"]["code"], -32000, "{auth}");
    let session = editor.new_session(ws.path()).await;
    let end = editor
        .call("session/prompt", prompt(&session, "first question"))
        .await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    editor.finish().await;

    let mut editor = Editor::start(&flags, false).await;
    let loaded = editor
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": s(ws.path()), "mcpServers": []}),
        )
        .await;
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "work",
        "{loaded}"
    );
    let said: Vec<(String, String)> = editor
        .seen
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            let u = &m["params"]["update"];
            (
                u["sessionUpdate"].as_str().unwrap_or_default().to_string(),
                u["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            (
                "user_message_chunk".to_string(),
                "first question".to_string()
            ),
            (
                "agent_message_chunk".to_string(),
                "first answer".to_string()
            ),
        ]
    );
    let end = editor
        .call("session/prompt", prompt(&session, "second question"))
        .await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    let last = editor.updates("agent_message_chunk");
    assert_eq!(
        last.last().expect("an answer")["content"]["text"],
        "second answer"
    );

    // A session that is not stored is not found.
    let missing = editor
        .call(
            "session/load",
            json!({"sessionId": "no-such-session", "cwd": s(ws.path()), "mcpServers": []}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    editor.finish().await;
}

#[tokio::test]
async fn file_tools_read_and_write_the_editors_buffers_and_plan_writes_nothing() {
    let (ws, data) = dirs();
    std::fs::write(ws.path().join("notes.txt"), "on disk\n").expect("notes");
    let script = script(
        data.path(),
        r#"
[[response]]
mode = "work"
iteration = 1
[[response.tool_calls]]
name = "read_file"
arguments = { path = "notes.txt" }

[[response]]
mode = "work"
iteration = 2
[[response.tool_calls]]
name = "edit_file"
arguments = { path = "notes.txt", old_string = "unsaved", new_string = "edited" }

[[response]]
mode = "work"
iteration = 3
text = "edited"

[[response]]
mode = "plan"
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "notes.txt", content = "overwritten\n" }

[[response]]
mode = "plan"
iteration = 2
text = "refused"
"#,
    );
    let mut editor = Editor::start(
        &[
            "--script",
            &script,
            "--data-dir",
            s(data.path()),
            "--posture",
            "bypass",
        ],
        true,
    )
    .await;
    let session = editor.new_session(ws.path()).await;
    let notes = s(&ws.path().join("notes.txt")).to_string();
    let mut buffer = "unsaved in the editor\n".to_string();
    let id = editor
        .request("session/prompt", prompt(&session, "edit notes"))
        .await;
    let mut writes = Vec::new();
    loop {
        let message = editor.recv().await;
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let reply = message["id"].clone();
        match method.as_str() {
            "fs/read_text_file" => {
                assert_eq!(message["params"]["path"], notes.as_str());
                assert_eq!(message["params"]["sessionId"], session.as_str());
                let content = buffer.clone();
                editor
                    .send(json!({"jsonrpc": "2.0", "id": reply, "result": {"content": content}}))
                    .await;
            }
            "fs/write_text_file" => {
                buffer = message["params"]["content"]
                    .as_str()
                    .expect("content")
                    .to_string();
                writes.push(buffer.clone());
                editor
                    .send(json!({"jsonrpc": "2.0", "id": reply, "result": {}}))
                    .await;
            }
            _ if message["id"] == id => {
                assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
                break;
            }
            _ => {}
        }
    }
    assert_eq!(writes, ["edited in the editor\n"]);
    let results = editor.updates("tool_call_update");
    let read = results[0]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        read.contains("unsaved in the editor"),
        "read the disk: {read}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).expect("notes"),
        "on disk\n",
        "the disk was written behind the editor's back"
    );

    // Plan changes nothing, even under bypass and through the editor.
    let changed = editor
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "plan"}),
        )
        .await;
    assert_eq!(
        changed["result"]["configOptions"][0]["currentValue"], "plan",
        "{changed}"
    );
    let before = editor.seen.len();
    let end = editor
        .call("session/prompt", prompt(&session, "overwrite"))
        .await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    let after = &editor.seen[before..];
    assert!(
        !after
            .iter()
            .any(|m| m["method"] == "fs/write_text_file"
                || m["method"] == "session/request_permission"),
        "Plan asked to write: {after:?}"
    );
    let refused = editor.updates("tool_call_update");
    assert_eq!(
        refused.last().expect("the refused call")["status"],
        "failed"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).expect("notes"),
        "on disk\n"
    );
    editor.finish().await;
}

#[tokio::test]
async fn a_sub_agents_approval_is_asked_in_the_editor_and_routed_back_to_it() {
    let (ws, data) = dirs();
    let script = script(
        data.path(),
        r#"
[[response]]
role = "main"
iteration = 1
[[response.tool_calls]]
name = "agent"
arguments = { action = "spawn", prompt = "write the file" }

[[response]]
role = "main"
iteration = 2
text = "the worker is done"

[[response]]
role = "worker"
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "from-worker.txt", content = "worker\n" }

[[response]]
role = "worker"
iteration = 2
text = "written"
"#,
    );
    let mut editor =
        Editor::start(&["--script", &script, "--data-dir", s(data.path())], false).await;
    let session = editor.new_session(ws.path()).await;
    let id = editor
        .request("session/prompt", prompt(&session, "delegate"))
        .await;
    let asked = editor.asked("session/request_permission").await;
    let title = asked["params"]["toolCall"]["title"]
        .as_str()
        .unwrap_or_default();
    assert!(title.starts_with("agent 1: write_file"), "{asked}");
    assert_eq!(
        asked["params"]["toolCall"]["rawInput"]["path"],
        "from-worker.txt"
    );
    assert!(!ws.path().join("from-worker.txt").exists());
    editor.choose(&asked, "allow_once").await;
    let end = editor.until(|m| m["id"] == id).await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("from-worker.txt")).expect("the worker wrote"),
        "worker\n"
    );
    editor.finish().await;
}

#[tokio::test]
async fn a_workflow_steps_approval_is_asked_in_the_editor_and_routed_to_the_step() {
    let (ws, data) = dirs();
    let script = script(
        data.path(),
        r#"
[[response]]
role = "main"
iteration = 1
[[response.tool_calls]]
name = "workflow"
arguments = { workflow = { name = "w" }, steps = [{ name = "write", prompt = "write the file" }] }

[[response]]
role = "main"
iteration = 2
text = "delegated"

[[response]]
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "from-step.txt", content = "step\n" }

[[response]]
iteration = 2
text = "written"
"#,
    );
    let mut editor =
        Editor::start(&["--script", &script, "--data-dir", s(data.path())], false).await;
    let session = editor.new_session(ws.path()).await;
    let operate = editor
        .call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "operate"}),
        )
        .await;
    assert_eq!(operate["result"], json!({}), "{operate}");
    let id = editor
        .request("session/prompt", prompt(&session, "delegate"))
        .await;
    let asked = editor.asked("session/request_permission").await;
    assert_eq!(
        asked["params"]["toolCall"]["rawInput"]["path"], "from-step.txt",
        "{asked}"
    );
    assert!(!ws.path().join("from-step.txt").exists());
    editor.choose(&asked, "allow_once").await;
    let end = editor.until(|m| m["id"] == id).await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("from-step.txt")).expect("the step wrote"),
        "step\n"
    );
    editor.finish().await;
}
