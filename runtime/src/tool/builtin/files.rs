//! `read_file`, `list_dir`, `write_file`, `edit_file`.

use serde_json::{Value, json};

use super::{MAX_OUTPUT, optional_str, required_str, shown, truncate_middle};
use crate::tool::definition::{
    ErrorCode, Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};

/// Reads a text file, optionally a range of its lines.
pub struct ReadFile(ToolDefinition);

impl ReadFile {
    pub fn new() -> Self {
        Self(ToolDefinition::new(
            "read_file",
            "Read a UTF-8 text file in the workspace. `offset` (1-based line) and `limit` \
             (number of lines) select a range; long output is cut in the middle.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        ))
    }
}

impl Tool for ReadFile {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = required_str(&args, "path")?;
            let path = ctx.resolve(arg)?;
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| ToolError::io(arg, &e))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ToolError::failed(format!("{arg} is not a UTF-8 text file")))?;
            let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(1) as usize;
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map(|n| n as usize);
            let selected = if offset == 1 && limit.is_none() {
                text
            } else {
                let lines = text.split_inclusive('\n').skip(offset - 1);
                match limit {
                    Some(n) => lines.take(n).collect(),
                    None => lines.collect(),
                }
            };
            Ok(truncate_middle(&selected, MAX_OUTPUT))
        })
    }
}

/// Lists a directory, directories marked with a trailing `/`.
pub struct ListDir(ToolDefinition);

const MAX_ENTRIES: usize = 1000;

impl ListDir {
    pub fn new() -> Self {
        Self(ToolDefinition::new(
            "list_dir",
            "List the entries of a directory in the workspace, sorted by name; \
             directories end with '/'.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory path, relative to the workspace root (default '.')"}
                },
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        ))
    }
}

impl Tool for ListDir {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = optional_str(&args, "path").unwrap_or(".").to_string();
            let path = ctx.resolve(&arg)?;
            // One trip to the blocking pool for the whole listing, rather
            // than one per entry.
            tokio::task::spawn_blocking(move || list(&path, &arg))
                .await
                .map_err(|_| ToolError::failed("listing the directory was interrupted"))?
        })
    }
}

fn list(path: &std::path::Path, arg: &str) -> Result<String, ToolError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| ToolError::io(arg, &e))? {
        let entry = entry.map_err(|e| ToolError::io(arg, &e))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    let total = names.len();
    if total == 0 {
        return Ok("(empty directory)".to_string());
    }
    names.truncate(MAX_ENTRIES);
    let mut out = names.join("\n");
    if total > MAX_ENTRIES {
        out.push_str(&format!("\n[... {} more entries]", total - MAX_ENTRIES));
    }
    Ok(out)
}

/// Writes a whole file, creating parent directories.
pub struct WriteFile(ToolDefinition);

impl WriteFile {
    pub fn new() -> Self {
        Self(
            ToolDefinition::new(
                "write_file",
                "Create or overwrite a file in the workspace with `content`; parent \
                 directories are created.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, relative to the workspace root"},
                        "content": {"type": "string", "description": "The complete new content"}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
                Safety::SideEffect,
            )
            .writing_path_only(),
        )
    }
}

impl Tool for WriteFile {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = required_str(&args, "path")?;
            let content = required_str(&args, "content")?;
            let path = ctx.resolve(arg)?;
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| ToolError::io(arg, &e))?;
            }
            tokio::fs::write(&path, content)
                .await
                .map_err(|e| ToolError::io(arg, &e))?;
            Ok(format!(
                "wrote {} bytes to {}",
                content.len(),
                shown(ctx.workspace.root(), &path)
            ))
        })
    }
}

/// Replaces an exact string in a file.
pub struct EditFile(ToolDefinition);

impl EditFile {
    pub fn new() -> Self {
        Self(
            ToolDefinition::new(
                "edit_file",
                "Replace the exact text `old_string` with `new_string` in a file. \
                 `old_string` must occur exactly once unless `replace_all` is true.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, relative to the workspace root"},
                        "old_string": {"type": "string", "description": "Exact text to replace"},
                        "new_string": {"type": "string", "description": "Replacement text"},
                        "replace_all": {"type": "boolean", "description": "Replace every occurrence"}
                    },
                    "required": ["path", "old_string", "new_string"],
                    "additionalProperties": false
                }),
                Safety::SideEffect,
            )
            .writing_path_only(),
        )
    }
}

impl Tool for EditFile {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = required_str(&args, "path")?;
            let old = required_str(&args, "old_string")?;
            let new = required_str(&args, "new_string")?;
            let replace_all = args
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if old.is_empty() {
                return Err(ToolError::invalid("'old_string' must not be empty"));
            }
            if old == new {
                return Err(ToolError::invalid(
                    "'old_string' and 'new_string' are the same",
                ));
            }
            let path = ctx.resolve(arg)?;
            let text = tokio::fs::read_to_string(&path)
                .await
                .map_err(|e| ToolError::io(arg, &e))?;
            let count = text.matches(old).count();
            let updated = match (count, replace_all) {
                (0, _) => {
                    return Err(ToolError::new(
                        ErrorCode::Failed,
                        format!(
                            "'old_string' does not occur in {arg}; read the file and copy the text exactly"
                        ),
                    ));
                }
                (1, _) | (_, true) => text.replace(old, new),
                (n, false) => {
                    return Err(ToolError::failed(format!(
                        "'old_string' occurs {n} times in {arg}; include more context to make it unique or set replace_all"
                    )));
                }
            };
            tokio::fs::write(&path, updated)
                .await
                .map_err(|e| ToolError::io(arg, &e))?;
            Ok(format!(
                "replaced {count} occurrence{} in {}",
                if count == 1 { "" } else { "s" },
                shown(ctx.workspace.root(), &path)
            ))
        })
    }
}
