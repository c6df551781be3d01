//! [`FaultProxy`]: an in-process TCP proxy between a store and its server
//! that can cut every open connection at once, stall traffic both ways, or
//! refuse new connections: the toxiproxy idea, with no extra service.
//!
//! It listens on a free 127.0.0.1 port; point the store's URL at
//! [`FaultProxy::port`] instead of the server's. Each accepted connection
//! gets one task that dials the server and pumps bytes both ways. A cut
//! resets both sides (`SO_LINGER` 0: the peers see a reset, as after a
//! crash or a dropped route, not a polite close). Dropping the proxy stops
//! listening and cuts everything.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::{Context as _, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Connection counts of a [`FaultProxy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Connections accepted and forwarded, ever.
    pub accepted: u64,
    /// Connections open now.
    pub open: u64,
    /// Connections refused (accepted and closed at once) while refusing.
    pub refused: u64,
    /// Connections cut by [`FaultProxy::cut_all`].
    pub cut: u64,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    refused: AtomicU64,
    cut: AtomicU64,
    refuse: AtomicBool,
}

/// A fault-injecting TCP proxy; see the module doc.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    counters: Arc<Counters>,
    /// Bumped by every cut; dropped with the proxy, which ends every
    /// connection task.
    cuts: watch::Sender<u64>,
    stall: watch::Sender<bool>,
    listener: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts forwarding a free local port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind the proxy")?;
        let port = listener.local_addr()?.port();
        let counters = Arc::new(Counters::default());
        let (cuts, _) = watch::channel(0);
        let (stall, _) = watch::channel(false);
        let task = tokio::spawn(accept_loop(
            listener,
            upstream,
            Arc::clone(&counters),
            cuts.clone(),
            stall.clone(),
        ));
        Ok(Self {
            port,
            counters,
            cuts,
            stall,
            listener: task,
        })
    }

    /// Forwards a free local port to `127.0.0.1:port`.
    pub async fn to_local(port: u16) -> Result<Self> {
        Self::start(SocketAddr::from(([127, 0, 0, 1], port))).await
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts every open connection, both ways, at once (each side sees a
    /// reset); answers how many were open. New connections are accepted
    /// as before.
    pub fn cut_all(&self) -> u64 {
        let open = self.counters.open.load(Ordering::SeqCst);
        self.cuts.send_modify(|generation| *generation += 1);
        open
    }

    /// While on, holds every byte both ways (connections stay open, nothing
    /// passes); off releases what was held, in order.
    pub fn stall(&self, on: bool) {
        self.stall.send_replace(on);
    }

    /// While on, every new connection is accepted and closed at once (a
    /// reset); open ones are left alone.
    pub fn refuse_new(&self, on: bool) {
        self.counters.refuse.store(on, Ordering::SeqCst);
    }

    /// The connection counts so far.
    pub fn counts(&self) -> ProxyCounts {
        ProxyCounts {
            accepted: self.counters.accepted.load(Ordering::SeqCst),
            open: self.counters.open.load(Ordering::SeqCst),
            refused: self.counters.refused.load(Ordering::SeqCst),
            cut: self.counters.cut.load(Ordering::SeqCst),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // The connection tasks see `cuts` dropped and end.
        self.listener.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    counters: Arc<Counters>,
    cuts: watch::Sender<u64>,
    stall: watch::Sender<bool>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if counters.refuse.load(Ordering::SeqCst) {
            counters.refused.fetch_add(1, Ordering::SeqCst);
            reset(&client);
            continue;
        }
        counters.accepted.fetch_add(1, Ordering::SeqCst);
        counters.open.fetch_add(1, Ordering::SeqCst);
        let open = OpenGuard(Arc::clone(&counters));
        let mut cut = cuts.subscribe();
        cut.borrow_and_update();
        let stalled = stall.subscribe();
        let counters = Arc::clone(&counters);
        tokio::spawn(async move {
            let _open = open;
            let Ok(server) = TcpStream::connect(upstream).await else {
                reset(&client);
                return;
            };
            if forward(client, server, &mut cut, stalled).await {
                counters.cut.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
}

/// Counts a connection open until it drops.
struct OpenGuard(Arc<Counters>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Pumps both ways until both sides are done, or a cut (answering `true`,
/// after resetting both sides) or the proxy's drop.
async fn forward(
    mut client: TcpStream,
    mut server: TcpStream,
    cut: &mut watch::Receiver<u64>,
    stalled: watch::Receiver<bool>,
) -> bool {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let was_cut = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let up = pump(client_read, server_write, stalled.clone());
        let down = pump(server_read, client_write, stalled);
        tokio::select! {
            changed = cut.changed() => changed.is_ok(),
            _ = async { tokio::join!(up, down) } => false,
        }
    };
    reset(&client);
    reset(&server);
    was_cut
}

/// Copies `from` to `to`, holding each chunk while stalled; at the end of
/// `from`, shuts `to` down for writing (a half close passes through).
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stalled.wait_for(|on| !*on).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Makes the close of `stream` a reset (`SO_LINGER` 0).
fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server on a free port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = conn.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(conn: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        conn.write_all(bytes).await.unwrap();
        let mut back = vec![0; bytes.len()];
        tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut back))
            .await
            .expect("an answer")
            .unwrap();
        back
    }

    /// Whether the connection ends (EOF or reset) within a second.
    async fn ends(conn: &mut TcpStream) -> bool {
        let mut buf = [0; 16];
        matches!(
            tokio::time::timeout(Duration::from_secs(1), conn.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn it_forwards_stalls_cuts_and_refuses() {
        let proxy = FaultProxy::start(echo().await).await.unwrap();
        let mut conn = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(roundtrip(&mut conn, b"ping").await, b"ping");
        assert_eq!((proxy.counts().accepted, proxy.counts().open), (1, 1));

        proxy.stall(true);
        conn.write_all(b"held").await.unwrap();
        let mut back = [0; 4];
        let stalled =
            tokio::time::timeout(Duration::from_millis(200), conn.read_exact(&mut back)).await;
        assert!(stalled.is_err(), "bytes passed a stalled proxy");
        proxy.stall(false);
        tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut back))
            .await
            .expect("the held bytes, once released")
            .unwrap();
        assert_eq!(&back, b"held");

        let mut other = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(roundtrip(&mut other, b"two").await, b"two");
        assert_eq!(proxy.cut_all(), 2);
        assert!(ends(&mut conn).await && ends(&mut other).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!((proxy.counts().cut, proxy.counts().open), (2, 0));

        proxy.refuse_new(true);
        let mut refused = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert!(ends(&mut refused).await, "a refused connection stayed open");
        assert_eq!(proxy.counts().refused, 1);
        proxy.refuse_new(false);
        let mut again = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(roundtrip(&mut again, b"back").await, b"back");
        assert_eq!(proxy.counts().accepted, 3);
    }
}
