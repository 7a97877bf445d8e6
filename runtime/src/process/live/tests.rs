//! Real processes under the sandbox policy of Work under `suggest`.

use pretty_assertions::assert_eq;

use super::*;
use crate::mode::Mode;
use crate::permission::Posture;
use crate::process::reap::proc_info;
use crate::sandbox::{SandboxConfig, inherited};

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    tmp: std::path::PathBuf,
    policy: Policy,
    env: Vec<(String, String)>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    let tmp = root.join(".tmp");
    let config = SandboxConfig {
        env: inherited(std::env::vars(), &[]),
        ..SandboxConfig::default()
    };
    let policy = Policy::resolve(Mode::Work, Posture::Suggest, &root, &tmp, &config);
    Fixture {
        _dir: dir,
        root,
        tmp,
        policy,
        env: config.env,
    }
}

impl Fixture {
    fn request<'a>(&'a self, owner: &'a str, command: &'a str) -> StartRequest<'a> {
        StartRequest {
            owner,
            session_id: "s",
            command,
            cwd: &self.root,
            policy: &self.policy,
            env: &self.env,
            tmp: &self.tmp,
            limits: ProcessLimits {
                per_agent: 2,
                per_session: 3,
                output_bytes: 1024,
            },
        }
    }
}

fn alive(pid: u32) -> bool {
    // A zombie awaiting its reaper is not running.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Every process below `pid`, by the parent links `/proc` shows (the
/// sandbox may put a command in a pid namespace of its own, so the pids a
/// shell inside prints are not the host's).
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |child: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_whitespace().nth(1)?.parse::<u32>().ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|&&p| parent_of(p) == Some(parent)));
        i += 1;
    }
    found.split_off(1)
}

#[tokio::test]
async fn waits_for_readiness_reads_and_stops() {
    let f = fixture();
    let processes = Processes::default();
    let started = processes
        .start(f.request("s", "echo starting; echo listening on 8000; exec sleep 60"))
        .await
        .expect("started");
    let pattern = Regex::new("listening on \\d+").expect("regex");
    let outcome = processes
        .wait(started.id, Some(&pattern), 0, Duration::from_secs(20))
        .await
        .expect("waits");
    assert_eq!(
        outcome,
        WaitOutcome::Matched {
            line: "listening on 8000".into(),
            next: 26,
        }
    );
    let (chunk, entry) = processes.output(started.id, Some(9), 100).expect("output");
    assert_eq!(
        (chunk.text.as_str(), entry.state),
        ("listening on 8000\n", State::Running)
    );
    assert!(alive(started.pid));
    assert_eq!(processes.stop(started.id).await, Ok(State::Stopped));
    assert!(!alive(started.pid), "the process is gone");
    assert_eq!(processes.running(None), Vec::<u64>::new());
}

#[tokio::test]
async fn a_process_that_exits_reports_its_code() {
    let f = fixture();
    let processes = Processes::default();
    let started = processes
        .start(f.request("s", "echo done; exit 3"))
        .await
        .expect("started");
    let outcome = processes
        .wait(started.id, None, 0, Duration::from_secs(20))
        .await
        .expect("waits");
    assert_eq!(outcome, WaitOutcome::Ended(State::Exited(Some(3))));
    let (chunk, _) = processes.output(started.id, None, 100).expect("output");
    assert_eq!(chunk.text, "done\n");
}

#[tokio::test]
async fn a_wait_times_out_while_it_runs() {
    let f = fixture();
    let processes = Processes::default();
    let started = processes
        .start(f.request("s", "exec sleep 60"))
        .await
        .expect("started");
    let never = Regex::new("never printed").expect("regex");
    let outcome = processes
        .wait(started.id, Some(&never), 0, Duration::from_millis(200))
        .await
        .expect("waits");
    assert_eq!(outcome, WaitOutcome::TimedOut);
    processes.end(None);
}

#[tokio::test]
async fn an_agents_end_kills_its_processes_and_its_group() {
    let f = fixture();
    let processes = Processes::default();
    let mine = processes
        .start(f.request("s/1", "sleep 60 & echo $! > child; wait"))
        .await
        .expect("started");
    let other = processes
        .start(f.request("s", "exec sleep 60"))
        .await
        .expect("started");
    let child_file = f.root.join("child");
    let pattern = Regex::new(".").expect("regex");
    // The shell wrote its child's pid before it waits.
    while !child_file.exists() {
        processes
            .wait(mine.id, Some(&pattern), u64::MAX, Duration::from_millis(50))
            .await
            .expect("waits");
    }
    let below = descendants(mine.pid);
    assert!(
        below
            .iter()
            .any(|&p| std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.starts_with("sleep"))),
        "the shell's child runs: {below:?}"
    );
    assert_eq!(processes.end(Some("s/1")), vec![mine.id]);
    assert_eq!(processes.state(mine.id), Ok(State::Stopped));
    processes.settled(mine.id).await.expect("settles");
    // The leader is reaped; the rest die of the same kill, on a loaded
    // machine a moment later.
    for _ in 0..200 {
        if !below.iter().any(|&p| alive(p)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !alive(mine.pid) && !below.iter().any(|&p| alive(p)),
        "the group is gone"
    );
    assert!(alive(other.pid), "another agent's process runs on");
    assert_eq!(processes.state(other.id), Ok(State::Running));
    processes.end(None);
    processes.settled(other.id).await.expect("settles");
    assert!(!alive(other.pid));
}

#[tokio::test]
async fn bounds_hold_and_an_unknown_name_is_refused() {
    let f = fixture();
    let processes = Processes::default();
    for _ in 0..2 {
        processes
            .start(f.request("a", "exec sleep 60"))
            .await
            .expect("started");
    }
    let third = processes.start(f.request("a", "exec sleep 60")).await;
    assert_eq!(third.err(), Some(ProcessError::Limit(LimitError::Agent(2))));
    processes
        .start(f.request("b", "exec sleep 60"))
        .await
        .expect("started");
    let fourth = processes.start(f.request("c", "exec sleep 60")).await;
    assert_eq!(
        fourth.err(),
        Some(ProcessError::Limit(LimitError::Session(3)))
    );
    assert_eq!(processes.end(None), vec![1, 2, 3]);
    assert_eq!(processes.state(9), Err(ProcessError::Unknown("p9".into())));
}

/// A ledger that keeps what it was told.
#[derive(Default)]
struct Book(Mutex<Vec<String>>);

impl ProcessLedger for Book {
    fn started(&self, record: ProcessRecord) -> LedgerFuture {
        let me = proc_info(std::process::id()).expect("me");
        assert_eq!((record.host_pid, record.host_started), (me.pid, me.started));
        assert_eq!(
            proc_info(record.pid).map(|p| (p.pgid, p.started)),
            Some((record.pid, record.started))
        );
        self.0
            .lock()
            .expect("lock")
            .push(format!("started {}", record.command));
        Box::pin(async {})
    }
    fn ended(&self, _session_id: &str, _key: &str) {
        self.0.lock().expect("lock").push("ended".into());
    }
}

#[tokio::test]
async fn the_ledger_hears_of_each_start_and_end() {
    let f = fixture();
    let processes = Processes::default();
    let book = Arc::new(Book::default());
    processes.attach_ledger(book.clone());
    let started = processes
        .start(f.request("s", "exec sleep 60"))
        .await
        .expect("started");
    processes.stop(started.id).await.expect("stopped");
    assert_eq!(
        *book.0.lock().expect("lock"),
        vec!["started exec sleep 60".to_string(), "ended".into()]
    );
}
