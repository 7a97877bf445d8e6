use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A guarded reader of a loopback connection, its writing end, and the
/// gates that open it.
async fn guarded(limits: PreAuthLimits) -> (BoxRead, TcpStream, Arc<Gates>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (stream, peer) = listener.accept().await.unwrap();
    let gates = Arc::new(Gates::default());
    gates.pending.fetch_add(1, Ordering::SeqCst);
    let gate = Arc::new(Gate::default());
    gates.table().insert(peer.to_string(), gate.clone());
    let guarded = Box::new(Guarded {
        local: None,
        stream,
        peer,
        gate,
        pending: Pending {
            gates: gates.clone(),
            peer: peer.to_string(),
        },
        limits,
    });
    let (read, _write) = guarded.split();
    (read, client, gates, peer.to_string())
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u64).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

const LIMITS: PreAuthLimits = PreAuthLimits {
    handshake: Duration::from_secs(30),
    frame: 64,
    pending: 4,
};

#[tokio::test]
async fn small_frames_pass_before_authentication_byte_for_byte() {
    let (mut read, mut client, gates, _) = guarded(LIMITS).await;
    let sent = [frame(b"hello"), frame(b""), frame(&[7u8; 64])].concat();
    client.write_all(&sent).await.unwrap();
    let mut got = vec![0u8; sent.len()];
    read.read_exact(&mut got).await.unwrap();
    assert_eq!(got, sent);
    assert_eq!(gates.pending(), 1);
}

#[tokio::test]
async fn a_large_frame_waits_unread_until_authentication() {
    let (mut read, mut client, gates, peer) = guarded(LIMITS).await;
    let body = vec![1u8; 100_000];
    let sent = [frame(b"hi"), frame(&body)].concat();
    let writer = tokio::spawn(async move {
        client.write_all(&sent).await.unwrap();
        client
    });
    // The small frame and the large one's header come through; its body
    // does not.
    let mut head = vec![0u8; 8 + 2 + 8];
    read.read_exact(&mut head).await.unwrap();
    let mut one = [0u8; 1];
    let held = tokio::time::timeout(Duration::from_millis(300), read.read(&mut one)).await;
    assert!(held.is_err(), "the body was read before authentication");
    gates.opened(&peer);
    assert_eq!(gates.pending(), 1, "counted until the reader sees it");
    let mut rest = vec![0u8; body.len()];
    read.read_exact(&mut rest).await.unwrap();
    assert_eq!(rest, body);
    assert_eq!(gates.pending(), 0, "authenticated: no longer counted");
    drop(writer.await.unwrap());
}

#[tokio::test]
async fn no_handshake_within_the_deadline_ends_the_connection() {
    let limits = PreAuthLimits {
        handshake: Duration::from_millis(200),
        ..LIMITS
    };
    let (mut read, mut client, gates, _) = guarded(limits).await;
    // A header announcing 16 MiB, and a little of its body.
    client
        .write_all(&(16u64 << 20).to_be_bytes())
        .await
        .unwrap();
    client.write_all(&[0u8; 1000]).await.unwrap();
    let started = tokio::time::Instant::now();
    let mut sink = Vec::new();
    let err = tokio::time::timeout(Duration::from_secs(5), read.read_to_end(&mut sink))
        .await
        .expect("ended by the deadline")
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(sink.len(), 8, "only the header was read");
    drop(read);
    assert_eq!(gates.pending(), 0);
    assert!(gates.table().is_empty());
}
