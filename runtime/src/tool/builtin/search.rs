//! `glob` and `grep`: walk the workspace (honouring `.gitignore`) off the
//! async threads, bounded by [`FileLimits`]. A file a read deny rule covers
//! is left out of the results, and the output says how many were.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::limits::withheld_note;
use super::{FileLimits, MAX_OUTPUT, optional_str, required_str, shown, truncate_middle};
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// Files under `root` in name order, skipping `.git` and what `.gitignore`
/// ignores.
fn walk(root: &Path) -> impl Iterator<Item = PathBuf> {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => Err(ToolError::failed("search crashed")),
        Err(_) => Err(ToolError::failed("search was cancelled")),
    }
}

/// Finds files by glob pattern.
pub struct Glob {
    def: ToolDefinition,
    limits: FileLimits,
}

impl Glob {
    pub fn new(limits: FileLimits) -> Self {
        let def = ToolDefinition::new(
            "glob",
            "Find files whose path (relative to `path`, default the workspace root) \
             matches a glob `pattern` such as `src/**/*.rs`; sorted, .gitignore honoured.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, e.g. **/*.rs"},
                    "path": {"type": "string", "description": "Directory to search (default '.')"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        )
        .taking_path("path");
        Self { def, limits }
    }
}

impl Tool for Glob {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let matcher = globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| ToolError::invalid(format!("bad glob pattern '{pattern}': {e}")))?
                .compile_matcher();
            let arg = optional_str(&args, "path").unwrap_or(".");
            let base = ctx.resolve(arg)?;
            let ctx = ctx.clone();
            let max = self.limits.glob_files;
            blocking(move || {
                if !base.is_dir() {
                    return Err(ToolError::io(
                        &base.display().to_string(),
                        &std::io::ErrorKind::NotFound.into(),
                    ));
                }
                let root = ctx.workspace.root();
                let mut withheld = 0;
                let mut found: Vec<String> = walk(&base)
                    .filter(|p| p.strip_prefix(&base).is_ok_and(|rel| matcher.is_match(rel)))
                    .filter(|p| {
                        let hide = ctx.withholds(p);
                        withheld += usize::from(hide);
                        !hide
                    })
                    .map(|p| shown(root, &p))
                    .collect();
                found.sort();
                let total = found.len();
                found.truncate(max);
                let mut out = found.join("\n");
                if total == 0 {
                    out = format!("no files match '{}'", matcher.glob());
                } else if total > max {
                    out.push_str(&format!(
                        "\n[... {} more files; narrow the pattern or the path]",
                        total - max
                    ));
                }
                if let Some(note) = withheld_note(withheld) {
                    out.push('\n');
                    out.push_str(&note);
                }
                Ok(out)
            })
            .await
        })
    }
}

/// Searches file contents with a regular expression.
pub struct Grep {
    def: ToolDefinition,
    limits: FileLimits,
}

impl Grep {
    pub fn new(limits: FileLimits) -> Self {
        let def = ToolDefinition::new(
            "grep",
            "Search file contents under `path` (default the workspace root) for a regular \
             expression `pattern`; prints `file:line:text`. `glob` limits the files searched.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax)"},
                    "path": {"type": "string", "description": "File or directory to search (default '.')"},
                    "glob": {"type": "string", "description": "Only search files matching this glob"},
                    "case_insensitive": {"type": "boolean"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        )
        .taking_path("path");
        Self { def, limits }
    }
}

impl Tool for Grep {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let pattern = required_str(&args, "pattern")?;
            let regex = regex::RegexBuilder::new(pattern)
                .case_insensitive(
                    args.get("case_insensitive").and_then(Value::as_bool) == Some(true),
                )
                .build()
                .map_err(|e| ToolError::invalid(format!("bad regular expression: {e}")))?;
            let filter = match optional_str(&args, "glob") {
                Some(g) => Some(
                    globset::Glob::new(g)
                        .map_err(|e| ToolError::invalid(format!("bad glob '{g}': {e}")))?
                        .compile_matcher(),
                ),
                None => None,
            };
            let arg = optional_str(&args, "path").unwrap_or(".");
            let base = ctx.resolve(arg)?;
            let shown_arg = arg.to_string();
            let ctx = ctx.clone();
            let limits = self.limits;
            blocking(move || {
                let files: Box<dyn Iterator<Item = PathBuf>> = if base.is_file() {
                    Box::new(std::iter::once(base.clone()))
                } else if base.is_dir() {
                    Box::new(walk(&base))
                } else {
                    return Err(ToolError::io(
                        &shown_arg,
                        &std::io::ErrorKind::NotFound.into(),
                    ));
                };
                let search = Search {
                    regex,
                    filter,
                    limits,
                };
                Ok(search.run(files, &ctx))
            })
            .await
        })
    }
}

/// One `grep` call's search over a set of files.
struct Search {
    regex: regex::Regex,
    filter: Option<globset::GlobMatcher>,
    limits: FileLimits,
}

impl Search {
    fn run(&self, files: impl Iterator<Item = PathBuf>, ctx: &ToolContext) -> String {
        let root = ctx.workspace.root();
        let mut lines = Vec::new();
        let mut total = 0usize;
        let mut withheld = 0usize;
        let mut too_big: Vec<String> = Vec::new();
        for file in files {
            let rel = shown(root, &file);
            if let Some(filter) = &self.filter {
                let name = file.file_name().map(Path::new).unwrap_or(&file);
                if !filter.is_match(&rel) && !filter.is_match(name) {
                    continue;
                }
            }
            if ctx.withholds(&file) {
                withheld += 1;
                continue;
            }
            if std::fs::metadata(&file).is_ok_and(|m| m.len() > self.limits.grep_file_bytes) {
                too_big.push(rel);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue; // binary or unreadable: not searchable text
            };
            for (n, line) in text.lines().enumerate() {
                if self.regex.is_match(line) {
                    total += 1;
                    if lines.len() < self.limits.grep_matches {
                        let line = truncate_middle(line, self.limits.grep_line_bytes);
                        lines.push(format!("{rel}:{}:{line}", n + 1));
                    }
                }
            }
        }
        let mut out = if total == 0 {
            format!("no matches for '{}'", self.regex.as_str())
        } else {
            lines.join("\n")
        };
        if total > self.limits.grep_matches {
            out.push_str(&format!(
                "\n[... {} more matches; narrow the pattern, the path or the glob]",
                total - self.limits.grep_matches
            ));
        }
        if !too_big.is_empty() {
            out.push_str(&format!(
                "\n[{} file{} larger than {} bytes not searched: {}]",
                too_big.len(),
                if too_big.len() == 1 { "" } else { "s" },
                self.limits.grep_file_bytes,
                too_big.join(", ")
            ));
        }
        if let Some(note) = withheld_note(withheld) {
            out.push('\n');
            out.push_str(&note);
        }
        truncate_middle(&out, MAX_OUTPUT)
    }
}
