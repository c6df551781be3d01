//! The whole conformance kit on a 3-node MariaDB Galera cluster (issue 35,
//! "the kit passes with each store connected to a different node"): every
//! family and hook case the direct MySQL target runs
//! (`store-diesel/tests/mysql`), with the stores of one case on different
//! nodes of one cluster.
//!
//! One cluster serves the whole binary ([`Galera::start`], bounded): started
//! once (a `OnceLock`) on a thread of its own that lives as long as the
//! binary. A `static` is never dropped, so a reaper (`sh`, in a process
//! group of its own) waits on a pipe from this process and, when the pipe
//! closes (the binary exits, however it exits), kills the three nodes'
//! process groups and removes their directory.
//!
//! Where each case's stores are: a case takes one of the three nodes as
//! its own (at most one case per node at a time, so the nodes'
//! `max_connections = 60` holds: [`CONNECTIONS`] for its store, a few for
//! the others' second stores); its store connects there, the `k`-th store
//! it opens beside it ([`LeaseHarness::skewed_store`]: a worker on another
//! machine) to node `own + k`, so the lease races run on all three nodes at
//! once, and the hooks reach behind the stores on node `own + 2`. Two
//! stores on the same data are always on two nodes.
//!
//! Reads after another node's write: Galera is synchronous for commits
//! but not for reads, so a read on one node may miss what another node
//! committed a moment before. Each store sets `wsrep_sync_wait` on its own
//! sessions to a Galera node (`StoreConfig::galera_sync_wait`, 7 by
//! default: reads, updates and deletes, inserts each wait until their node
//! has applied what the cluster committed before them); the nodes run
//! with the server's default, 0, so the kit passing here is the store's
//! own setting at work, not the cluster's. The harness's connections
//! behind the stores set the same on their sessions. The hooks' trigger
//! DDL (total order isolation) is waited for the same way: a synced read
//! on every node after it.
//!
//! Each case gets a database of its own: a fresh one migrated through its
//! node, or one an earlier case passed on, emptied (every table's rows
//! deleted, no trigger of a hook left; the schema and its migrations kept):
//! a migration is some 130 DDL statements, each replicated in total order
//! to all three nodes, too slow to run for each of 600 cases. A case that
//! fails keeps its database (teardown does not run); the cluster goes with
//! the binary.
//!
//! Nothing is excluded: every case the direct MySQL target runs runs here.
//! `kit_on_galera_counts_its_cases` prints how many, and where.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};
use flowstate_core::ports::RunStore as _;
use flowstate_core::{NewRun, RunQuery};
use flowstate_faults::cluster::Galera;
use flowstate_store_diesel::test_support::kit_hooks::HookDb;
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::{Harness, LeaseHarness, ManualClock, SkewedClock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Client connections of a case's own store, as the direct harness opens:
/// the race cases' 32 tasks race rather than queue on the pool.
const CONNECTIONS: usize = 34;

/// Connections of each store a case opens beside its own.
const SKEWED_CONNECTIONS: usize = 4;

/// `wsrep_sync_wait` on the harness's own sessions: the stores' default
/// (1 reads, and the start of a transaction, + 2 updates and deletes + 4
/// inserts and replaces), so the harness reads as the stores do.
const SYNC_WAIT: u8 = flowstate_store_diesel::DEFAULT_GALERA_SYNC_WAIT;

/// `FLOWSTATE_GALERA_SYNC_WAIT`, to see which cases need the wait: when
/// set, every store's setting and every node's global one (0: no session
/// waits but the harness's own).
fn sync_wait_override() -> Option<u8> {
    std::env::var("FLOWSTATE_GALERA_SYNC_WAIT")
        .ok()
        .and_then(|value| value.parse().ok())
}

/// How long the binary waits for the cluster to come up (its own bound,
/// `CLUSTER_START_TIMEOUT`, plus the settings after it).
const START_BOUND: Duration = Duration::from_secs(150);

/// Writes `line` to stdout past the test harness's capture, so it shows
/// in every run, not only with `--nocapture`.
fn shown(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// The binary's cluster, as the cases see it.
struct Cluster {
    /// Each node's client port, in node order.
    ports: Vec<u16>,
}

impl Cluster {
    /// The URL of database `name` on node `node` (taken modulo the nodes).
    fn url(&self, node: usize, name: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{name}?prefer_socket=false",
            self.ports[node % Galera::NODES]
        )
    }
}

/// The binary's cluster: started on first use, on a thread that holds it
/// until the binary exits.
fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    let started = CLUSTER.get_or_init(|| {
        let (sender, answer) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("galera".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                match runtime.block_on(start()) {
                    Ok((galera, reaper, ports)) => {
                        let _ = sender.send(Ok(Cluster { ports }));
                        // Held, never dropped: the nodes live until the
                        // binary exits and the reaper sees its pipe close.
                        let _held = (galera, reaper);
                        loop {
                            std::thread::park();
                        }
                    }
                    Err(err) => {
                        let _ = sender.send(Err(err));
                    }
                }
            })
            .expect("spawn the galera thread");
        answer
            .recv_timeout(START_BOUND)
            .unwrap_or_else(|err| Err(format!("the galera thread gave no answer: {err}")))
    });
    match started {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start the Galera cluster: {err}"),
    }
}

