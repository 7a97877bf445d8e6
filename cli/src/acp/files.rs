//! `read_file`, `write_file` and `edit_file` through the editor
//! (`fs/read_text_file`, `fs/write_text_file`), when the client offers
//! them: the editor's buffers, saved or not, are the truth.
//!
//! Each tool keeps the built-in's definition, so the gates, the rules, the
//! scopes, Plan and the snapshot before a change treat it exactly as the
//! built-in; only where the bytes come from and go to changes. The other
//! tools (`bash`, the searches, `list_dir`) read the disk.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use cadre_runtime::tool::{FileLimits, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// A request a tool makes of the client, sent through the server's loop.
pub struct FsCall {
    /// The session it is for; set once the session has its id.
    pub session: Arc<OnceLock<String>>,
    /// `fs/read_text_file` or `fs/write_text_file`.
    pub method: &'static str,
    /// Its parameters, but `sessionId`.
    pub params: Value,
    /// The client's result, or why there is none.
    pub reply: oneshot::Sender<Result<Value, String>>,
}

/// What the client offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsOffer {
    /// `fs.readTextFile`.
    pub read: bool,
    /// `fs.writeTextFile`.
    pub write: bool,
}

/// One session's way to the client's files.
#[derive(Clone)]
pub struct Client {
    session: Arc<OnceLock<String>>,
    calls: mpsc::UnboundedSender<FsCall>,
}

impl Client {
    /// A client for a session whose id is set later (`session`).
    pub fn new(session: Arc<OnceLock<String>>, calls: mpsc::UnboundedSender<FsCall>) -> Self {
        Self { session, calls }
    }

    async fn call(&self, method: &'static str, params: Value) -> Result<Value, ToolError> {
        let (reply, answer) = oneshot::channel();
        let call = FsCall {
            session: self.session.clone(),
            method,
            params,
            reply,
        };
        self.calls
            .send(call)
            .map_err(|_| ToolError::failed("the editor is gone"))?;
        answer
            .await
            .map_err(|_| ToolError::failed("the editor is gone"))?
            .map_err(|why| ToolError::failed(format!("the editor refused {method}: {why}")))
    }

    async fn read(
        &self,
        path: &Path,
        line: Option<usize>,
        limit: Option<usize>,
    ) -> Result<String, ToolError> {
        let mut params = json!({"path": path});
        if let Some(line) = line {
            params["line"] = json!(line);
        }
        if let Some(limit) = limit {
            params["limit"] = json!(limit);
        }
        let result = self.call("fs/read_text_file", params).await?;
        result
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                ToolError::failed("the editor answered fs/read_text_file without content")
            })
    }

    async fn write(&self, path: &Path, content: &str) -> Result<(), ToolError> {
        self.call(
            "fs/write_text_file",
            json!({"path": path, "content": content}),
        )
        .await
        .map(|_| ())
    }
}

/// Which built-in a [`ClientFile`] stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Edit,
}

/// A file tool whose bytes go through the editor.
pub struct ClientFile {
    /// The built-in: its definition and its preview.
    inner: Arc<dyn Tool>,
    op: Op,
    client: Client,
    limits: FileLimits,
}

/// The file tools to use instead of the built-ins for what the client
/// offers: reading needs `readTextFile`, writing `writeTextFile`, an edit
/// both.
pub fn tools(offer: FsOffer, client: &Client, limits: FileLimits) -> Vec<Arc<dyn Tool>> {
    let builtins = cadre_runtime::tool::builtin_tools_with(limits);
    let wanted = |name: &str| match name {
        "read_file" if offer.read => Some(Op::Read),
        "write_file" if offer.write => Some(Op::Write),
        "edit_file" if offer.read && offer.write => Some(Op::Edit),
        _ => None,
    };
    builtins
        .into_iter()
        .filter_map(|inner| {
            let op = wanted(&inner.definition().name)?;
            Some(Arc::new(ClientFile {
                inner,
                op,
                client: client.clone(),
                limits,
            }) as Arc<dyn Tool>)
        })
        .collect()
}

