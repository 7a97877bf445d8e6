//! An MCP server's tools as cadre tools: names, definitions, safety, and
//! results as the model reads them. Pure: no server is needed.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tool::{Safety, ToolDefinition, ToolError, truncate_middle};

use super::config::McpServerConfig;

/// What a tool result may hold for the model, like a `bash` call's.
pub const MAX_RESULT: usize = 64 * 1024;
/// What a tool's description may take of a model request.
const MAX_DESCRIPTION: usize = 4 * 1024;
/// How many tools one server may offer: every model request lists them
/// all (and providers refuse more than 128 tools in one request).
pub const MAX_TOOLS: usize = 100;
/// What one server's tools (schemas and descriptions) may take of every
/// model request.
pub const MAX_TOOLS_BYTES: usize = 256 * 1024;
/// Tool names providers accept are at most this long.
const MAX_NAME: usize = 64;

/// `mcp_<server>_<tool>`, with characters providers refuse replaced by `_`
/// and a name too long cut, keeping a hash of the whole so two long names
/// stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean: String = format!("mcp_{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    let hash = Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let suffix: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}_{suffix}", &clean[..MAX_NAME - suffix.len() - 1])
}

/// A tool's safety: read-only only when the server is trusted and the tool
/// says `readOnlyHint: true`; everything else may change things.
pub fn safety(trusted: bool, read_only_hint: Option<bool>) -> Safety {
    match (trusted, read_only_hint) {
        (true, Some(true)) => Safety::ReadOnly,
        _ => Safety::SideEffect,
    }
}

/// Why a server's tool is not offered (the server's other tools still
/// are). Not retryable: the server lists the same tool until it changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// The listed tool has no `name` string. Not retryable.
    #[error("a tool without a name")]
    NoName,
    /// The tool (named) has no `inputSchema` object. Not retryable.
    #[error("'{0}' has no input schema object")]
    NoSchema(String),
    /// The tool's (named) schema would take more than 64 KiB of every
    /// request. Not retryable.
    #[error("'{0}' has an input schema over 64 KiB")]
    SchemaTooLarge(String),
}

/// The definition of a server's tool, from the tool as the server lists it
/// (its JSON form: `name`, `description`, `inputSchema`, `annotations`).
pub fn definition(
    server: &McpServerConfig,
    tool: &Value,
) -> Result<ToolDefinition, DefinitionError> {
    let remote = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or(DefinitionError::NoName)?;
    let schema = tool
        .get("inputSchema")
        .filter(|s| s.is_object())
        .cloned()
        .ok_or_else(|| DefinitionError::NoSchema(remote.to_string()))?;
    if schema.to_string().len() > MAX_RESULT {
        return Err(DefinitionError::SchemaTooLarge(remote.to_string()));
    }
    let hint = tool
        .pointer("/annotations/readOnlyHint")
        .and_then(Value::as_bool);
    let about = tool
        .get("description")
        .or_else(|| tool.get("title"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let description = format!(
        "[MCP server '{}', tool '{remote}'] {}",
        server.name,
        truncate_middle(about, MAX_DESCRIPTION)
    );
    let (schema, takes_path) = narrow_path(schema);
    let mut def = ToolDefinition::new(
        tool_name(&server.name, remote),
        description,
        schema,
        safety(server.trusted, hint),
    )
    .with_timeout(server.tool_timeout);
    if takes_path {
        def = def.taking_path("path");
    }
    Ok(def)
}

/// A schema with a `path` property, whatever that property says it
/// accepts, narrowed so `path` must be a string; and whether it has one.
///
/// Path rules, protected paths and the floor read a tool's `path` only as
/// a string. A server that declares `path` with no type, as `anyOf`, as a
/// `$ref` or as an array would otherwise have its writes into `.git` or
/// cadre's configuration go unseen: the call is then decided as a tool
/// without a path. Narrowed, a call with anything but a string `path` is
/// refused by the schema before the gates, and the gates read the string.
fn narrow_path(mut schema: Value) -> (Value, bool) {
    let Some(path) = schema.pointer_mut("/properties/path") else {
        return (schema, false);
    };
    if path.get("type").and_then(Value::as_str) != Some("string") {
        let declared = path.take();
        *path = serde_json::json!({"allOf": [declared, {"type": "string"}]});
    }
    (schema, true)
}

/// A tool result (its JSON form) as the model reads it: text blocks as
/// they are, structured content as JSON, images, audio and resources
/// summarised, all bounded; structured content only when no text came. A result marked as an error is a failed call.
pub fn render(result: &Value) -> Result<String, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(block_text(block));
    }
    // The spec asks servers to send structured content as text too; it is
    // shown only when no text came with it.
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
        && parts.is_empty()
    {
        parts.push(structured.to_string());
    }
    let text = truncate_middle(&parts.join("\n"), MAX_RESULT);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = if text.is_empty() {
            "the tool reported an error".into()
        } else {
            text
        };
        return Err(ToolError::failed(text));
    }
    Ok(text)
}

fn block_text(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    let size = |data: &str| data.len() / 4 * 3;
    match field("type") {
        "text" => field("text").to_string(),
        "image" => format!(
            "[image {}, about {} bytes]",
            field("mimeType"),
            size(field("data"))
        ),
        "audio" => format!(
            "[audio {}, about {} bytes]",
            field("mimeType"),
            size(field("data"))
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str);
            let uri = get("uri").unwrap_or_default();
            match (get("text"), get("blob")) {
                (Some(text), _) => format!("[resource {uri}]\n{text}"),
                (None, Some(blob)) => format!(
                    "[resource {uri}: {}, about {} bytes]",
                    get("mimeType").unwrap_or("binary"),
                    size(blob)
                ),
                (None, None) => format!("[resource {uri}]"),
            }
        }
        "resource_link" => format!("[resource link {} ({})]", field("uri"), field("name")),
        other => format!("[{other} content]"),
    }
}