/// Starts the cluster, sets `wsrep_sync_wait` on every node if
/// [`sync_wait_override`] says so, and starts the reaper: answers the
/// cluster, the reaper and the nodes' ports.
async fn start() -> Result<(Galera, std::process::Child, Vec<u16>), String> {
    let at = Instant::now();
    let galera = Galera::start().await.map_err(|err| format!("{err:#}"))?;
    let reaper = reaper(&galera).map_err(|err| format!("cannot start the reaper: {err}"))?;
    let ports: Vec<u16> = (0..Galera::NODES).map(|node| galera.port(node)).collect();
    let sync_wait = sync_wait_override();
    let mut indexes = Vec::new();
    for node in 0..Galera::NODES {
        let url = galera.url(node, "");
        let mut conn = AsyncMysqlConnection::establish(&url)
            .await
            .map_err(|err| format!("connect to node {node}: {err}"))?;
        if let Some(sync_wait) = sync_wait {
            conn.batch_execute(&format!("SET GLOBAL wsrep_sync_wait = {sync_wait}"))
                .await
                .map_err(|err| format!("wsrep_sync_wait on node {node}: {err}"))?;
        }
        let index: Name = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT VARIABLE_VALUE AS name FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = 'WSREP_LOCAL_INDEX'",
            ),
            &mut conn,
        )
        .await
        .map_err(|err| format!("wsrep_local_index of node {node}: {err}"))?;
        indexes.push(index.name);
    }
    shown(&format!(
        "galera: 3 nodes Synced in {:?} (ports {ports:?}, wsrep_local_index {indexes:?}, \
         wsrep_sync_wait {}), ready in {:?}",
        galera.started_in(),
        sync_wait.map_or_else(
            || "set by each store on its sessions".to_owned(),
            |checks| format!("= {checks} on each node and store")
        ),
        at.elapsed()
    ));
    Ok((galera, reaper, ports))
}

/// A shell that waits for its stdin (a pipe from this process) to close,
/// then kills every node's process group and removes the cluster's
/// directory: what a `Drop` of a `static` cluster would do, run however
/// the binary ends. In a process group of its own, so a Ctrl-C to the
/// test run does not end it first.
fn reaper(galera: &Galera) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt as _;
    let mut groups = String::new();
    for node in 0..Galera::NODES {
        if let Some(pid) = galera.pid(node) {
            let _ = write!(groups, " -{pid}");
        }
    }
    let dir = galera.dir().display().to_string();
    assert!(
        !dir.contains('\''),
        "a cluster directory with a quote: {dir}"
    );
    let script = format!("read _; kill -s KILL --{groups} 2>/dev/null; sleep 1; rm -rf -- '{dir}'");
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
}

/// Which nodes a case holds as its own, and how many cases run at once
/// (one per node).
struct Nodes {
    taken: Mutex<[bool; Galera::NODES]>,
    slots: Arc<Semaphore>,
    next: AtomicUsize,
}

/// The nodes the cases share.
fn nodes() -> &'static Nodes {
    static NODES: OnceLock<Nodes> = OnceLock::new();
    NODES.get_or_init(|| Nodes {
        taken: Mutex::new([false; Galera::NODES]),
        slots: Arc::new(Semaphore::new(Galera::NODES)),
        next: AtomicUsize::new(0),
    })
}

/// A node a case holds as its own until this is dropped.
struct OwnNode {
    node: usize,
    _slot: OwnedSemaphorePermit,
}

