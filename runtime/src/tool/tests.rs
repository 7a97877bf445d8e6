//! The tool contract against real temporary directories: the registry, the
//! runner's entry point, workspace confinement of every file tool, the
//! built-in tools' behaviour, and the two mode gates.
//!
//! Each behaviour has one `check` helper; the tests are tables fed to it and
//! compared as a whole, so one diff shows every case that went wrong. This
//! file holds the fixtures: fake tools, a temporary workspace with a runner
//! ([`Env`]), and the [`Got`] form outcomes are compared in.
//!
//! # Layout
//! - `registering`: registration order, duplicate names, bad schemas, allow-lists.
//! - `running`: the runner's refusals, allow-list, panics and timeouts.
//! - `confinement`: every file tool against `..`, absolute paths and symlinks.
//! - `behaviour`: what each built-in tool does.
//! - `gating`: the definition gate and the execution gate in Plan mode.
//! - `paths`: rules on real paths through the runner (symlinks, hard links,
//!   withheld search results), and a property over paths through links.
//! - `bounds`: the file and search tools' limits.
//! - `snapshotting`: the snapshot hook before calls that may change files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;
use crate::message::ToolCall;
use crate::mode::Mode;
use crate::permission::Posture;

mod behaviour;
mod bounds;
mod confinement;
mod gating;
mod paths;
mod registering;
mod running;
mod snapshotting;

/// What a fake tool does when it runs.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// Returns its arguments as JSON text.
    Echo,
    /// Sleeps (on tokio's clock), then answers `woke`.
    Sleep(Duration),
    /// Panics with a `&'static str` payload.
    Panic,
    /// Panics with a formatted `String` payload.
    PanicFormatted(u32),
}

/// A tool whose behaviour a test chooses.
struct Fake {
    def: ToolDefinition,
    act: Act,
}

impl Fake {
    fn new(name: &str, act: Act) -> Self {
        Self {
            def: ToolDefinition::new(
                name,
                "a test tool",
                json!({"type": "object"}),
                Safety::ReadOnly,
            ),
            act,
        }
    }

    fn with(mut self, edit: impl FnOnce(ToolDefinition) -> ToolDefinition) -> Self {
        self.def = edit(self.def);
        self
    }

    fn arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for Fake {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.act {
                Act::Echo => Ok(args.to_string()),
                Act::Sleep(d) => {
                    tokio::time::sleep(d).await;
                    Ok("woke".to_string())
                }
                Act::Panic => panic!("static boom"),
                Act::PanicFormatted(n) => panic!("formatted boom {n}"),
            }
        })
    }
}

fn registry_of(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool).unwrap();
    }
    registry
}

const BUILTINS: [&str; 16] = [
    "read_file",
    "list_dir",
    "glob",
    "grep",
    "write_file",
    "edit_file",
    "bash",
    "process",
    "todo_write",
    "agent",
    "workflow",
    "exit_plan_mode",
    "enter_plan_mode",
    "create_goal",
    "get_goal",
    "update_goal",
];

/// A temporary root holding `ws/` (the workspace), `outside/` (a sibling the
/// tools must not reach) and `session/` (the session directory), with a
/// runner over the built-ins and a few fakes.
struct Env {
    root: TempDir,
    ctx: ToolContext,
    runner: ToolRunner,
}

impl Env {
    fn new(mode: Mode) -> Self {
        let root = tempfile::tempdir().unwrap();
        for dir in ["ws", "outside", "session"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        let session = root.path().join("session");
        let ctx = ToolContext {
            workspace: Workspace::new(root.path().join("ws")).unwrap(),
            authority: crate::agent::LiveAuthority::root(mode, Posture::Suggest),
            sandbox: Arc::default(),
            plan_file: Some(session.join("artifacts").join("plan.md")),
            session_dir: session,
            allowed_tools: None,
            authorizer: None,
            file_scopes: Vec::new(),
            agents: None,
            plans: None,
            workflows: None,
            goals: None,
            rules: None,
            snapshots: None,
            processes: None,
            hooks: None,
        };
        let mut registry = ToolRegistry::with_builtins();
        for fake in [
            Fake::new("echo", Act::Echo),
            Fake::new("sys", Act::Echo).with(ToolDefinition::as_system),
            Fake::new("panicker", Act::Panic),
            Fake::new("panicker_fmt", Act::PanicFormatted(7)),
        ] {
            registry.register(fake.arc()).unwrap();
        }
        let runner = ToolRunner::new(Arc::new(registry), Duration::from_secs(30));
        Self { root, ctx, runner }
    }

    fn allow(mut self, names: &[&str]) -> Self {
        self.ctx.allowed_tools = Some(names.iter().map(|n| n.to_string()).collect());
        self
    }

    fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    fn plan_file(&self) -> PathBuf {
        self.session().join("artifacts").join("plan.md")
    }

    fn session(&self) -> PathBuf {
        self.root.path().join("session")
    }

    /// Writes a workspace file, creating its directories.
    fn seed(&self, rel: &str, content: &str) {
        let path = self.ws().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.ws().join(rel)).ok()
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        self.call_raw(name, &args.to_string()).await
    }

    async fn call_raw(&self, name: &str, raw: &str) -> ToolOutcome {
        let call = ToolCall {
            id: "call-1".into(),
            name: name.into(),
            arguments: raw.into(),
        };
        self.runner.execute(&call, &self.ctx).await
    }

    /// Everything under the root, relative to it: files with their content,
    /// directories with a trailing `/`, symlinks with their target.
    fn tree(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.root.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path
                    .strip_prefix(self.root.path())
                    .unwrap()
                    .display()
                    .to_string();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).unwrap();
                    out.insert(rel, format!("-> {}", target.display()));
                } else if meta.is_dir() {
                    out.insert(format!("{rel}/"), String::new());
                    stack.push(path);
                } else {
                    out.insert(rel, std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        out
    }
}

/// The entries of `after` that differ from `before` (added, changed or gone).
fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut keys: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// An outcome as the tests compare it: the output, or the code and a
/// fragment of the message.
type Got = Result<String, (ErrorCode, String)>;

fn ok(output: &str) -> Got {
    Ok(output.to_string())
}

fn err(code: ErrorCode, fragment: &str) -> Got {
    Err((code, fragment.to_string()))
}

/// Reduces an outcome to what `expected` pins: an error message that
/// contains the expected fragment becomes that fragment; any other keeps its
/// whole text, so a mismatch shows the message.
fn seen(outcome: ToolOutcome, expected: &Got) -> Got {
    match (outcome, expected) {
        (Err(e), Err((_, fragment))) if e.message.contains(fragment.as_str()) => {
            Err((e.code, fragment.clone()))
        }
        (Err(e), _) => Err((e.code, e.message)),
        (Ok(output), _) => Ok(output),
    }
}
