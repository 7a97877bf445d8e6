//! What a peer may cost before it proves the secret: the node server's
//! listener with limits in front of ractor_cluster.
//!
//! ractor_cluster's own listener takes any connection and reads frames of
//! up to its inbound cap (16 MiB) before the handshake, with no deadline and
//! no count: 30 peers sending one such frame each held hundreds of MiB. So
//! the node accepts on a listener of its own ([`serve`]) and hands each
//! connection to the node server as an external stream
//! (`NodeServerMessage::ConnectionOpenedExternal`), read through a
//! [`Guarded`] reader that, until the peer is authenticated:
//!
//! - ends the connection when the handshake is not done within
//!   [`PreAuthLimits::handshake`];
//! - reads no frame body longer than [`PreAuthLimits::frame`] bytes (the
//!   handshake's frames are a few hundred): such a frame's body is left in
//!   the socket, unread, until authentication (a peer that authenticated a
//!   moment before sends its first large frame on) or the deadline;
//! - counts against [`PreAuthLimits::pending`]: beyond that many
//!   unauthenticated connections at once, a new one is closed at accept.
//!
//! After authentication the reader passes everything through. The frames
//! are ractor_cluster's: a big-endian `u64` length, then that many bytes.
//! ractor_cluster still opens a listener of its own; it is bound to
//! loopback on a port nobody is told (`docs/security/cluster.md`).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use ractor::ActorRef;
use ractor_cluster::{BoxRead, BoxWrite, ClusterBidiStream, NodeServerMessage};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

/// The limits on a peer that has not proved the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreAuthLimits {
    /// Time from accept to authentication; then the connection is closed.
    pub handshake: Duration,
    /// The longest frame read before authentication, in bytes.
    pub frame: u64,
    /// Unauthenticated connections at once; more are closed at accept.
    pub pending: usize,
}

impl Default for PreAuthLimits {
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(5),
            frame: 4096,
            pending: 32,
        }
    }
}

/// One connection's way through the handshake.
#[derive(Debug, Default)]
struct Gate {
    /// The peer proved the secret: nothing is held back any more.
    open: AtomicBool,
    /// The reader waiting for that.
    waker: AtomicWaker,
}

/// The connections not yet authenticated, by peer address (the label the
/// node server's events carry), and how many there are.
#[derive(Debug, Default)]
pub struct Gates {
    by_peer: Mutex<HashMap<String, Arc<Gate>>>,
    pending: AtomicUsize,
}

impl Gates {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Gate>>> {
        self.by_peer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The peer at `addr` authenticated: its reader lets everything through.
    pub fn opened(&self, addr: &str) {
        if let Some(gate) = self.table().remove(addr) {
            gate.open.store(true, Ordering::SeqCst);
            gate.waker.wake();
        }
    }

    /// The peer at `addr` is gone.
    pub fn closed(&self, addr: &str) {
        self.table().remove(addr);
    }

    /// Unauthenticated connections now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

/// A connection counted as unauthenticated until dropped (at
/// authentication, or with the connection).
#[derive(Debug)]
struct Pending {
    gates: Arc<Gates>,
    peer: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.gates.closed(&self.peer);
        self.gates.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An accepted connection, for the node server.
pub struct Guarded {
    stream: TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    gate: Arc<Gate>,
    pending: Pending,
    limits: PreAuthLimits,
}

impl ClusterBidiStream for Guarded {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let Guarded {
            stream,
            gate,
            pending,
            limits,
            ..
        } = *self;
        let (read, write) = stream.into_split();
        let reader = GuardedRead {
            inner: read,
            deadline: Box::pin(tokio::time::sleep(limits.handshake)),
            gate,
            pending: Some(pending),
            limits,
            header: [0; 8],
            have: 0,
            body: 0,
        };
        (Box::new(reader), Box::new(write))
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.peer.to_string())
    }

    fn local_label(&self) -> Option<String> {
        self.local.map(|a| a.to_string())
    }
}

/// The read half, holding frames back until authentication.
struct GuardedRead {
    inner: OwnedReadHalf,
    deadline: Pin<Box<Sleep>>,
    gate: Arc<Gate>,
    /// Given up once the peer authenticated.
    pending: Option<Pending>,
    limits: PreAuthLimits,
    /// The frame header being read, and how much of it is.
    header: [u8; 8],
    have: usize,
    /// What is left of the body being read.
    body: u64,
}

impl GuardedRead {
    fn open(&mut self) -> bool {
        let open = self.gate.open.load(Ordering::SeqCst);
        if open {
            self.pending = None;
        }
        open
    }
}

impl AsyncRead for GuardedRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.open() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no handshake within {} ms",
                    this.limits.handshake.as_millis()
                ),
            )));
        }
        if this.have == this.header.len() {
            let length = u64::from_be_bytes(this.header);
            if length > this.limits.frame {
                // Its body waits in the socket for authentication or the
                // deadline, whichever comes first.
                this.gate.waker.register(cx.waker());
                if this.open() {
                    return Pin::new(&mut this.inner).poll_read(cx, buf);
                }
                return Poll::Pending;
            }
            this.body = length;
            this.have = 0;
        }
        // Read no further than the end of the header or body at hand, so
        // every header is seen.
        let mut chunk = [0u8; 4096];
        let left = if this.body > 0 {
            usize::try_from(this.body).unwrap_or(usize::MAX)
        } else {
            this.header.len() - this.have
        };
        let want = left.min(buf.remaining()).min(chunk.len());
        let mut into = ReadBuf::new(&mut chunk[..want]);
        match Pin::new(&mut this.inner).poll_read(cx, &mut into) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let read = into.filled();
        if this.body > 0 {
            this.body -= read.len() as u64;
        } else {
            this.header[this.have..this.have + read.len()].copy_from_slice(read);
            this.have += read.len();
        }
        buf.put_slice(read);
        Poll::Ready(Ok(()))
    }
}

/// Accepts on `listener` for `server` until it stops: each connection
/// within the limits is handed over guarded, the others closed.
pub async fn serve(
    listener: TcpListener,
    server: ActorRef<NodeServerMessage>,
    gates: Arc<Gates>,
    limits: PreAuthLimits,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(%err, "a cluster connection could not be accepted");
                // A full descriptor table passes; do not spin on it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if gates.pending.fetch_add(1, Ordering::SeqCst) >= limits.pending {
            gates.pending.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(%peer, limit = limits.pending, "too many unauthenticated cluster connections; closed");
            drop(stream);
            continue;
        }
        let pending = Pending {
            gates: gates.clone(),
            peer: peer.to_string(),
        };
        let _ = stream.set_nodelay(true);
        let gate = Arc::new(Gate::default());
        gates.table().insert(peer.to_string(), gate.clone());
        let guarded = Guarded {
            local: stream.local_addr().ok(),
            stream,
            peer,
            gate,
            pending,
            limits,
        };
        let opened = NodeServerMessage::ConnectionOpenedExternal {
            stream: Box::new(guarded),
            is_server: true,
        };
        if server.cast(opened).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