impl Tool for ClientFile {
    fn definition(&self) -> &ToolDefinition {
        self.inner.definition()
    }

    fn preview(&self, args: &Value, root: &Path) -> Option<String> {
        self.inner.preview(args, root)
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let text = |name: &str| {
                args.get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| ToolError::invalid(format!("missing string argument '{name}'")))
            };
            let arg = text("path")?;
            let path = ctx.resolve(arg)?;
            match self.op {
                Op::Read => {
                    let number = |name: &str| {
                        args.get(name)
                            .and_then(Value::as_u64)
                            .and_then(|n| usize::try_from(n).ok())
                    };
                    let first = number("offset").unwrap_or(1).max(1);
                    let limit = number("limit").unwrap_or(self.limits.read_lines).max(1);
                    // One line more than asked says whether the file goes on.
                    let content = self
                        .client
                        .read(&path, Some(first), Some(limit + 1))
                        .await?;
                    Ok(excerpt(&content, first, limit, self.limits.read_bytes))
                }
                Op::Write => {
                    let content = text("content")?;
                    refuse_hard_links(&path, arg)?;
                    self.client.write(&path, content).await?;
                    Ok(format!("wrote {} bytes to {arg}", content.len()))
                }
                Op::Edit => {
                    let (old, new) = (text("old_string")?, text("new_string")?);
                    let all = args
                        .get("replace_all")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    cadre_runtime::tool::check_edit(old, new)?;
                    refuse_hard_links(&path, arg)?;
                    let current = self.client.read(&path, None, None).await?;
                    if current.len() as u64 > self.limits.edit_file_bytes {
                        return Err(ToolError::failed(format!(
                            "{arg} is {} bytes, more than the {} bytes edit_file reads; change it \
                             another way",
                            current.len(),
                            self.limits.edit_file_bytes
                        )));
                    }
                    let (updated, count) =
                        cadre_runtime::tool::replace_exact(&current, arg, old, new, all)?;
                    self.client.write(&path, &updated).await?;
                    Ok(format!(
                        "replaced {count} occurrence{} in {arg}",
                        if count == 1 { "" } else { "s" }
                    ))
                }
            }
        })
    }
}

/// A file with another name elsewhere would be changed there too: refused,
/// as the built-ins refuse it.
fn refuse_hard_links(path: &Path, arg: &str) -> Result<(), ToolError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(ToolError::failed(format!(
            "{arg} has {} hard links; writing it would change the other names too",
            meta.nlink()
        ))),
        _ => Ok(()),
    }
}

/// What the model reads of lines `first..` the client sent (at most
/// `limit` of them, at most `cap` bytes), with a note when the file goes
/// on.
pub fn excerpt(content: &str, first: usize, limit: usize, cap: usize) -> String {
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    if lines.is_empty() {
        return if first > 1 {
            format!("[offset {first} is past the end of the file]")
        } else {
            "(empty file)".to_string()
        };
    }
    let mut text = String::new();
    let mut shown = 0;
    let mut cut = false;
    for line in lines.iter().take(limit) {
        if text.len() + line.len() > cap {
            cut = true;
            break;
        }
        text.push_str(line);
        shown += 1;
    }
    let last = first + shown.max(1) - 1;
    let note = if cut && shown == 0 {
        let head = lines[0];
        let mut end = cap.min(head.len());
        while !head.is_char_boundary(end) {
            end -= 1;
        }
        text.push_str(&head[..end]);
        Some(format!(
            "[line {first} is longer than {cap} bytes: showing its first {end} bytes; the next \
             line is offset={}]",
            first + 1
        ))
    } else if cut {
        Some(format!(
            "[cut at {cap} bytes: showing lines {first}-{last}; read on with offset={}]",
            last + 1
        ))
    } else if lines.len() > limit {
        Some(format!(
            "[showing lines {first}-{last}; the file goes on: read on with offset={}]",
            last + 1
        ))
    } else {
        None
    };
    if let Some(note) = note {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    text
}
