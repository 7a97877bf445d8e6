//! The request on the wire: serialized straight from a [`ModelRequest`]'s
//! shared parts, each tool list's JSON made once ([`ToolsJson`]).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::json;
use serde_json::value::RawValue;

use super::super::ModelRequest;
use super::super::params::WireParams;
use super::OpenAiConfig;
use super::wire::Wire;
use crate::message::Message;
use crate::tool::ToolSpec;

/// Tool lists as JSON, each serialized once: every request of a turn, and
/// every agent offered the same tools, sends one shared `Arc<[ToolSpec]>`
/// (the runner's offers), so its JSON is kept by the list's address.
#[derive(Default)]
pub(super) struct ToolsJson(Mutex<Vec<KeptTools>>);

/// A tool list and its JSON.
pub(super) struct KeptTools {
    list: Weak<[ToolSpec]>,
    json: Arc<RawValue>,
}

/// How many tool lists' JSON is kept, the least recently sent going first
/// (as many as the runner keeps offers).
pub(super) const TOOL_LISTS_KEPT: usize = 64;

impl ToolsJson {
    /// `tools` as the JSON of the request's `tools` field; `None` for no
    /// tools, or when they did not serialize (the request then serializes
    /// them itself, and fails as it would have).
    pub(super) fn of(&self, tools: &Arc<[ToolSpec]>) -> Option<Arc<RawValue>> {
        if tools.is_empty() {
            return None;
        }
        let same = |k: &KeptTools| std::ptr::addr_eq(k.list.as_ptr(), Arc::as_ptr(tools));
        {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            // A kept `Weak` keeps its list's allocation: while it is kept,
            // no other list can have that address.
            if let Some(at) = kept.iter().position(same) {
                let hit = kept.remove(at);
                let json = hit.json.clone();
                kept.push(hit);
                return Some(json);
            }
        }
        let json: Arc<RawValue> = serde_json::value::to_raw_value(&WireTools(tools))
            .ok()?
            .into();
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Another request may have kept the same list meanwhile.
        kept.retain(|k| k.list.strong_count() > 0 && !same(k));
        if kept.len() >= TOOL_LISTS_KEPT {
            kept.remove(0);
        }
        kept.push(KeptTools {
            list: Arc::downgrade(tools),
            json: json.clone(),
        });
        Some(json)
    }
}

/// The wire request for one model request: serialized straight from the
/// request's shared parts (system prompt, history, tool specs), with no
/// copy of the conversation or the tool schemas per request.
pub(super) struct WireRequest {
    request: ModelRequest,
    model: Arc<str>,
    stream: bool,
    /// The request's tools, serialized once per list.
    tools: Option<Arc<RawValue>>,
    /// The client's parameters, serialized once per client.
    params: Arc<WireParams>,
}

impl WireRequest {
    /// The parameters this request sends.
    pub(super) fn params(&self) -> &WireParams {
        &self.params
    }

    /// Sends `params` instead (a rejected one left out).
    pub(super) fn set_params(&mut self, params: Arc<WireParams>) {
        self.params = params;
    }
}

pub(super) fn chat_request(
    request: ModelRequest,
    config: &OpenAiConfig,
    wire: &Wire,
) -> WireRequest {
    let model = request
        .model
        .clone()
        .unwrap_or_else(|| Arc::from(config.model.as_str()));
    WireRequest {
        tools: wire.tools.of(&request.tools),
        request,
        model,
        stream: config.stream,
        params: wire.params.current(),
    }
}

impl Serialize for WireRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", &*self.model)?;
        map.serialize_entry("messages", &WireMessages(&self.request))?;
        match &self.tools {
            Some(json) => map.serialize_entry("tools", &**json)?,
            None if !self.request.tools.is_empty() => {
                map.serialize_entry("tools", &WireTools(&self.request.tools))?;
            }
            None => {}
        }
        map.serialize_entry("stream", &self.stream)?;
        if self.stream {
            map.serialize_entry("stream_options", &json!({"include_usage": true}))?;
        }
        for (name, value) in self.params.entries() {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// The system prompt, the conversation and the reminder, as chat messages.
pub(super) struct WireMessages<'a>(&'a ModelRequest);

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = self.0;
        let mut seq = serializer.serialize_seq(None)?;
        seq.serialize_element(&Plain("system", &request.system))?;
        for message in request.messages() {
            seq.serialize_element(&WireMessage(message))?;
        }
        if let Some(reminder) = &request.reminder {
            seq.serialize_element(&Plain("user", reminder))?;
        }
        seq.end()
    }
}

