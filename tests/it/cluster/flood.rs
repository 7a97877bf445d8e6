//! A flood of peers that never finish the handshake (issue: 30 of them,
//! each sending a 16 MiB frame, grew a node by hundreds of MiB): the node
//! stays small, closes them at its handshake deadline (or at once beyond
//! its cap on unauthenticated connections), and a real coordinator still
//! joins and runs a step while half-open connections are held.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::{Node, SECRET, coordinator, dirs, finish};
use crate::support::mock::{MockServer, Reply, text_chunks};

/// The node's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A half-open peer: a 16 MiB frame header and as much of its body, short
/// of its last byte, as the node takes; returns how long until the node
/// closed it.
fn half_open(addr: String, started: Instant) -> JoinHandle<Duration> {
    tokio::spawn(async move {
        let stream = TcpStream::connect(&addr).await.expect("connect");
        let (mut read, mut write) = stream.into_split();
        let send = tokio::spawn(async move {
            let _ = write.write_all(&(16u64 << 20).to_be_bytes()).await;
            // All of the body but its last byte: a frame never finished.
            let body = vec![0u8; 1 << 20];
            for chunk in 0..16 {
                let part = if chunk == 15 { &body[1..] } else { &body[..] };
                if write.write_all(part).await.is_err() {
                    return;
                }
            }
            // Held open, the frame unfinished, until the node closes it.
            std::future::pending::<()>().await;
        });
        let mut sink = [0u8; 64];
        loop {
            match read.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        send.abort();
        started.elapsed()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_peers_cost_the_node_little_are_closed_at_the_deadline_and_a_coordinator_still_runs()
 {
    let mock = MockServer::start().await;
    mock.respond_with(|_| Some(Reply::sse(&text_chunks("done"))));
    let dirs = dirs();
    let node = Node::start_with(
        "a",
        dirs.0.path(),
        1,
        &mock,
        SECRET,
        &[
            "--handshake-timeout-ms",
            "2000",
            "--max-unauthenticated",
            "16",
        ],
    )
    .await;
    let pid = node.child.id().expect("pid");
    let before = rss_kib(pid);
    let started = Instant::now();
    let flood: Vec<JoinHandle<Duration>> = (0..30)
        .map(|_| half_open(node.addr.clone(), started))
        .collect();
    // Every peer has sent what the node will take by now.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let during = rss_kib(pid);
    let mut closed = Vec::new();
    for peer in flood {
        closed.push(
            tokio::time::timeout(Duration::from_secs(20), peer)
                .await
                .expect("every half-open peer is closed")
                .expect("peer"),
        );
    }
    let at_once = closed
        .iter()
        .filter(|d| **d < Duration::from_millis(1000))
        .count();
    let at_deadline = closed
        .iter()
        .filter(|d| **d >= Duration::from_millis(1800) && **d < Duration::from_secs(8))
        .count();
    let grown = during.saturating_sub(before);
    eprintln!("rss {before} KiB → {during} KiB; closed {closed:?}");
    assert!(grown < 32 * 1024, "the node grew by {grown} KiB");
    assert_eq!(
        (at_once, at_deadline),
        (14, 16),
        "beyond the cap closed at once, the rest at the deadline: {closed:?}"
    );
    // Half-open peers held (fewer than the cap), a coordinator joins and
    // its step runs on the node.
    let again = Instant::now();
    let held: Vec<JoinHandle<Duration>> = (0..8)
        .map(|_| half_open(node.addr.clone(), again))
        .collect();
    let run = coordinator(
        "[workflow]\nname = \"one\"\n[[steps]]\nname = \"s\"\nprompt = \"go\"\n",
        &dirs,
        &mock,
        &[&node],
        SECRET,
        &["--posture", "bypass"],
    );
    let out = finish(run).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("node a joined"), "{}", out.stderr);
    assert!(
        out.stdout.contains("\"node\":\"a\""),
        "the step ran on the node: {}",
        out.stdout
    );
    for peer in held {
        peer.abort();
    }
}
