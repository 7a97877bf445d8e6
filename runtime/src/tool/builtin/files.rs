//! `read_file`, `list_dir`, `write_file`, `edit_file`.
//!
//! `read_file` and `edit_file` are bounded by [`FileLimits`]; `list_dir`
//! leaves out what a read deny rule covers; `write_file` and `edit_file`
//! refuse a file with more than one hard link.

use std::path::Path;

use serde_json::{Value, json};

use super::excerpt::{Small, Stop, excerpt, read_small};
use super::limits::withheld_note;
use super::{FileLimits, optional_str, required_str, shown};
use crate::tool::definition::{
    ErrorCode, Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture,
};

/// Reads a text file, optionally a range of its lines.
pub struct ReadFile {
    def: ToolDefinition,
    limits: FileLimits,
}

impl ReadFile {
    pub fn new(limits: FileLimits) -> Self {
        let def = ToolDefinition::new(
            "read_file",
            format!(
                "Read a UTF-8 text file in the workspace. `offset` (1-based line, default 1) \
                 and `limit` (number of lines, default {}) select a range; at most {} KiB \
                 are returned per call, and the output ends with a note saying how to read \
                 on when the file goes on.",
                limits.read_lines,
                limits.read_bytes / 1024
            ),
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
        )
        .taking_path("path");
        Self { def, limits }
    }
}

impl Tool for ReadFile {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = required_str(&args, "path")?.to_string();
            let path = ctx.resolve(&arg)?;
            let number = |name: &str| {
                args.get(name)
                    .and_then(Value::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
            };
            let first = number("offset").unwrap_or(1).max(1);
            let limit = number("limit").unwrap_or(self.limits.read_lines).max(1);
            let cap = self.limits.read_bytes;
            let shown_arg = arg.clone();
            let read = match read_small(&path, first, limit, cap) {
                Ok(Small::Read(read)) => Ok(read),
                Ok(Small::Elsewhere(file)) => {
                    tokio::task::spawn_blocking(move || excerpt(&path, file, first, limit, cap))
                        .await
                        .map_err(|_| ToolError::failed("reading the file was interrupted"))?
                }
                Err(error) => Err(error),
            }
            .map_err(|e| ToolError::io(&shown_arg, &e))?;
            let empty = read.text.is_empty() && matches!(read.stop, Stop::End { total: 0 });
            let text = read
                .render(cap)
                .map_err(|why| ToolError::failed(format!("{arg}: {why}")))?;
            Ok(if empty {
                "(empty file)".to_string()
            } else {
                text
            })
        })
    }
}

/// Lists a directory, directories marked with a trailing `/`.
pub struct ListDir {
    def: ToolDefinition,
    limits: FileLimits,
}

impl ListDir {
    pub fn new(limits: FileLimits) -> Self {
        let def = ToolDefinition::new(
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
        )
        .taking_path("path");
        Self { def, limits }
    }
}

impl Tool for ListDir {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = optional_str(&args, "path").unwrap_or(".").to_string();
            let path = ctx.resolve(&arg)?;
            let max = self.limits.list_entries;
            // The first entries are read where the call runs: a small
            // directory takes microseconds, less than the trip to the
            // blocking pool and back. A larger one is read on from there.
            let mut entries = std::fs::read_dir(&path).map_err(|e| ToolError::io(&arg, &e))?;
            let mut listing = Listing::default();
            if !listing.read(&mut entries, &arg, ctx, Some(INLINE_ENTRIES))? {
                let ctx = ctx.clone();
                let shown = arg.clone();
                listing = tokio::task::spawn_blocking(move || {
                    listing.read(&mut entries, &shown, &ctx, None)?;
                    Ok::<_, ToolError>(listing)
                })
                .await
                .map_err(|_| ToolError::failed("listing the directory was interrupted"))??;
            }
            Ok(listing.render(max))
        })
    }
}

/// How many entries `list_dir` reads where the call runs.
const INLINE_ENTRIES: usize = 256;

/// A directory's entries as read so far.
#[derive(Default)]
struct Listing {
    names: Vec<String>,
    withheld: usize,
}

impl Listing {
    /// Reads entries, at most `most` of them when given; `true` when the
    /// directory has no more.
    fn read(
        &mut self,
        entries: &mut std::fs::ReadDir,
        arg: &str,
        ctx: &ToolContext,
        most: Option<usize>,
    ) -> Result<bool, ToolError> {
        for _ in 0..most.unwrap_or(usize::MAX) {
            let Some(entry) = entries.next() else {
                return Ok(true);
            };
            let entry = entry.map_err(|e| ToolError::io(arg, &e))?;
            if ctx.withholds(&entry.path()) {
                self.withheld += 1;
                continue;
            }
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            self.names.push(name);
        }
        Ok(false)
    }

