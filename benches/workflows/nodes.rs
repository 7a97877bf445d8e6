//! The workflow bench with remote nodes: two `cadre node` processes on
//! loopback against the same mock, versus every step in this process.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cadre::workflows::cluster::server::ServerConfig;
use cadre::workflows::cluster::{Cluster, CoordinatorConfig, HEARTBEAT_TIMEOUT};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{Measured, cadre_run_on, mock};

const SECRET: &str = "bench-secret";

/// A node child serving `workspace`, once it listens.
async fn node(name: &str, workspace: &Path, slots: u32, url: &str) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cadre"))
        .args(["node", "--listen", &addr, "--name", name, "--serve"])
        .arg(workspace)
        .args([
            "--slots",
            &slots.to_string(),
            "--base-url",
            url,
            "--model",
            "m",
        ])
        .env("CADRE_CLUSTER_SECRET", SECRET)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre node");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("stdout").expect("a line");
    assert!(first.contains("listening"), "{first}");
    (child, addr)
}

/// Local and remote, in one scenario: (local, remote).
async fn compare(n: usize, parallel: usize, latency: Duration) -> (Measured, Measured) {
    let server = mock(latency).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let local = cadre_run_on(&server.url, n, parallel, workspace.path(), None).await;
    let slots = parallel.div_ceil(2) as u32;
    let (_a, a) = node("a", workspace.path(), slots, &server.url).await;
    let (_b, b) = node("b", workspace.path(), slots, &server.url).await;
    let joined = Cluster::join(CoordinatorConfig {
        server: ServerConfig {
            name: "bench".into(),
            secret: SECRET.into(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            limits: Default::default(),
        },
        nodes: vec![a, b],
        local_slots: 0,
        join_timeout: Duration::from_secs(10),
        timeout: HEARTBEAT_TIMEOUT,
    })
    .await
    .expect("joined");
    assert_eq!(joined.cluster.nodes().len(), 2, "both nodes joined");
    let remote = cadre_run_on(
        &server.url,
        n,
        parallel,
        workspace.path(),
        Some(joined.cluster.clone()),
    )
    .await;
    let placed = joined.cluster.placed();
    assert_eq!(placed.values().sum::<u64>(), n as u64, "{placed:?}");
    println!("  steps per node: {placed:?}");
    (local, remote)
}

pub async fn scenarios() {
    let n = 100;
    println!("{n} steps one at a time, no model latency: all here vs over 2 nodes");
    let (local, remote) = compare(n, 1, Duration::ZERO).await;
    let per = |m: &Measured| m.wall.as_secs_f64() * 1e6 / n as f64;
    println!(
        "  here {:>8.0} µs per step · on nodes {:>8.0} µs per step · overhead per remote step {:>8.0} µs",
        per(&local),
        per(&remote),
        per(&remote) - per(&local)
    );
    let (n, parallel) = (200, 64);
    println!("{n} steps, {parallel} at once, 50 ms per model request: all here vs over 2 nodes");
    let (local, remote) = compare(n, parallel, Duration::from_millis(50)).await;
    let rate = |m: &Measured| n as f64 / m.wall.as_secs_f64();
    for (name, m) in [("here", &local), ("on 2 nodes", &remote)] {
        println!(
            "  {name:<11} wall {:>6.2} s · {:>6.1} steps/s · coordinator CPU {:>6.0} µs per step",
            m.wall.as_secs_f64(),
            rate(m),
            m.cpu.as_secs_f64() * 1e6 / n as f64
        );
    }
}
