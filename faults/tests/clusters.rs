//! The clusters of `flowstate_faults::cluster` prove themselves: a 3-node
//! Galera cluster replicates a write to every node, loses a node to
//! SIGKILL and takes it back by IST with the writes it missed; a Patroni
//! pair loses its primary to SIGKILL and promotes the synchronous standby,
//! which has the primary's commits and takes writes, also through the
//! multi-host URL; a Patroni switchover ends the old primary's sessions
//! and brings it back as a read-only standby streaming from the new one;
//! PgBouncer pools in transaction mode and serves again
//! after a restart. Each start and recovery prints its wall time (seen
//! with `--nocapture`).

use std::time::Duration;

use flowstate_faults::cluster::{Galera, Patroni, PgBouncer, RECOVER_TIMEOUT, alive};
use flowstate_faults::sql::RawConn;
use flowstate_store_diesel::Dialect;

/// `future`, or a panic naming `what` if it takes longer than `limit`.
async fn bounded<T>(what: &str, limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {limit:?}"))
}

/// How many rows of `probe` match `condition` on the node at `url`, read
/// with `wsrep_sync_wait = 1`: the read waits until the node has applied
/// every write the cluster committed before it.
async fn galera_rows(url: &str, condition: &str) -> u64 {
    let mut conn = RawConn::connect(url)
        .await
        .expect("connect to a Galera node");
    conn.run_sql("SET SESSION wsrep_sync_wait = 1")
        .await
        .expect("set wsrep_sync_wait");
    conn.count(&format!(
        "SELECT COUNT(*) AS n FROM probe WHERE {condition}"
    ))
    .await
    .expect("read probe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_galera_cluster_replicates_and_a_killed_node_rejoins_by_ist() {
    let mut cluster = Galera::start().await.expect("a 3-node Galera cluster");
    println!("galera: 3 nodes Synced in {:?}", cluster.started_in());
    for node in 0..Galera::NODES {
        let status = cluster.status(node).await.expect("a node's status");
        assert!(
            status.is_synced_in(3),
            "node {node} after the start: {status:?}"
        );
    }
    let urls = cluster
        .create_database("harness")
        .await
        .expect("a database");

    let mut first = RawConn::connect(&urls[0]).await.expect("connect to node 0");
    first
        .run_sql(
            "CREATE TABLE probe (id INT PRIMARY KEY, origin VARCHAR(16) NOT NULL) ENGINE=InnoDB",
        )
        .await
        .expect("create probe");
    first
        .run_sql("INSERT INTO probe VALUES (1, 'node0')")
        .await
        .expect("write on node 0");
    for (node, url) in urls.iter().enumerate().skip(1) {
        assert_eq!(
            galera_rows(url, "id = 1 AND origin = 'node0'").await,
            1,
            "node 0's write is not on node {node}"
        );
    }

    let dead = cluster.pid(1).expect("node 1 runs");
    cluster.kill(1).await;
    assert!(!alive(dead), "the killed node still runs");
    let left = cluster
        .wait_synced(RECOVER_TIMEOUT)
        .await
        .expect("the two others Synced without it");
    println!("galera: node 1 killed, the others a cluster of 2 after {left:?}");
    assert_eq!(cluster.status(0).await.expect("node 0").cluster_size, 2);
    first
        .run_sql("INSERT INTO probe VALUES (2, 'node0')")
        .await
        .expect("write on node 0 while node 1 is down");
    drop(first);

    let took = cluster.rejoin(1).await.expect("node 1 rejoins");
    println!("galera: node 1 rejoined (wsrep-recover + IST) in {took:?}");
    assert!(
        cluster.log_tail(1, 400).contains("IST received"),
        "node 1 did not catch up by IST:\n{}",
        cluster.log_tail(1, 40)
    );
    assert_eq!(
        galera_rows(&urls[1], "id = 2 AND origin = 'node0'").await,
        1,
        "the write made while node 1 was down is not on it"
    );
    assert_eq!(galera_rows(&urls[1], "1 = 1").await, 2);
    for node in 0..Galera::NODES {
        let status = cluster.status(node).await.expect("a node's status");
        assert!(
            status.is_synced_in(3),
            "node {node} after the rejoin: {status:?}"
        );
    }

    let pids: Vec<u32> = (0..Galera::NODES)
        .filter_map(|node| cluster.pid(node))
        .collect();
    let dir = cluster.dir().to_owned();
    drop(cluster);
    for pid in pids {
        assert!(!alive(pid), "mariadbd {pid} outlived its cluster");
    }
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_pair_promotes_its_synchronous_standby_when_the_primary_dies() {
    let mut pair = Patroni::start().await.expect("a Patroni pair");
    println!(
        "patroni: etcd, primary and synchronous standby up in {:?}",
        pair.started_in()
    );
    let old_primary = pair.create_database("harness").await.expect("a database");
    let mut primary = RawConn::connect(&old_primary)
        .await
        .expect("connect to the primary");
    primary
        .run_sql("CREATE TABLE probe (id INT PRIMARY KEY); INSERT INTO probe VALUES (1)")
        .await
        .expect("write on the primary");
    drop(primary);
    // Synchronous commit waits for the standby's flush, not its replay:
    // ask the standby in a database it has had from the start.
    let mut standby = RawConn::connect(&pair.standby_url("postgres"))
        .await
        .expect("connect to the standby");
    assert!(
        standby
            .run_sql("CREATE TABLE probe (id INT)")
            .await
            .is_err(),
        "the standby took a write"
    );
    drop(standby);
    let mut any = RawConn::connect(&pair.multi_host_url("harness"))
        .await
        .expect("connect through the multi-host URL");
    any.run_sql("INSERT INTO probe VALUES (2)")
        .await
        .expect("the multi-host URL reaches the primary");
    drop(any);

    pair.kill_primary().await;
    let took = pair
        .wait_for_promotion()
        .await
        .expect("the standby promoted");
    println!("patroni: primary killed, standby promoted after {took:?}");
    let new_primary = pair.primary_url("harness");
    assert_ne!(new_primary, old_primary, "the primary did not move");
    let mut promoted = RawConn::connect(&new_primary)
        .await
        .expect("connect to the promoted standby");
    assert_eq!(
        promoted
            .count("SELECT COUNT(*) AS n FROM probe WHERE id IN (1, 2)")
            .await
            .expect("read on the promoted standby"),
        2,
        "a write the old primary acknowledged is missing after the promotion"
    );
    promoted
        .run_sql("INSERT INTO probe VALUES (3)")
        .await
        .expect("the promoted standby takes writes");
    drop(promoted);
    let mut any = bounded(
        "a connection through the multi-host URL",
        Duration::from_secs(10),
        RawConn::connect(&pair.multi_host_url("harness")),
    )
    .await
    .expect("the multi-host URL after the failover");
    any.run_sql("INSERT INTO probe VALUES (4)")
        .await
        .expect("the multi-host URL reaches the new primary");
    drop(any);

    let pids = pair.pids();
    assert!(!pids.is_empty());
    let dir = pair.dir().to_owned();
    drop(pair);
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived its Patroni pair");
    }
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_switchover_demotes_the_primary_to_a_read_only_streaming_standby() {
    let mut pair = Patroni::start().await.expect("a Patroni pair");
    let old_primary = pair.create_database("harness").await.expect("a database");
    let old = pair.primary_member();
    let mut primary = RawConn::connect(&old_primary)
        .await
        .expect("connect to the primary");
    primary
        .run_sql("CREATE TABLE probe (id INT PRIMARY KEY); INSERT INTO probe VALUES (1)")
        .await
        .expect("write on the primary");
    let took = pair.switchover().await.expect("the switchover");
    println!("patroni: switchover, the new primary took writes after {took:?}");
    assert_ne!(pair.primary_member(), old, "the primary did not move");
    // The demotion is a fast shutdown: the session held on it ended.
    assert!(
        bounded(
            "a statement",
            Duration::from_secs(5),
            primary.run_sql("SELECT 1")
        )
        .await
        .is_err(),
        "a session on the old primary outlived its demotion"
    );
    drop(primary);
    let back = pair
        .wait_for_standby()
        .await
        .expect("the old primary as a standby");
    println!("patroni: the old primary streams as a standby {back:?} after");
    let mut new = RawConn::connect(&pair.primary_url("harness"))
        .await
        .expect("connect to the new primary");
    new.run_sql("INSERT INTO probe VALUES (2)")
        .await
        .expect("the new primary takes writes");
    drop(new);
    // A new session on the old primary is read only: 25006.
    let mut demoted = RawConn::connect(&pair.member_url(old, "harness"))
        .await
        .expect("connect to the demoted primary");
    let refused = demoted
        .run_sql("INSERT INTO probe VALUES (3)")
        .await
        .expect_err("the demoted primary took a write");
    assert!(
        refused.to_string().contains("read-only transaction"),
        "{refused}"
    );
    // It streams from the new primary: the write made there arrives.
    let mut rows = 0;
    for _ in 0..50 {
        rows = demoted
            .count("SELECT COUNT(*) AS n FROM probe")
            .await
            .expect("read on the demoted primary");
        if rows == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rows, 2, "the new primary's write did not reach the old one");
}

/// The machine's PostgreSQL (`FLOWSTATE_PG_URL`, by default
/// 127.0.0.1:5432): host and port.
fn machine_postgres() -> (String, u16) {
    let url = flowstate_faults::shared::server_url(Dialect::Postgres);
    let authority = url.rsplit('@').next().unwrap_or(&url);
    let authority = authority
        .trim_start_matches("postgres://")
        .trim_start_matches("postgresql://");
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "5432"));
    (
        host.to_owned(),
        port.parse().expect("a port in FLOWSTATE_PG_URL"),
    )
}

