//! Scale-out on one machine (D1): `cadre node` processes on loopback, a
//! coordinator (`cadre workflow run --nodes`, or this process through the
//! library), the mock model server in this process. Every node is a child
//! of the test, killed when dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use cadre::actors::EventSink;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::{ApprovalDecision, Event};
use cadre::runtime::store::RunStatus;
use cadre::workflows::cluster::server::ServerConfig;
use cadre::workflows::cluster::{Cluster, CoordinatorConfig, HEARTBEAT_TIMEOUT};
use cadre::workflows::diagnostic::Source;
use cadre::workflows::engine::{Launch, RunSettings, start_on};
use cadre::workflows::validate::{Options, validate};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::support::PATIENCE;
use crate::support::cli::{Output, s, workflow_events};
use crate::support::hermetic::Hermetic;
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};
use crate::workflows::{Harness, answered, prompt_of};

mod flood;

pub(crate) const SECRET: &str = "loopback-test-secret";

/// A free loopback port (taken and given back at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A `cadre node` child process.
pub(crate) struct Node {
    name: String,
    pub(crate) addr: String,
    pub(crate) child: Child,
    /// Its stderr lines as they come.
    stderr: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Node {
    /// Starts a node serving `workspace` with `slots`, on the mock model,
    /// and waits until it listens.
    pub(crate) async fn start(
        name: &str,
        workspace: &Path,
        slots: u32,
        mock: &MockServer,
        secret: &str,
    ) -> Node {
        Node::serving(name, s(workspace), slots, mock, secret, &[]).await
    }

    /// [`Node::start`] with more flags for `cadre node`.
    pub(crate) async fn start_with(
        name: &str,
        workspace: &Path,
        slots: u32,
        mock: &MockServer,
        secret: &str,
        flags: &[&str],
    ) -> Node {
        Node::serving(name, s(workspace), slots, mock, secret, flags).await
    }

    /// Starts a node with `--serve serve` (a path, or `COORD=LOCAL`). The
    /// port is free when chosen; should another process take it before the
    /// node listens, the node exits and is started again on another.
    async fn serving(
        name: &str,
        serve: &str,
        slots: u32,
        mock: &MockServer,
        secret: &str,
        flags: &[&str],
    ) -> Node {
        for _ in 0..3 {
            if let Some(node) = Node::try_start(name, serve, slots, mock, secret, flags).await {
                return node;
            }
        }
        panic!("node {name} could not listen on three free ports");
    }

    async fn try_start(
        name: &str,
        serve: &str,
        slots: u32,
        mock: &MockServer,
        secret: &str,
        flags: &[&str],
    ) -> Option<Node> {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_cadre"))
            .hermetic()
            .args([
                "node",
                "--listen",
                &addr,
                "--name",
                name,
                "--serve",
                serve,
                "--slots",
                &slots.to_string(),
                "--base-url",
                &mock.url,
                "--model",
                "m",
                "--max-retries",
                "1",
            ])
            .args(flags)
            .env("CADRE_CLUSTER_SECRET", secret)
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("CADRE_HOME")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn cadre node");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (tx, stderr) = mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send(line);
            }
        });
        let first = tokio::time::timeout(PATIENCE, stdout.next_line())
            .await
            .expect("the node started in time")
            .expect("stdout")?;
        assert!(first.contains("listening on"), "{first}");
        Some(Node {
            name: name.to_string(),
            addr,
            child,
            stderr,
            seen: Vec::new(),
        })
    }

    /// Waits for a stderr line containing `needle`.
    pub(crate) async fn wait_for(&mut self, needle: &str) -> String {
        let found = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = self.stderr.recv().await {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("node {} never said '{needle}': {:#?}", self.name, self.seen),
        }
    }

    /// Every stderr line so far.
    pub(crate) fn said(&mut self) -> Vec<String> {
        while let Ok(line) = self.stderr.try_recv() {
            self.seen.push(line);
        }
        self.seen.clone()
    }
}

/// A fan-out of `items` items, each answering its own prompt.
fn fan_out(items: usize, max_parallel: u32, retries: u32) -> String {
    let list: Vec<String> = (0..items).map(|i| format!("\"i{i}\"")).collect();
    format!(
        "[workflow]\nname = \"spread\"\nmax_parallel = {max_parallel}\n\n[[steps]]\nname = \"each\"\nretries = {retries}\nfor_each = [{}]\nprompt = \"item {{{{item}}}}\"\n",
        list.join(", ")
    )
}

