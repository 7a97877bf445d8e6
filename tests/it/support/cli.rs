//! Running the `cadre` binary: a clean environment, stream-json checked
//! against the schema in `docs/stream-json.md`.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::hermetic::Hermetic;
use tempfile::TempDir;

/// What a finished `cadre` process left.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cadre` with `args`, in a clean environment.
pub async fn cadre(args: &[&str]) -> Output {
    cadre_with(args, &[]).await
}

/// Runs `cadre` with `args`, in a clean environment but for `vars`.
pub async fn cadre_with(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(args)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("CADRE_HOME")
        .env_remove("RUST_LOG")
        .envs(vars.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run cadre");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The schema in `docs/stream-json.md`, compiled once.
fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/stream-json.md"))
                .expect("docs/stream-json.md");
        let after = doc
            .split("## Schema")
            .nth(1)
            .expect("a '## Schema' section");
        let block = after
            .split("```json")
            .nth(1)
            .expect("a json block")
            .split("```")
            .next()
            .expect("block end");
        let schema: Value = serde_json::from_str(block).expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    })
}

/// Parses stream-json output, checking every line against the schema and
/// the first and last line against the contract.
pub fn events(out: &Output) -> Vec<Value> {
    let events = schema_checked(out);
    let first = events.first().expect("no output");
    assert_eq!(first["type"], "session.started");
    assert_eq!(first["version"], 1);
    let last = events.last().expect("no output");
    assert_eq!(last["type"], "session.completed");
    assert_eq!(
        last["exit_code"], out.code,
        "session.completed disagrees with the exit code"
    );
    events
}

/// Parses `cadre workflow run|resume`'s stream-json output: every line
/// against the schema, `workflow.started` first, `workflow.completed` last.
pub fn workflow_events(out: &Output) -> Vec<Value> {
    let events = schema_checked(out);
    assert_eq!(
        events.first().expect("no output")["type"],
        "workflow.started"
    );
    assert_eq!(
        events.last().expect("no output")["type"],
        "workflow.completed"
    );
    events
}

fn schema_checked(out: &Output) -> Vec<Value> {
    let mut events = Vec::new();
    for (n, line) in out.stdout.lines().enumerate() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {}: not JSON ({e}): {line}", n + 1));
        let problems: Vec<String> = schema()
            .iter_errors(&event)
            .map(|e| e.to_string())
            .collect();
        assert!(
            problems.is_empty(),
            "line {} does not validate: {problems:?}\n{line}",
            n + 1
        );
        events.push(event);
    }
    events
}

pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

pub fn dirs() -> (TempDir, TempDir) {
    (
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
    )
}

pub fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `cadre exec` in fresh `ws`/`data` directories with stream-json output:
/// `model` is the mock server's URL (else the built-in demo or `--script`
/// in `flags`), `flags` come before the prompt.
pub async fn exec_json(
    model: Option<&str>,
    (ws, data): (&TempDir, &TempDir),
    flags: &[&str],
    prompt: &str,
) -> Output {
    let mut args = vec!["exec"];
    if let Some(url) = model {
        args.extend(["--base-url", url, "--model", "m"]);
    }
    args.extend(["--workspace", s(ws.path()), "--data-dir", s(data.path())]);
    args.extend(flags);
    args.extend(["--output-format", "stream-json", prompt]);
    cadre(&args).await
}

/// `cadre` with `args` as a running process whose stdout is piped, in a
/// clean environment (for tests that watch it or kill it mid-run).
pub fn spawn_cadre(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(args)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("CADRE_HOME")
        .env_remove("RUST_LOG")
        // With no prompt and a stdin that is not a terminal, exec reads
        // the prompt from it: a run that has none gets an empty one.
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre")
}

/// A session's lease held as another process would hold it: this test
/// process, alive, under a token of its own; released on drop.
pub struct HeldLease {
    store: cadre::runtime::store::Store,
    owner: cadre::runtime::store::LeaseOwner,
    session_id: String,
}

impl HeldLease {
    /// Takes `session_id`'s lease in the store under `data_dir`.
    pub fn take(data_dir: &Path, session_id: &str) -> Self {
        let path = cadre::runtime::store::store_path(data_dir);
        let mut store = cadre::runtime::store::Store::open(&path).expect("open the store");
        let owner = cadre::runtime::store::LeaseOwner::this_process();
        store.acquire_lease(session_id, &owner).expect("the lease");
        Self {
            store,
            owner,
            session_id: session_id.to_string(),
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        let _ = self.store.release_lease(&self.session_id, &self.owner);
    }
}
