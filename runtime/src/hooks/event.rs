//! The JSON object a hook reads on stdin.
//!
//! Every event carries `event`, `session_id` (a workflow step's: its
//! run's), `agent` (`main`, `1`, `1.2`, a step's path), `role`, `step`
//! (a workflow step's name, else null), `mode`, `posture` and `cwd` (the
//! workspace); tool events add `tool`, `arguments` and `paths` (each path
//! the call names: `written`, `path` and, when a symlink leads elsewhere,
//! `real`); the others add what they are about (`prompt`, `message`,
//! `tool_result`, …) through [`with`].

use std::path::Path;

use serde_json::{Map, Value, json};

use super::config::HookEvent;
use crate::mode::Mode;
use crate::permission::Posture;
use crate::permission::call::Call;

/// Which agent an event is about.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// Its session (a workflow step's: its run).
    pub session_id: &'a str,
    /// Its place in the tree.
    pub agent: &'a str,
    /// Its role.
    pub role: &'a str,
    /// The workflow step it runs, if it is one.
    pub step: Option<&'a str>,
    /// Its mode in force.
    pub mode: Mode,
    /// Its posture in force.
    pub posture: Posture,
    /// The workspace.
    pub cwd: &'a Path,
}

/// The fields every event carries.
pub fn base(event: HookEvent, who: &Who<'_>) -> Value {
    json!({
        "event": event.as_str(),
        "session_id": who.session_id,
        "agent": who.agent,
        "role": who.role,
        "step": who.step,
        "mode": who.mode.as_str(),
        "posture": who.posture.as_str(),
        "cwd": who.cwd.display().to_string(),
    })
}

/// `event` with `fields` added.
pub fn with(mut event: Value, fields: Value) -> Value {
    if let (Some(into), Value::Object(from)) = (event.as_object_mut(), fields) {
        into.extend(from);
    }
    event
}

/// A tool event (`pre_tool_use`, `post_tool_use`) about `call`.
pub fn tool_event(event: HookEvent, who: &Who<'_>, call: &Call<'_>) -> Value {
    let paths: Vec<Value> = call
        .names()
        .iter()
        .map(|named| {
            let mut entry = Map::new();
            entry.insert("written".into(), named.text.clone().into());
            entry.insert("path".into(), named.lexical.display().to_string().into());
            if let Some(real) = call.spellings(named).get(1) {
                entry.insert("real".into(), real.display().to_string().into());
            }
            Value::Object(entry)
        })
        .collect();
    with(
        base(event, who),
        json!({
            "tool": call.def.name,
            "arguments": call.args,
            "paths": paths,
        }),
    )
}

#[cfg(test)]
mod tests;