/// `cadre workflow run` of `text` on `nodes`, with `flags`, as a child.
pub(crate) fn coordinator(
    text: &str,
    dirs: &(TempDir, TempDir),
    mock: &MockServer,
    nodes: &[&Node],
    secret: &str,
    flags: &[&str],
) -> Child {
    let file = dirs.1.path().join("wf.toml");
    std::fs::write(&file, text).expect("workflow file");
    let nodes: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    let nodes = nodes.join(",");
    let mut args = vec![
        "workflow",
        "run",
        s(&file),
        "--workspace",
        s(dirs.0.path()),
        "--data-dir",
        s(dirs.1.path()),
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--output-format",
        "stream-json",
    ];
    if !nodes.is_empty() {
        args.extend(["--nodes", &nodes]);
    }
    args.extend(flags);
    Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(&args)
        .env("CADRE_CLUSTER_SECRET", secret)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("CADRE_HOME")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre workflow run")
}

pub(crate) async fn finish(mut child: Child) -> Output {
    use tokio::io::AsyncReadExt;
    type Pipe = Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>;
    // Read as it runs, so a run that hangs still says what it printed.
    let read = |pipe: Pipe| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let done = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                into.lock()
                    .expect("pipe buffer")
                    .extend_from_slice(&chunk[..n]);
            }
        });
        (seen, done)
    };
    let (stdout, out_done) = read(child.stdout.take().map(|p| Box::new(p) as _));
    let (stderr, err_done) = read(child.stderr.take().map(|p| Box::new(p) as _));
    let text = |seen: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&seen.lock().expect("pipe buffer")).into_owned()
    };
    let status = match tokio::time::timeout(PATIENCE * 3, child.wait()).await {
        Ok(status) => status.expect("the run's status"),
        Err(_) => {
            let _ = child.start_kill();
            panic!(
                "the run did not end within {:?}\n[stderr]\n{}\n[stdout]\n{}",
                PATIENCE * 3,
                text(&stderr),
                text(&stdout)
            );
        }
    };
    // The pipes reach their end with the process.
    let _ = tokio::time::timeout(PATIENCE, async {
        let _ = out_done.await;
        let _ = err_done.await;
    })
    .await;
    Output {
        code: status.code().unwrap_or(-1),
        stdout: text(&stdout),
        stderr: text(&stderr),
    }
}

pub(crate) fn dirs() -> (TempDir, TempDir) {
    let ws = TempDir::new().expect("workspace");
    let data = TempDir::new().expect("data");
    // The nodes serve the workspace as this machine resolves it.
    (ws, data)
}

/// `step.state` events of `state`, by item.
fn states<'a>(events: &'a [Value], state: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "step.state" && e["state"] == state)
        .collect()
}

/// How many instances reached `state` on each node (`here` for none).
fn per_node(events: &[Value], state: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for e in states(events, state) {
        let node = e["node"].as_str().unwrap_or("here").to_string();
        *counts.entry(node).or_insert(0) += 1;
    }
    counts
}