    /// The listing for the model: sorted, at most `max` entries, with notes.
    fn render(mut self, max: usize) -> String {
        self.names.sort();
        let total = self.names.len();
        let mut out = if total == 0 {
            "(empty directory)".to_string()
        } else {
            self.names.truncate(max);
            self.names.join("\n")
        };
        if total > max {
            out.push_str(&format!(
                "\n[... {} more entries; list a subdirectory or use glob to narrow it]",
                total - max
            ));
        }
        if let Some(note) = withheld_note(self.withheld) {
            out.push('\n');
            out.push_str(&note);
        }
        out
    }
}

/// Refuses to write a file that has other names: a hard link made by a
/// command could lead anywhere, including outside the workspace, and
/// writing through it would change the file under every name.
async fn refuse_hard_links(path: &Path, arg: &str) -> Result<(), ToolError> {
    use std::os::unix::fs::MetadataExt;
    match tokio::fs::symlink_metadata(path).await {
        Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "'{arg}' has {} hard links: writing it would change the same file under its \
                 other names, which may lie outside the workspace or under a protected or \
                 denied path; it is refused. Write a new file instead",
                meta.nlink()
            ),
        )),
        _ => Ok(()),
    }
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

    fn preview(&self, args: &Value, root: &std::path::Path) -> Option<String> {
        let path = args.get("path").and_then(Value::as_str)?;
        let content = args.get("content").and_then(Value::as_str)?;
        crate::tool::preview::write(&root.join(path), path, content)
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arg = required_str(&args, "path")?;
            let content = required_str(&args, "content")?;
            let path = ctx.resolve(arg)?;
            refuse_hard_links(&path, arg).await?;
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
pub struct EditFile {
    def: ToolDefinition,
    limits: FileLimits,
}

impl EditFile {
    pub fn new(limits: FileLimits) -> Self {
        let def = ToolDefinition::new(
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
            .writing_path_only();
        Self { def, limits }
    }
}

impl Tool for EditFile {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn preview(&self, args: &Value, root: &std::path::Path) -> Option<String> {
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let (path, old, new) = (text("path")?, text("old_string")?, text("new_string")?);
        let all = args
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        crate::tool::preview::edit(&root.join(path), path, old, new, all)
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
            check_edit(old, new)?;
            let path = ctx.resolve(arg)?;
            refuse_hard_links(&path, arg).await?;
            let size = tokio::fs::metadata(&path)
                .await
                .map_err(|e| ToolError::io(arg, &e))?
                .len();
            if size > self.limits.edit_file_bytes {
                return Err(ToolError::failed(format!(
                    "{arg} is {size} bytes, more than the {} bytes edit_file reads; change it \
                     another way",
                    self.limits.edit_file_bytes
                )));
            }
            let text = tokio::fs::read_to_string(&path)
                .await
                .map_err(|e| ToolError::io(arg, &e))?;
            let (updated, count) = replace_exact(&text, arg, old, new, replace_all)?;
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

/// Refuses an edit that cannot change anything: an empty `old`, or `new`
/// the same as `old`.
pub fn check_edit(old: &str, new: &str) -> Result<(), ToolError> {
    if old.is_empty() {
        return Err(ToolError::invalid("'old_string' must not be empty"));
    }
    if old == new {
        return Err(ToolError::invalid(
            "'old_string' and 'new_string' are the same",
        ));
    }
    Ok(())
}

/// `edit_file`'s replacement in `text` (the file `arg`): `old` must occur
/// exactly once unless `replace_all`. Returns the new text and how many
/// occurrences were replaced.
pub fn replace_exact(
    text: &str,
    arg: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), ToolError> {
    let count = text.matches(old).count();
    match (count, replace_all) {
        (0, _) => Err(ToolError::new(
            ErrorCode::Failed,
            format!(
                "'old_string' does not occur in {arg}; read the file and copy the text exactly"
            ),
        )),
        (1, _) | (_, true) => Ok((text.replace(old, new), count)),
        (n, false) => Err(ToolError::failed(format!(
            "'old_string' occurs {n} times in {arg}; include more context to make it unique or set replace_all"
        ))),
    }
}