/// `{"role": …, "content": …}`.
pub(super) struct Plain<'a>(&'static str, &'a str);

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", self.0)?;
        map.serialize_entry("content", self.1)?;
        map.end()
    }
}

/// One stored message in the chat wire format.
pub(super) struct WireMessage<'a>(&'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Message::User { content } => Plain("user", content).serialize(serializer),
            // The record reads as a user message: every server accepts one
            // anywhere, and it is cadre speaking, not the model.
            Message::Compaction(record) => Plain("user", &record.render()).serialize(serializer),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("role", "assistant")?;
                // A call-only answer carries no content field.
                if !content.is_empty() || tool_calls.is_empty() {
                    map.serialize_entry("content", content)?;
                }
                if !tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &WireCalls(tool_calls))?;
                }
                map.end()
            }
            Message::Tool { call_id, content } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("content", content)?;
                map.serialize_entry("tool_call_id", call_id)?;
                map.end()
            }
        }
    }
}

pub(super) struct WireCalls<'a>(&'a [crate::message::ToolCall]);

impl Serialize for WireCalls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for call in self.0 {
            seq.serialize_element(&json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }))?;
        }
        seq.end()
    }
}

/// The tool specs as chat tools, schemas serialized in place.
pub(super) struct WireTools<'a>(&'a [ToolSpec]);

impl Serialize for WireTools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for spec in self.0 {
            seq.serialize_element(&WireTool(spec))?;
        }
        seq.end()
    }
}

pub(super) struct WireTool<'a>(&'a ToolSpec);

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a crate::tool::ToolSpec);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("name", &self.0.name)?;
                map.serialize_entry("description", &self.0.description)?;
                map.serialize_entry("parameters", &self.0.parameters)?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &Function(self.0))?;
        map.end()
    }
}

#[cfg(test)]
mod tools_json_tests {
    use super::*;

    fn list(names: &[String]) -> Arc<[ToolSpec]> {
        names
            .iter()
            .map(|name| ToolSpec {
                name: name.clone(),
                description: format!("Does \"{name}\"\nthings"),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            })
            .collect::<Vec<_>>()
            .into()
    }

    fn kept_list(name: &str) -> Arc<[ToolSpec]> {
        list(&[name.to_string()])
    }

    fn serialized(tools: &[ToolSpec]) -> Option<String> {
        (!tools.is_empty()).then(|| serde_json::to_string(&WireTools(tools)).unwrap())
    }

    #[test]
    fn a_tool_list_is_serialized_once_and_reads_as_it_always_did() {
        let kept = ToolsJson::default();
        let lists: Vec<Arc<[ToolSpec]>> = (0..3 * TOOL_LISTS_KEPT)
            .map(|n| {
                let names: Vec<String> = (0..n % 4).map(|i| format!("tool_{n}_{i}")).collect();
                list(&names)
            })
            .collect();
        // Every list, again and again, in an order that evicts.
        for round in 0..3 {
            for (n, tools) in lists.iter().enumerate() {
                let got = kept.of(tools).map(|json| json.get().to_string());
                assert_eq!(got, serialized(tools), "round {round}, list {n}");
            }
        }
        // The same list twice: the same JSON, not serialized again.
        let (first, again) = (kept.of(&lists[1]).unwrap(), kept.of(&lists[1]).unwrap());
        assert!(Arc::ptr_eq(&first, &again));
        // A list sent again is kept longest: after as many other lists as
        // are kept, it still has its JSON, while the next oldest lost its.
        let fresh = ToolsJson::default();
        let (hot, cold) = (kept_list("hot"), kept_list("cold"));
        let (hot_json, cold_json) = (fresh.of(&hot).unwrap(), fresh.of(&cold).unwrap());
        let others: Vec<_> = (0..TOOL_LISTS_KEPT - 1)
            .map(|n| kept_list(&format!("other_{n}")))
            .collect();
        for other in &others {
            fresh.of(other);
            assert!(Arc::ptr_eq(&fresh.of(&hot).unwrap(), &hot_json));
        }
        assert!(!Arc::ptr_eq(&fresh.of(&cold).unwrap(), &cold_json));
        // Lists made and dropped one after another (the allocator may hand
        // a new one a dropped one's address) each read as themselves.
        for n in 0..200 {
            let tools = list(&[format!("fresh_{n}")]);
            let got = kept.of(&tools).map(|json| json.get().to_string());
            assert_eq!(got, serialized(&tools), "fresh list {n}");
        }
    }
}