impl OwnNode {
    /// Waits for a node no other case holds, taking them in turn.
    async fn take() -> Self {
        let nodes = nodes();
        let slot = Arc::clone(&nodes.slots)
            .acquire_owned()
            .await
            .expect("the slots stay open");
        let start = nodes.next.fetch_add(1, Ordering::Relaxed);
        let mut taken = nodes.taken.lock().unwrap();
        let node = (0..Galera::NODES)
            .map(|i| (start + i) % Galera::NODES)
            .find(|&node| !taken[node])
            .expect("a free node for every slot");
        taken[node] = true;
        Self { node, _slot: slot }
    }
}

impl Drop for OwnNode {
    fn drop(&mut self) {
        nodes()
            .taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[self.node] = false;
    }
}

/// Databases earlier cases passed on, emptied.
static SPARE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Databases made (migrated) and handed on, for the count.
static MADE: AtomicUsize = AtomicUsize::new(0);
/// Cases that got a database an earlier case passed on.
static REUSED: AtomicUsize = AtomicUsize::new(0);

/// One row: a name.
#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

/// One row: a `BIGINT` `n`.
#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The rows of the catalogue read `sql` on `conn`, read again (up to five
/// times, 50 ms apart) when the node aborts it as a deadlock: a node
/// applying another case's DDL in total order may abort a read of
/// `information_schema` with 1213 (seen in CI in the trigger barrier and
/// in a teardown's listing). A catalogue read decides nothing, so a retry
/// changes no assertion.
async fn read_catalogue<T>(conn: &mut AsyncMysqlConnection, sql: &str) -> Vec<T>
where
    T: QueryableByName<diesel::mysql::Mysql> + Send + 'static,
{
    for attempt in 1.. {
        match diesel_async::RunQueryDsl::load(diesel::sql_query(sql), &mut *conn).await {
            Ok(rows) => return rows,
            Err(err) if attempt < 5 && err.to_string().contains("Deadlock") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("{sql}: {err}"),
        }
    }
    unreachable!("the loop returns or panics")
}

/// A connection to `url` whose session waits as the stores' do
/// ([`SYNC_WAIT`]), or a panic naming it.
async fn connect(url: &str) -> AsyncMysqlConnection {
    let mut conn = AsyncMysqlConnection::establish(url)
        .await
        .unwrap_or_else(|err| panic!("cannot reach the Galera node at {url}: {err}"));
    conn.batch_execute(&format!("SET SESSION wsrep_sync_wait = {SYNC_WAIT}"))
        .await
        .unwrap_or_else(|err| panic!("wsrep_sync_wait at {url}: {err}"));
    conn
}

/// One case's database, on its own node.
struct CaseDb {
    name: String,
    own: OwnNode,
}

impl CaseDb {
    /// An empty migrated database and a node of the case's own.
    async fn migrated() -> Self {
        let cluster = cluster();
        let own = OwnNode::take().await;
        let spare = SPARE.lock().unwrap().pop();
        let name = if let Some(name) = spare {
            REUSED.fetch_add(1, Ordering::Relaxed);
            name
        } else {
            let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
            let mut admin = connect(&cluster.url(own.node, "")).await;
            admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap_or_else(|err| panic!("CREATE DATABASE {name}: {err}"));
            let url = cluster.url(own.node, &name);
            flowstate_store_diesel::migrate::up(&url)
                .await
                .unwrap_or_else(|err| panic!("cannot migrate {url}: {err}"));
            MADE.fetch_add(1, Ordering::Relaxed);
            name
        };
        // Shown with a failing case's output (the test harness keeps it).
        println!(
            "kit on Galera: this case's store on node {} (port {}), the stores beside it \
             on nodes {} and {}, the hooks on node {}; database {name}",
            own.node,
            cluster.ports[own.node],
            (own.node + 1) % Galera::NODES,
            (own.node + 2) % Galera::NODES,
            (own.node + 2) % Galera::NODES,
        );
        Self { name, own }
    }

    /// Its URL on the case's own node moved by `by`.
    fn url(&self, by: usize) -> String {
        cluster().url(self.own.node + by, &self.name)
    }

    /// A store on the case's own node moved by `by`.
    async fn store(&self, by: usize, config: StoreConfig) -> DieselStore {
        let url = self.url(by);
        let config = match sync_wait_override() {
            Some(checks) => config.galera_sync_wait(checks),
            None => config,
        };
        DieselStore::open(&url, config)
            .await
            .unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
    }

    /// A connection behind every store's back, on the node the hooks use.
    async fn behind(&self) -> AsyncMysqlConnection {
        connect(&self.url(2)).await
    }

