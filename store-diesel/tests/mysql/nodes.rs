//! Several nodes in one MySQL URL, against the machine's MariaDB: a dead
//! node listed first is skipped (and quickly), a URL whose nodes are all
//! dead fails with a typed error naming each, and a node that dies under a
//! store (a proxy in front of the server, killed) costs at most one
//! retryable failure, its work moving to the node that answers, and the
//! connections move back once it answers again. The node checks never
//! reach the statement log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use flowstate_core::NewRun;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::{Dialect, DieselStore, Error, StatementLog, StoreConfig};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::db::{TestDb, server_url};

/// The server's `host:port` (the machine's MariaDB).
fn live_address() -> String {
    let server = server_url(Dialect::Mysql);
    let rest = server
        .split_once("://")
        .map_or(server.as_str(), |(_, rest)| rest);
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:3306")
    }
}

/// The URL of `db` listing `nodes` (each `host:port`), over TCP.
fn url_of(db: &TestDb, nodes: &[String], extra: &str) -> String {
    let server = server_url(Dialect::Mysql);
    let (scheme, rest) = server.split_once("://").expect("a server URL");
    let user = rest.rsplit_once('@').map_or("", |(user, _)| user);
    let at = if user.is_empty() { "" } else { "@" };
    format!(
        "{scheme}://{user}{at}{}/{}?prefer_socket=false{extra}",
        nodes.join(","),
        db.name
    )
}

/// A loopback port nothing listens on (bound, then let go).
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_listed_first_is_skipped_quickly() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let dead = format!("127.0.0.1:{}", dead_port());
    let url = url_of(&db, &[dead, live_address()], "");
    let log = StatementLog::new();
    let started = Instant::now();
    let store = DieselStore::open(
        &url,
        StoreConfig::default()
            .pool_size(4)
            .statement_log(Arc::clone(&log)),
    )
    .await
    .unwrap_or_else(|err| panic!("open {url}: {err}"));
    // Every connection of the pool at once: each skips the dead node.
    let held: Vec<_> = futures_util::future::join_all((0..4).map(|_| store.reserve_connection()))
        .await
        .into_iter()
        .map(|held| held.expect("a pooled connection"))
        .collect();
    drop(held);
    let run = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .expect("create a run")
        .record;
    assert_eq!(store.get_run(run.id).await.expect("read it").id, run.id);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "a dead first node cost {took:?}"
    );
    assert!(
        log.statements().iter().all(|sql| !sql.starts_with("SHOW")),
        "the node checks are not the store's statements: {:?}",
        log.statements()
    );
    eprintln!("dead node first: open, 4 connections and two calls in {took:?}");
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_answering_is_a_typed_error_naming_each() {
    let db = TestDb::empty(Dialect::Mysql).await;
    let nodes = [
        format!("127.0.0.1:{}", dead_port()),
        format!("127.0.0.1:{}", dead_port()),
    ];
    let url = url_of(&db, &nodes, "");
    let started = Instant::now();
    let err = DieselStore::open(&url, StoreConfig::default().pool_size(2))
        .await
        .expect_err("no node answers");
    let Error::NoNodeAnswered { dialect, tried } = &err else {
        panic!("not the typed error: {err:?}");
    };
    assert_eq!(*dialect, Dialect::Mysql);
    assert_eq!(tried.len(), 2, "{tried:?}");
    for (node, said) in nodes.iter().zip(tried) {
        assert!(said.starts_with(node.as_str()), "{said} names {node}");
    }
    assert!(err.is_retryable());
    assert!(!err.to_string().contains("root@"), "no credentials: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    db.drop_database().await;
}

/// A TCP proxy to the server on a port of its own: a node that can die
/// (every connection through it cut) and come back on the same port.
struct Proxy {
    port: u16,
    tasks: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    async fn start(port: u16, accepted: Arc<AtomicUsize>) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the proxy");
        let port = listener.local_addr().expect("its address").port();
        let tasks: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (count, held) = (Arc::clone(&accepted), Arc::clone(&tasks));
        let target = live_address();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                held.lock().unwrap().push(task);
            }
        });
        Self {
            port,
            tasks,
            accept: Some(accept),
        }
    }

    /// Cuts every connection and stops listening.
    async fn kill(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_dies_is_left_and_returned_to() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let mut proxy = Proxy::start(0, Arc::clone(&accepted)).await;
    let url = url_of(
        &db,
        &[format!("127.0.0.1:{}", proxy.port), live_address()],
        "",
    );
    let store = Arc::new(
        DieselStore::open(
            &url,
            StoreConfig::default()
                .pool_size(4)
                .acquire_timeout(Duration::from_secs(2)),
        )
        .await
        .expect("open on two nodes"),
    );
    let held: Vec<_> = futures_util::future::join_all((0..4).map(|_| store.reserve_connection()))
        .await
        .into_iter()
        .map(|held| held.expect("a pooled connection"))
        .collect();
    drop(held);
    let before = accepted.load(Ordering::SeqCst);
    // The open's connection and two of the pool's four went through it.
    assert!(
        before >= 2,
        "the pool spread over both nodes: {before} through the proxy"
    );
    let run = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .expect("a run")
        .record;

    proxy.kill().await;
    let killed = Instant::now();
    let mut failed = 0;
    let mut served = 0;
    while served < 40 {
        // Four at a time, so every pooled connection is used.
        let calls = (0..4).map(|_| store.get_run(run.id));
        for answer in futures_util::future::join_all(calls).await {
            match answer {
                Ok(_) => served += 1,
                Err(err) => {
                    assert!(err.is_retryable(), "{err}");
                    failed += 1;
                }
            }
        }
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "not healed: {failed} failed"
        );
    }
    let healed = killed.elapsed();
    assert!(failed <= 2, "{failed} calls failed after the node died");

    // Back on the same port: the pool's connections move back to it.
    let mut proxy = Proxy::start(proxy.port, Arc::clone(&accepted)).await;
    let back = Instant::now();
    let before = accepted.load(Ordering::SeqCst);
    while accepted.load(Ordering::SeqCst) < before + 2 {
        let calls = (0..4).map(|_| store.get_run(run.id));
        for answer in futures_util::future::join_all(calls).await {
            answer.expect("nothing fails while connections move back");
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "no connection moved back to the node"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "node killed: {failed} calls failed, all served again {} ms after; \
         two connections back on it {} ms after it was",
        healed.as_millis(),
        back.elapsed().as_millis()
    );
    proxy.kill().await;
    drop(store);
    db.drop_database().await;
}