const BACKEND: &str = "SELECT pg_backend_pid()::BIGINT AS n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_pools_in_transaction_mode_and_serves_again_after_a_restart() {
    let (host, port) = machine_postgres();
    // One server connection for every client: in session mode the second
    // client would wait for the first to disconnect.
    let mut bouncer = PgBouncer::start(&host, port, 1).await.expect("a PgBouncer");
    println!("pgbouncer: up in {:?}", bouncer.started_in());
    let url = bouncer.url("postgres");
    let limit = Duration::from_secs(10);
    let mut a = bounded("client a's connection", limit, RawConn::connect(&url))
        .await
        .expect("client a");
    // Its connection's setup already needs a server connection.
    let mut b = bounded(
        "client b's connection (session pooling?)",
        limit,
        RawConn::connect(&url),
    )
    .await
    .expect("client b");
    let on_a = bounded("client a's query", limit, a.count(BACKEND))
        .await
        .expect("a");
    let on_b = bounded(
        "client b's query (session pooling?)",
        limit,
        b.count(BACKEND),
    )
    .await
    .expect("b");
    let again = bounded("client a's second query", limit, a.count(BACKEND))
        .await
        .expect("a");
    assert_eq!(on_a, on_b, "two clients, one pooled server connection");
    assert_eq!(on_a, again);

    let took = bouncer.restart().await.expect("a restart");
    println!("pgbouncer: restarted in {took:?}");
    assert!(
        bounded("a cut client's query", limit, a.count(BACKEND))
            .await
            .is_err(),
        "a client of the stopped PgBouncer was not cut"
    );
    let mut c = bounded(
        "a connection after the restart",
        limit,
        RawConn::connect(&url),
    )
    .await
    .expect("a client after the restart");
    bounded("a query after the restart", limit, c.count(BACKEND))
        .await
        .expect("a query after the restart");
    drop((a, b, c));

    let pid = bouncer.pid().expect("running");
    let dir = bouncer.dir().to_owned();
    drop(bouncer);
    assert!(!alive(pid), "pgbouncer outlived its handle");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}