    /// Empties the database (no row, no hook's trigger: as migrated) and
    /// passes it on to a later case.
    async fn pass_on(self) {
        let mut conn = connect(&self.url(0)).await;
        let tables: Vec<Name> = read_catalogue(
            &mut conn,
            &format!(
                "SELECT TABLE_NAME AS name FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = '{}' AND TABLE_TYPE = 'BASE TABLE' \
                 AND TABLE_NAME <> '__diesel_schema_migrations'",
                self.name
            ),
        )
        .await;
        let triggers: Vec<Name> = read_catalogue(
            &mut conn,
            &format!(
                "SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS \
                 WHERE TRIGGER_SCHEMA = '{}' AND TRIGGER_NAME LIKE 'fst\\_%'",
                self.name
            ),
        )
        .await;
        let mut sql = String::new();
        for trigger in &triggers {
            let _ = write!(sql, "DROP TRIGGER IF EXISTS {}; ", trigger.name);
        }
        sql.push_str("SET SESSION foreign_key_checks = 0; START TRANSACTION; ");
        for table in &tables {
            let _ = write!(sql, "DELETE FROM {}; ", table.name);
        }
        sql.push_str("COMMIT");
        conn.batch_execute(&sql)
            .await
            .unwrap_or_else(|err| panic!("empty {}: {err}", self.name));
        SPARE.lock().unwrap().push(self.name);
    }
}

/// The hooks reach behind the stores on node `own + 2`, and wait for
/// every node to apply their triggers.
impl HookDb for CaseDb {
    fn dialect(&self) -> Dialect {
        Dialect::Mysql
    }

    /// Runs `sql` behind every store's back; answers the rows it affected.
    async fn execute(&self, sql: &str) -> usize {
        let mut conn = self.behind().await;
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    }

    /// Runs `sql`, a query answering one `BIGINT` column `n`, behind every
    /// store's back.
    async fn count(&self, sql: &str) -> u64 {
        let mut conn = self.behind().await;
        let counted: Count =
            diesel_async::RunQueryDsl::get_result(diesel::sql_query(sql), &mut conn)
                .await
                .unwrap_or_else(|err| panic!("{sql}: {err}"));
        u64::try_from(counted.n).expect("a count")
    }

    /// Runs the DDL `sql` (trigger changes) behind every store's back,
    /// then a read on every node, which `wsrep_sync_wait` holds until the
    /// node has applied it.
    async fn ddl(&self, sql: &[String]) {
        let mut conn = self.behind().await;
        for sql in sql {
            conn.batch_execute(sql)
                .await
                .unwrap_or_else(|err| panic!("{sql}: {err}"));
        }
        let triggers = format!(
            "SELECT COUNT(*) AS n FROM information_schema.TRIGGERS \
             WHERE TRIGGER_SCHEMA = '{}'",
            self.name
        );
        // The read is only a barrier.
        for by in 0..Galera::NODES {
            let mut conn = connect(&self.url(by)).await;
            let _: Vec<Count> = read_catalogue(&mut conn, &triggers).await;
        }
    }
}

/// The kit's view of a store on one node of the cluster, read through a
/// `ManualClock` (as `store-diesel/tests/common/harness.rs`, the direct
/// one), its other stores on the other nodes.
pub struct GaleraHarness {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    db: CaseDb,
    lease_offset: LeaseClockOffset,
    /// Stores opened beside the case's own so far.
    others: AtomicUsize,
}

impl GaleraHarness {
    /// An empty migrated database and a store on the case's own node with
    /// every pooled connection already open.
    pub async fn create() -> Self {
        let db = CaseDb::migrated().await;
        let clock = Arc::new(ManualClock::new());
        let lease_offset = LeaseClockOffset::following(clock.clone());
        let config = StoreConfig::default()
            .pool_size(CONNECTIONS)
            .clock(clock.clone())
            .lease_clock_offset(lease_offset.clone());
        let store = db.store(0, config).await;
        let opening: Vec<_> = (0..CONNECTIONS)
            .map(|_| store.reserve_connection())
            .collect();
        for held in futures_util::future::join_all(opening).await {
            drop(held.expect("open a pooled connection"));
        }
        Self {
            store: Arc::new(store),
            clock,
            db,
            lease_offset,
            others: AtomicUsize::new(0),
        }
    }
}

impl Harness for GaleraHarness {
    type Store = DieselStore;

    fn store(&self) -> &Arc<DieselStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    async fn teardown(self) {
        drop(self.store);
        self.db.pass_on().await;
    }
}