fn answer_items(mock: &MockServer) {
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        prompt
            .strip_prefix("item ")
            .map(|item| Reply::sse(&text_chunks(&format!("done {item}"))))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_of_60_steps_spreads_over_the_nodes() {
    let mock = MockServer::start().await;
    answer_items(&mock);
    let dirs = dirs();
    let a = Node::start("a", dirs.0.path(), 4, &mock, SECRET).await;
    let b = Node::start("b", dirs.0.path(), 4, &mock, SECRET).await;
    let run = coordinator(
        &fan_out(60, 8, 0),
        &dirs,
        &mock,
        &[&a, &b],
        SECRET,
        &["--posture", "bypass"],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = workflow_events(&out);
    let counts = per_node(&events, "finalized");
    eprintln!("steps per node: {counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 60, "{counts:?}");
    assert!(
        !counts.contains_key("here"),
        "every step ran on a node: {counts:?}"
    );
    assert!(
        counts["a"] >= 10 && counts["b"] >= 10,
        "spread over both: {counts:?}"
    );
    assert!(out.stderr.contains("node a joined") && out.stderr.contains("node b joined"));
}

/// Answers items; every item's first request waits at the gate, and each
/// one that arrives is announced.
fn gated_items(
    mock: &MockServer,
) -> (
    tokio::sync::watch::Sender<bool>,
    mpsc::UnboundedReceiver<String>,
) {
    let (open, gate) = tokio::sync::watch::channel(false);
    let (arrived, arrivals) = mpsc::unbounded_channel();
    let first_seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        let item = prompt.strip_prefix("item ")?.to_string();
        let reply = Reply::sse(&text_chunks(&format!("done {item}")));
        let first = first_seen.lock().expect("lock").insert(item.clone());
        Some(if first && answered(request) == 0 {
            let _ = arrived.send(item);
            Reply::Gate(gate.clone(), Box::new(reply))
        } else {
            reply
        })
    });
    (open, arrivals)
}

/// Runs six items over nodes a and b (two slots each, one retry), does
/// `fail` to node a once all four slots are running a model request, and
/// checks that a's steps failed with `reason` and were finalized on b,
/// every item once.
async fn lose_node_a(fail: impl AsyncFnOnce(&mut Node), reason: &str, flags: &[&str]) {
    let mock = MockServer::start().await;
    let (open, mut arrivals) = gated_items(&mock);
    let dirs = dirs();
    let mut a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let b = Node::start("b", dirs.0.path(), 2, &mock, SECRET).await;
    let mut all = vec!["--posture", "bypass"];
    all.extend(flags);
    let run = coordinator(&fan_out(6, 4, 1), &dirs, &mock, &[&a, &b], SECRET, &all);
    for _ in 0..4 {
        tokio::time::timeout(PATIENCE, arrivals.recv())
            .await
            .expect("four requests in time")
            .expect("a request");
    }
    fail(&mut a).await;
    open.send_replace(true);
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = workflow_events(&out);
    let lost: Vec<&Value> = states(&events, "pending")
        .into_iter()
        .filter(|e| e["reason"].as_str().is_some_and(|r| r.contains(reason)))
        .collect();
    assert_eq!(lost.len(), 2, "a's two steps were retried: {events:#?}");
    let mut finalized = BTreeMap::new();
    for e in states(&events, "finalized") {
        *finalized
            .entry(e["index"].as_u64().expect("index"))
            .or_insert(0) += 1;
    }
    assert_eq!(finalized.len(), 6, "{finalized:?}");
    assert!(
        finalized.values().all(|n| *n == 1),
        "never twice: {finalized:?}"
    );
    for e in &lost {
        let last = states(&events, "finalized")
            .into_iter()
            .find(|f| f["index"] == e["index"])
            .expect("finalized");
        assert_eq!(last["node"], "b", "{last}");
    }
    assert!(out.stderr.contains("node a lost"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_node_mid_run_fails_its_steps_and_retries_them_elsewhere() {
    let kill = async |a: &mut Node| {
        a.child.start_kill().expect("SIGKILL node a");
        let _ = a.child.wait().await;
    };
    lose_node_a(kill, "node a was lost: its connection closed", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_answering_is_lost_after_the_heartbeat_timeout() {
    let stop = async |a: &mut Node| {
        let pid = a.child.id().expect("pid");
        let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    };
    lose_node_a(
        stop,
        "node a was lost: no heartbeat within 2000 ms",
        &["--node-timeout", "2000"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_wrong_secret_is_refused() {
    let mock = MockServer::start().await;
    answer_items(&mock);
    let dirs = dirs();
    let mut stranger = Node::start("stranger", dirs.0.path(), 2, &mock, "another-secret").await;
    let run = coordinator(
        &fan_out(2, 2, 0),
        &dirs,
        &mock,
        &[&stranger],
        SECRET,
        &["--posture", "bypass"],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    stranger.wait_for("refused a peer").await;
    assert!(
        !stranger.said().iter().any(|l| l.contains("started agent")),
        "{:#?}",
        stranger.said()
    );
    assert!(
        out.stderr.contains("does not share the cluster secret"),
        "{}",
        out.stderr
    );
    let events = workflow_events(&out);
    assert_eq!(
        per_node(&events, "finalized"),
        BTreeMap::from([("here".to_string(), 2)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_to_start_without_a_secret() {
    let out =
        crate::support::cli::cadre(&["node", "--serve", "/tmp", "--listen", "127.0.0.1:0"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("no cluster secret"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_callers_remote_steps_cannot_write() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        prompt_of(request).strip_prefix("item ")?;
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "out.txt", "content": "written"}),
            ))
        } else {
            Reply::sse(&text_chunks("tried"))
        })
    });
    let dirs = dirs();
    let a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let run = coordinator(
        &fan_out(1, 1, 0),
        &dirs,
        &mock,
        &[&a],
        SECRET,
        &["--posture", "never"],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = workflow_events(&out);
    assert_eq!(
        per_node(&events, "finalized"),
        BTreeMap::from([("a".to_string(), 1)])
    );
    assert!(
        !dirs.0.path().join("out.txt").exists(),
        "the remote step wrote"
    );
    let denied: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "permission.decision" && e["tool"] == "write_file")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert_eq!(denied[0]["verdict"], "deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_from_a_remote_step_reach_the_caller() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        prompt_of(request).strip_prefix("item ")?;
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "approved.txt", "content": "yes"}),
            ))
        } else {
            Reply::sse(&text_chunks("wrote it"))
        })
    });
    let h = Harness::new(&mock).await;
    let node = Node::start("a", h.workspace.path(), 1, &mock, SECRET).await;
    let joined = Cluster::join(CoordinatorConfig {
        server: ServerConfig {
            name: "test-coordinator".into(),
            secret: SECRET.into(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            limits: Default::default(),
        },
        nodes: vec![node.addr.clone()],
        local_slots: 0,
        join_timeout: PATIENCE,
        timeout: HEARTBEAT_TIMEOUT,
    })
    .await
    .expect("joined");
    assert_eq!(joined.cluster.nodes().len(), 1, "node a joined");
    let mut options = h.options(Posture::Suggest);
    options.interactive = true;
    let (tx, mut events) = cadre::actors::events::channel();
    let caller = h
        .host
        .sessions()
        .workflow_caller(&options, EventSink::new(tx))
        .expect("caller");
    let source = Source::file("wf.toml", fan_out(1, 1, 0));
    let workflow = validate(&source, &Options::default())
        .expect("valid")
        .workflow;
    let handle = start_on(
        caller,
        Launch {
            workflow,
            source,
            file: None,
            settings: RunSettings::default(),
            resume: None,
            retry_failed: false,
        },
        Some(joined.cluster.clone()),
    )
    .await
    .expect("started");
    let id = tokio::time::timeout(PATIENCE, async {
        while let Some(envelope) = events.recv().await {
            if let Event::ApprovalRequested { id, tool, .. } = envelope.event {
                assert_eq!(tool, "write_file");
                return id;
            }
        }
        panic!("the events ended before a prompt");
    })
    .await
    .expect("a prompt in time");
    assert!(id.starts_with("step:each[0]:"), "{id}");
    assert!(
        !h.path("approved.txt").exists(),
        "nothing written before the answer"
    );
    handle.approve(&id, ApprovalDecision::AllowOnce, None);
    let report = tokio::time::timeout(PATIENCE, handle.done)
        .await
        .expect("the run ended in time")
        .expect("a report");
    assert_eq!(report.status, RunStatus::Completed, "{report:#?}");
    assert_eq!(
        std::fs::read_to_string(h.path("approved.txt")).expect("written on the node"),
        "yes"
    );
    assert_eq!(joined.cluster.placed().get("a"), Some(&1));
    // The answer's resolution came back with the step's id.
    let mut resolved = false;
    while let Ok(envelope) = events.try_recv() {
        if let Event::ApprovalResolved { id: got, .. } = envelope.event {
            resolved |= got == id;
        }
    }
    assert!(resolved, "approval.resolved for {id}");
}

/// `n` items whose agent reads `seen.txt` before it answers (the check
/// wants a call behind the answer), each checked with `check`.
fn checked_fan_out(items: usize, check: &str, retries: u32) -> String {
    let list: Vec<String> = (0..items).map(|i| format!("\"i{i}\"")).collect();
    format!(
        "[workflow]\nname = \"checked\"\n\n[[steps]]\nname = \"each\"\nretries = {retries}\nfor_each = [{}]\nprompt = \"item {{{{item}}}}\"\ncheck = \"{check}\"\n",
        list.join(", ")
    )
}

fn read_then_answer(mock: &MockServer) {
    mock.respond_with(|request| {
        let item = prompt_of(request).strip_prefix("item ")?.to_string();
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks(
                "r1",
                "read_file",
                &json!({"path": "seen.txt"}),
            ))
        } else {
            Reply::sse(&text_chunks(&format!("done {item}")))
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_steps_check_runs_on_its_node_and_verifies_it_once() {
    let mock = MockServer::start().await;
    read_then_answer(&mock);
    let dirs = dirs();
    std::fs::write(dirs.0.path().join("seen.txt"), "x").expect("seen.txt");
    let a = Node::start("a", dirs.0.path(), 2, &mock, SECRET).await;
    let run = coordinator(
        // The item's value travels with the check to the node.
        &checked_fan_out(
            3,
            "test -f seen.txt && case {{item}} in i[0-2]) ;; *) false ;; esac",
            0,
        ),
        &dirs,
        &mock,
        &[&a],
        SECRET,
        &["--posture", "bypass"],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = workflow_events(&out);
    assert_eq!(
        per_node(&events, "verified"),
        BTreeMap::from([("a".to_string(), 3)]),
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_while_its_check_runs_fails_the_check_and_the_step_is_verified_elsewhere() {
    let mock = MockServer::start().await;
    read_then_answer(&mock);
    let dirs = dirs();
    // Each node has its own copy of the workspace; only a's check hangs.
    let copies = (TempDir::new().expect("a's"), TempDir::new().expect("b's"));
    for copy in [&copies.0, &copies.1] {
        std::fs::write(copy.path().join("seen.txt"), "x").expect("seen.txt");
    }
    std::fs::write(copies.0.path().join("hang"), "").expect("hang");
    let serve = |copy: &TempDir| format!("{}={}", s(dirs.0.path()), s(copy.path()));
    let mut a = Node::serving("a", &serve(&copies.0), 1, &mock, SECRET, &[]).await;
    let b = Node::serving("b", &serve(&copies.1), 1, &mock, SECRET, &[]).await;
    let mut run = coordinator(
        &checked_fan_out(1, "if [ -f hang ]; then sleep 5; fi; test -f seen.txt", 1),
        &dirs,
        &mock,
        &[&a, &b],
        SECRET,
        &["--posture", "bypass"],
    );
    let mut stdout = BufReader::new(run.stdout.take().expect("stdout")).lines();
    let mut lines = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(line) = stdout.next_line().await.expect("stdout") {
            let event: Value = serde_json::from_str(&line).unwrap_or_default();
            lines.push(line);
            if event["type"] == "step.state" && event["state"] == "finalized" {
                assert_eq!(event["node"], "a", "the first attempt runs on a");
                return;
            }
        }
        panic!("the run ended before a step was finalized: {lines:#?}");
    })
    .await
    .expect("finalized on a in time");
    a.child.start_kill().expect("SIGKILL node a");
    let _ = a.child.wait().await;
    let rest = tokio::time::timeout(PATIENCE, async {
        let mut rest = Vec::new();
        while let Some(line) = stdout.next_line().await.expect("stdout") {
            rest.push(line);
        }
        rest
    })
    .await
    .expect("the run ended in time");
    lines.extend(rest);
    let mut out = finish(run).await;
    out.stdout = lines.join("\n") + "\n";
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let events = workflow_events(&out);
    let retried: Vec<&Value> = states(&events, "pending")
        .into_iter()
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("node a was lost"))
        })
        .collect();
    assert_eq!(retried.len(), 1, "{events:#?}");
    let reason = retried[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("check failed"), "{reason}");
    assert_eq!(
        per_node(&events, "verified"),
        BTreeMap::from([("b".to_string(), 1)]),
        "verified once, on b: {events:#?}"
    );
}

/// A node whose model endpoint refuses it (or that says so) fails its
/// own attempts; it does not halt the coordinator's run, as the run's own
/// endpoint refusing would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_refusing_model_fails_its_attempts_and_does_not_halt_the_run() {
    let mock = MockServer::start().await;
    answer_items(&mock);
    let refusing = MockServer::start().await;
    refusing.respond_with(|_| Some(Reply::error(401, "invalid api key")));
    let dirs = dirs();
    let a = Node::start("a", dirs.0.path(), 1, &refusing, SECRET).await;
    let run = coordinator(
        &fan_out(2, 2, 1),
        &dirs,
        &mock,
        &[&a],
        SECRET,
        &["--posture", "bypass"],
    );
    let out = finish(run).await;
    let events = workflow_events(&out);
    assert_eq!(
        states(&events, "cancelled").len(),
        0,
        "not halted: {events:#?}"
    );
    let retried: Vec<&Value> = states(&events, "pending")
        .into_iter()
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("the model endpoint of node a refused"))
        })
        .collect();
    assert_eq!(retried.len(), 2, "each item retried once: {events:#?}");
    assert_eq!(out.code, 1, "both items failed on a: {}", out.stderr);
}