flowstate_store_diesel::impl_kit_hooks!(GaleraHarness, db);

impl LeaseHarness for GaleraHarness {
    async fn advance_lease_clock(&self, by: std::time::Duration) {
        self.lease_offset.advance(by);
    }

    async fn skewed_store(&self, skew_micros: i64) -> Arc<DieselStore> {
        let clock = Arc::new(SkewedClock::new(self.clock.clone(), skew_micros));
        let config = StoreConfig::default()
            .pool_size(SKEWED_CONNECTIONS)
            .clock(clock)
            .lease_clock_offset(self.lease_offset.clone());
        // The k-th store beside the case's own is on node own + k: two
        // stores on the same data are never on one node.
        let by = 1 + self.others.fetch_add(1, Ordering::Relaxed) % (Galera::NODES - 1);
        Arc::new(self.db.store(by, config).await)
    }
}

// The families and hooks `store-diesel/tests/mysql` stamps
// (`common::stamp::dialect_tests!`), every one.
flowstate_testkit::suite!(kit, crate::GaleraHarness::create(), [all]);

/// Prints how many kit cases this binary runs on the cluster (every case
/// of every family, the hook cases included), and checks that a store on
/// each node sees a write made on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kit_on_galera_counts_its_cases() {
    let started = Instant::now();
    let cases: usize = flowstate_testkit::CASES
        .iter()
        .map(|(_, cases)| cases.len())
        .sum();
    let db = CaseDb::migrated().await;
    let mut stores = Vec::new();
    for by in 0..Galera::NODES {
        stores.push(db.store(by, StoreConfig::default().pool_size(1)).await);
    }
    for (by, store) in stores.iter().enumerate() {
        store
            .create_run(NewRun::new("wf", serde_json::json!({ "node": by })))
            .await
            .expect("create a run");
        let next = &stores[(by + 1) % Galera::NODES];
        let listed = next
            .list_runs(&RunQuery::default())
            .await
            .expect("list runs");
        assert_eq!(
            listed.items.len(),
            by + 1,
            "a store on the next node reads every run made so far"
        );
    }
    drop(stores);
    db.pass_on().await;
    shown(&format!(
        "kit on Galera: {cases} cases of {} families (hook cases included), none excluded, \
         each case's stores on two or three nodes; databases migrated so far {}, reused {}; \
         this check took {:?}",
        flowstate_testkit::CASES.len(),
        MADE.load(Ordering::Relaxed),
        REUSED.load(Ordering::Relaxed),
        started.elapsed()
    ));
    assert!(cases > 0, "the kit lists its cases");
}

/// A store's session on a Galera node waits for the cluster
/// (`wsrep_sync_wait`, `StoreConfig::galera_sync_wait`) while the node's
/// own global setting is the server's default: checked on the session
/// itself, through the store's one pooled connection, for the default and
/// for a value set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_sets_wsrep_sync_wait_on_its_sessions() {
    if sync_wait_override().is_some() {
        shown("FLOWSTATE_GALERA_SYNC_WAIT is set: the stores' own setting is not what runs");
        return;
    }
    let db = CaseDb::migrated().await;
    let mut global = connect(&db.url(1)).await;
    let global_wait: Count = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query("SELECT CAST(@@GLOBAL.wsrep_sync_wait AS SIGNED) AS n"),
        &mut global,
    )
    .await
    .expect("read the global wsrep_sync_wait");
    assert_eq!(global_wait.n, 0, "the node runs with the server's default");
    for (config, expected) in [
        (
            StoreConfig::default(),
            flowstate_store_diesel::DEFAULT_GALERA_SYNC_WAIT,
        ),
        (StoreConfig::default().galera_sync_wait(3), 3),
    ] {
        let store = db.store(1, config.pool_size(1)).await;
        let check = format!(
            "BEGIN NOT ATOMIC IF @@SESSION.wsrep_sync_wait <> {expected} THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the session does not wait'; \
             END IF; END"
        );
        store
            .batch_execute(&check)
            .await
            .unwrap_or_else(|err| panic!("wsrep_sync_wait {expected} expected: {err}"));
        let wrong = format!(
            "BEGIN NOT ATOMIC IF @@SESSION.wsrep_sync_wait <> {} THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the session does not wait'; \
             END IF; END",
            expected + 1
        );
        assert!(
            store.batch_execute(&wrong).await.is_err(),
            "the check itself must be able to fail"
        );
    }
    db.pass_on().await;
}
