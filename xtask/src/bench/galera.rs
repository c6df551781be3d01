//! `--galera`: the bench on a throw-away 3-node MariaDB Galera cluster
//! beside one MariaDB (issue 35, item 7).
//!
//! The bench starts a cluster of its own (`flowstate_faults::cluster::
//! Galera`: three `mariadbd` with `galera-4` on loopback, in a temp
//! directory, on free ports; it never touches the machine's servers),
//! creates and migrates its bench database there, and measures four kinds
//! of work on it, each round taken in turn with the same work on the
//! machine's MariaDB (a database of the bench's own beside the bench
//! database, `<bench database>_galera`, created afresh), so the ratio of
//! each pair is fair (`bench::interleaved`):
//! - per step: claim + succeed ([`throughput`]), steps/s;
//! - batched: `flowstate-pool`'s `WorkerPool`, one pool per node (each on
//!   a store whose URL lists its node first, `load_balance_hosts=disable`),
//!   the handlers split between them; on the single server the same three
//!   pools; steps/s;
//! - run leases: `claim_run` + `finish` ([`workloads::leases`]), runs/s;
//! - events: emit_batch(64) deferred + dispatch(64) ([`workloads::events`]), events/s.
//!
//! Where the workers are: per step, leases and events use one store whose
//! URL lists all three nodes (`mysql://root@a,b,c/db`): it opens its
//! connections fewest-first over the nodes (12 workers: 4 per node), as
//! an engine given the cluster's addresses would, and a worker's calls go
//! to whichever connection is free, so its claim and its completion may
//! be on two nodes. That needs reads (and guarded updates) to see what
//! another node committed: each store sets `wsrep_sync_wait` on its own
//! sessions to a node (7, `StoreConfig::galera_sync_wait`), and the bench
//! sets the same globally on every node for any other session
//! (`FLOWSTATE_GALERA_SYNC_WAIT` sets another global value; the stores'
//! sessions keep theirs). A `WorkerPool` claims on
//! one connection, so batched mode takes one pool per node instead.
//!
//! Durability differs by default: the nodes run
//! `innodb_flush_log_at_trx_commit = 2` (a commit is durable by
//! replication; Galera's usual setting), a single server commonly 1 (a log
//! flush per commit); both are in the JSON (`galera.settings`).
//! `FLOWSTATE_GALERA_FLUSH_LOG_AT_TRX_COMMIT=1` gives the nodes the single
//! server's, for a like-for-like ratio. `FLOWSTATE_GALERA_WORKS=leases,events`
//! measures only the kinds named (`per-step`, `batched`, `leases`,
//! `events`).
//!
//! The cluster is stopped however the bench ends: dropped at the end of
//! the section, and a reaper (`sh` on a pipe from this process, in a
//! process group of its own) kills the nodes and removes their directory
//! when the bench exits, even killed.
//!
//! Beside each round it reads what bounds the cluster: the conflicts the
//! store retried and let through (`conflict_retries`, this process's
//! counts), the nodes' Galera counters (certification failures,
//! brute-force aborts, flow control), statements and commits on the
//! nodes, and CPU time (each server's `mariadbd`, this process, the whole
//! machine from `/proc`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::SimpleAsyncConnection as _;
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, RunQueryDsl as _};
use flowstate_core::Completion;
use flowstate_core::Step;
use flowstate_faults::cluster::Galera;
use flowstate_pool::WorkerPool;
use flowstate_store_diesel::{DieselStore, StoreConfig, conflict_retries, migrate};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::batched::{self, FUNCTION as BATCH_FUNCTION};
use super::report::{Column, Rounds, Workload};
use super::throughput::{self, Throughput, create_steps_for, show_progress};
use super::{Options, interleaved_all, workloads};
use crate::backend::{self, ServerUrl};

/// The cluster's per-step column (its leases and events beside it).
pub const LABEL: &str = "galera";
/// The cluster's batched column.
pub const BATCH_LABEL: &str = "galera batch";
/// The single server's per-step column, measured in turn with the
/// cluster's (leases and events beside it).
pub const SINGLE: &str = "mariadb";
/// The single server's batched column.
pub const SINGLE_BATCH: &str = "mariadb batch";

/// Steps per round on the cluster when `--galera-steps` is not given
/// (and `--steps` is larger): 5,000 keeps a round of the cluster's per-step
/// work near 15 s at its measured 350 steps/s.
pub const DEFAULT_STEPS: usize = 5_000;

/// Workers when `--concurrency` is not given: the issue's measured shape,
/// 4 per node.
pub const DEFAULT_WORKERS: usize = 12;

/// `wsrep_sync_wait` on every node unless `FLOWSTATE_GALERA_SYNC_WAIT`
/// says otherwise: 1 (reads) + 2 (updates, deletes) + 4 (inserts).
const SYNC_WAIT: u8 = flowstate_store_diesel::DEFAULT_GALERA_SYNC_WAIT;

/// The most resident memory a node may reach: past it the watchdog
/// ([`Watchdog`]) kills the cluster. A node runs in about 200 MB (128 MB
/// buffer pool, 64 MB gcache); on this machine one node once grew to 22 GB
/// under load with `innodb_flush_log_at_trx_commit = 1` until the kernel's
/// OOM killer took it, beside everyone else's processes.
const NODE_RSS_LIMIT: u64 = 2 << 30;

/// The bench database's name on the cluster.
const DATABASE: &str = "flowstate_bench";

/// The Galera and server counters read beside each cluster round, summed
/// over the nodes (`SHOW GLOBAL STATUS` names).
const COUNTERS: [&str; 10] = [
    "WSREP_LOCAL_CERT_FAILURES",
    "WSREP_LOCAL_BF_ABORTS",
    "WSREP_FLOW_CONTROL_PAUSED_NS",
    "WSREP_FLOW_CONTROL_SENT",
    "WSREP_REPLICATED",
    "WSREP_RECEIVED",
    "QUESTIONS",
    "COM_COMMIT",
    "COM_ROLLBACK",
    "COM_UPDATE",
];

/// `innodb_flush_log_at_trx_commit` for the nodes if
/// `FLOWSTATE_GALERA_FLUSH_LOG_AT_TRX_COMMIT` gives one (0, 1 or 2); else
/// the nodes keep the cluster's 2 (a commit is durable by replication,
/// its log flushed once a second), where a single server commonly runs 1.
fn flush_log_at_trx_commit() -> Option<u8> {
    std::env::var("FLOWSTATE_GALERA_FLUSH_LOG_AT_TRX_COMMIT")
        .ok()
        .and_then(|value| value.parse().ok())
        .filter(|value| *value <= 2)
}

/// The `wsrep_sync_wait` the bench sets on the nodes.
fn sync_wait() -> u8 {
    std::env::var("FLOWSTATE_GALERA_SYNC_WAIT")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(SYNC_WAIT)
}

/// A cluster the bench started, with its bench database migrated.
pub struct Cluster {
    /// Killed, its files removed, when this drops.
    galera: Galera,
    /// Kills the nodes when this process exits, however it exits.
    _reaper: Child,
    /// The bench database, every node listed (a store spreads over them).
    pub url: String,
    /// The bench database with node `i` first and kept to while it answers.
    pub node_urls: Vec<String>,
    /// The `wsrep_sync_wait` set on every node.
    pub sync_wait: u8,
}

impl Cluster {
    /// Starts the cluster (bounded), its reaper, sets `wsrep_sync_wait` on
    /// every node, creates and migrates the bench database.
    pub async fn start() -> Result<Self> {
        let galera = Galera::start()
            .await
            .context("cannot start the Galera cluster (needs mariadb-server and galera-4)")?;
        let reaper = reaper(&galera).context("cannot start the cluster's reaper")?;
        let sync_wait = sync_wait();
        for node in 0..Galera::NODES {
            let mut conn = AsyncMysqlConnection::establish(&galera.url(node, ""))
                .await
                .with_context(|| format!("connect to Galera node {node}"))?;
            conn.batch_execute(&format!("SET GLOBAL wsrep_sync_wait = {sync_wait}"))
                .await
                .with_context(|| format!("wsrep_sync_wait on Galera node {node}"))?;
            if let Some(flush) = flush_log_at_trx_commit() {
                conn.batch_execute(&format!(
                    "SET GLOBAL innodb_flush_log_at_trx_commit = {flush}"
                ))
                .await
                .with_context(|| format!("innodb_flush_log_at_trx_commit on Galera node {node}"))?;
            }
        }
        galera.create_database(DATABASE).await?;
        let url = galera.nodes_url(0, DATABASE, "");
        migrate::up(&url)
            .await
            .context("migrating the cluster's bench database failed")?;
        let node_urls = (0..Galera::NODES)
            .map(|node| galera.nodes_url(node, DATABASE, "load_balance_hosts=disable"))
            .collect();
        Ok(Self {
            galera,
            _reaper: reaper,
            url,
            node_urls,
            sync_wait,
        })
    }

    /// The nodes' `mariadbd` pids.
    fn pids(&self) -> Vec<u32> {
        (0..Galera::NODES)
            .filter_map(|node| self.galera.pid(node))
            .collect()
    }
}

/// A shell that waits for its stdin (a pipe from this process) to close,
/// then kills every node's process group and removes the cluster's
/// directory: the cluster stopped however the bench ends (a Ctrl-C, a
/// panic, a kill). In a process group of its own, so a Ctrl-C to the
/// bench does not end it first.
fn reaper(galera: &Galera) -> Result<Child> {
    use std::os::unix::process::CommandExt as _;
    let mut groups = String::new();
    for node in 0..Galera::NODES {
        if let Some(pid) = galera.pid(node) {
            let _ = write!(groups, " -{pid}");
        }
    }
    let dir = galera.dir().display().to_string();
    if dir.contains('\'') {
        bail!("a cluster directory with a quote: {dir}");
    }
    let script = format!("read _; kill -s KILL --{groups} 2>/dev/null; sleep 1; rm -rf -- '{dir}'");
    Ok(Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?)
}

/// Watches the nodes' resident memory every half second while the
/// section runs, keeping each node's peak; a node past [`NODE_RSS_LIMIT`]
/// gets every node SIGKILLed (the section's work then fails, loudly) and
/// the reason kept, so a runaway node never takes the shared machine's
/// memory.
struct Watchdog {
    task: tokio::task::JoinHandle<()>,
    peaks: Arc<Vec<AtomicU64>>,
    fired: Arc<Mutex<Option<String>>>,
}

impl Watchdog {
    /// Starts watching `pids` (each a process group's leader).
    fn start(pids: Vec<u32>) -> Self {
        let peaks: Arc<Vec<AtomicU64>> = Arc::new(pids.iter().map(|_| AtomicU64::new(0)).collect());
        let fired = Arc::new(Mutex::new(None));
        let task = tokio::spawn({
            let (peaks, fired) = (Arc::clone(&peaks), Arc::clone(&fired));
            async move {
                loop {
                    for (node, &pid) in pids.iter().enumerate() {
                        let Some(rss) = rss_bytes(pid) else { continue };
                        peaks[node].fetch_max(rss, Ordering::Relaxed);
                        if rss > NODE_RSS_LIMIT {
                            for &pid in &pids {
                                let _ = Command::new("kill")
                                    .args(["-s", "KILL", "--", &format!("-{pid}")])
                                    .stdout(Stdio::null())
                                    .stderr(Stdio::null())
                                    .status();
                            }
                            let why = format!(
                                "Galera node {node} reached {} MB resident (limit {} MB): \
                                 the cluster was killed",
                                rss >> 20,
                                NODE_RSS_LIMIT >> 20
                            );
                            println!("  !! {why}");
                            *fired.lock().expect("not poisoned") = Some(why);
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        });
        Self { task, peaks, fired }
    }

    /// Stops watching: each node's peak resident memory in MB, and why it
    /// killed the cluster, if it did.
    fn stop(self) -> (Vec<u64>, Option<String>) {
        self.task.abort();
        let peaks = self
            .peaks
            .iter()
            .map(|peak| peak.load(Ordering::Relaxed) >> 20)
            .collect();
        let fired = self.fired.lock().expect("not poisoned").take();
        (peaks, fired)
    }
}

/// Process `pid`'s resident memory in bytes (`VmRSS` of
/// `/proc/<pid>/status`).
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

/// One kind of work the section measures on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    PerStep,
    Batched,
    Leases,
    Events,
}

impl Work {
    /// All four, in the order they are measured.
    const ALL: [Self; 4] = [Self::PerStep, Self::Batched, Self::Leases, Self::Events];

    /// The kinds `FLOWSTATE_GALERA_WORKS` names (comma-separated names,
    /// as [`Work::name`]), or all four: a run that measures one kind
    /// again need not wait for the others.
    fn chosen() -> Vec<Self> {
        let Ok(names) = std::env::var("FLOWSTATE_GALERA_WORKS") else {
            return Self::ALL.to_vec();
        };
        Self::ALL
            .into_iter()
            .filter(|work| names.split(',').any(|name| name.trim() == work.name()))
            .collect()
    }

    /// Its name in the JSON and the lines printed.
    fn name(self) -> &'static str {
        match self {
            Self::PerStep => "per-step",
            Self::Batched => "batched",
            Self::Leases => "leases",
            Self::Events => "events",
        }
    }

    /// What one item of it is, for "per 1,000 ...".
    fn unit(self) -> &'static str {
        match self {
            Self::PerStep | Self::Batched => "steps",
            Self::Leases => "runs",
            Self::Events => "events",
        }
    }

    /// The workload title its rounds go under ([`Workload::title`]); per
    /// step and batched are columns' own throughput.
    fn title(self) -> Option<&'static str> {
        match self {
            Self::PerStep | Self::Batched => None,
            Self::Leases => Some(super::LEASES_TITLE),
            Self::Events => Some(super::EVENTS_TITLE),
        }
    }
}

/// Where one side's work goes.
struct Side {
    /// The per-step, lease and event store's URL.
    url: String,
    /// One URL per batched pool.
    pool_urls: Vec<String>,
    /// The server processes whose CPU time is read (a cluster's three
    /// nodes; the machine's `mariadbd`, if its pid file is readable).
    pids: Vec<u32>,
    /// Node URLs whose Galera counters are read (none on a single server).
    nodes: Vec<String>,
}

/// What one round cost, beside its rate.
#[derive(Clone, Debug, Default)]
struct Cost {
    /// Items done (steps, runs, events).
    items: u64,
    /// Conflicts retried inside the store.
    retried: u64,
    /// Conflicts let through to a caller.
    surfaced: u64,
    /// Rounds that failed (their items are not counted).
    failed_rounds: u64,
    /// The server processes' CPU time, in clock ticks.
    server_ticks: u64,
    /// This process's CPU time, in clock ticks.
    bench_ticks: u64,
    /// The whole machine's busy and total ticks (all cores).
    machine_busy: u64,
    /// See `machine_busy`.
    machine_total: u64,
    /// Wall time of the round, setup included.
    wall: Duration,
    /// [`COUNTERS`] summed over the nodes.
    counters: BTreeMap<&'static str, i64>,
}

impl Cost {
    /// Adds `other` into `self`.
    fn add(&mut self, other: &Self) {
        self.items += other.items;
        self.retried += other.retried;
        self.surfaced += other.surfaced;
        self.failed_rounds += other.failed_rounds;
        self.server_ticks += other.server_ticks;
        self.bench_ticks += other.bench_ticks;
        self.machine_busy += other.machine_busy;
        self.machine_total += other.machine_total;
        self.wall += other.wall;
        for (name, value) in &other.counters {
            *self.counters.entry(name).or_default() += value;
        }
    }

    /// `count` per 1,000 items.
    fn per_thousand(&self, count: f64) -> f64 {
        count * 1000.0 / (self.items.max(1) as f64)
    }

    /// The JSON of this cost.
    fn to_json(&self) -> Value {
        let tick_ms = 1000.0 / CLOCK_TICKS_PER_SECOND as f64;
        let counters: serde_json::Map<String, Value> = self
            .counters
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), json!(value)))
            .collect();
        json!({
            "items": self.items,
            "conflicts_retried": self.retried,
            "conflicts_surfaced": self.surfaced,
            "retried_per_1000": self.per_thousand(self.retried as f64),
            "surfaced_per_1000": self.per_thousand(self.surfaced as f64),
            "failed_rounds": self.failed_rounds,
            "server_cpu_ms_per_1000": self.per_thousand(self.server_ticks as f64 * tick_ms),
            "bench_cpu_ms_per_1000": self.per_thousand(self.bench_ticks as f64 * tick_ms),
            "machine_busy": self.machine_busy as f64 / self.machine_total.max(1) as f64,
            "seconds": self.wall.as_secs_f64(),
            "node_counters": counters,
        })
    }
}

/// `/proc`'s clock ticks per second (`USER_HZ`, 100 on Linux).
const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// The counts read before and after a round.
struct Probe {
    conflicts: (u64, u64),
    server_ticks: u64,
    bench_ticks: u64,
    machine: (u64, u64),
    counters: BTreeMap<&'static str, i64>,
    at: Instant,
}

impl Probe {
    /// Reads them now for `side`.
    async fn take(side: &Side) -> Self {
        let mut counters = BTreeMap::new();
        for url in &side.nodes {
            // A node that does not answer leaves its counters out: the
            // round's own figures do not depend on them.
            if let Ok(read) = read_counters(url).await {
                for (name, value) in read {
                    *counters.entry(name).or_default() += value;
                }
            }
        }
        Self {
            conflicts: conflict_retries(),
            server_ticks: side.pids.iter().filter_map(|&pid| cpu_ticks(pid)).sum(),
            bench_ticks: cpu_ticks(std::process::id()).unwrap_or(0),
            machine: machine_ticks().unwrap_or((0, 0)),
            counters,
            at: Instant::now(),
        }
    }

    /// What happened from `self` to `after`, over `items` items.
    fn cost(&self, after: &Self, items: usize) -> Cost {
        Cost {
            items: items as u64,
            retried: after.conflicts.0.saturating_sub(self.conflicts.0),
            surfaced: after.conflicts.1.saturating_sub(self.conflicts.1),
            failed_rounds: 0,
            server_ticks: after.server_ticks.saturating_sub(self.server_ticks),
            bench_ticks: after.bench_ticks.saturating_sub(self.bench_ticks),
            machine_busy: after.machine.0.saturating_sub(self.machine.0),
            machine_total: after.machine.1.saturating_sub(self.machine.1),
            wall: after.at - self.at,
            counters: after
                .counters
                .iter()
                .map(|(name, value)| (*name, value - self.counters.get(name).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// One row of the counters' query.
#[derive(QueryableByName)]
struct Counter {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// [`COUNTERS`] on the node at `url`.
async fn read_counters(url: &str) -> Result<Vec<(&'static str, i64)>> {
    let names: Vec<String> = COUNTERS.iter().map(|name| format!("'{name}'")).collect();
    let sql = format!(
        "SELECT VARIABLE_NAME AS name, CAST(VARIABLE_VALUE AS SIGNED) AS n \
         FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ({})",
        names.join(", ")
    );
    let mut conn = AsyncMysqlConnection::establish(url).await?;
    let rows: Vec<Counter> = diesel::sql_query(sql).load(&mut conn).await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let name = COUNTERS
                .iter()
                .find(|c| c.eq_ignore_ascii_case(&row.name))?;
            Some((*name, row.n))
        })
        .collect())
}

/// Process `pid`'s user + system CPU time in clock ticks, from
/// `/proc/<pid>/stat` (fields 14 and 15).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The machine's busy and total CPU ticks over all cores, from
/// `/proc/stat` (idle and iowait are not busy).
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3)? + values.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The machine's MariaDB's pid, from its pid file, if readable.
fn machine_mariadbd() -> Option<u32> {
    ["/run/mysqld/mysqld.pid", "/var/run/mysqld/mysqld.pid"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse().ok())
}

/// The single server's database beside `url` (the bench database's
/// name with `_galera` added): created afresh and migrated.
async fn prepare_single(url: &str) -> Result<String> {
    let server = ServerUrl::split(url)?;
    let name = server.database.context("the MySQL URL names no database")?;
    let beside = server.with_database(&format!("{name}_galera"));
    backend::prepare(&beside, true).await?;
    migrate::up(&beside)
        .await
        .context("migrating the single server's database failed")?;
    Ok(beside)
}

/// What the section found, for the report.
pub struct Found {
    /// The four columns: the cluster's and the single server's, per step
    /// (with leases and events) and batched.
    pub columns: Vec<Column>,
    /// Their per-step and batched pairs, `(cluster, single)`.
    pub pairs: Vec<(String, String)>,
    /// Their lease and event pairs, `(cluster, single, title)`.
    pub workload_pairs: Vec<(String, String, &'static str)>,
    /// The cluster, its settings and what each round cost, as JSON.
    pub json: Value,
    /// Lines to print under the ratios: conflicts and what bounds it.
    pub lines: Vec<String>,
}

/// Starts a cluster and measures the four kinds of work on it, each round
/// in turn with the same work on the single server of `single_url` (a
/// MySQL URL; its database gets `_galera` added). Fails only if the
/// cluster or the single server's database cannot be set up; a kind of
/// work that fails is an error in its column.
pub async fn section(single_url: &str, options: &Options) -> Result<Found> {
    let steps = options
        .galera_steps
        .unwrap_or_else(|| options.steps.min(DEFAULT_STEPS));
    let concurrency = if options.concurrency.is_empty() {
        vec![DEFAULT_WORKERS]
    } else {
        options.concurrency.clone()
    };
    let single_db = prepare_single(single_url).await?;
    println!(
        "  galera: starting a throw-away 3-node cluster ({steps} steps per round, \
         {concurrency:?} workers)"
    );
    let cluster = Cluster::start().await?;
    let watchdog = Watchdog::start(cluster.pids());
    let ports: Vec<u16> = (0..Galera::NODES).map(|n| cluster.galera.port(n)).collect();
    println!(
        "  galera: 3 nodes Synced in {:.1} s (ports {ports:?}, wsrep_sync_wait = {} on each), \
         bench database migrated; beside it {}",
        cluster.galera.started_in().as_secs_f64(),
        cluster.sync_wait,
        backend::redact(&single_db)
    );
    let sides = [
        Side {
            url: cluster.url.clone(),
            pool_urls: cluster.node_urls.clone(),
            pids: cluster.pids(),
            nodes: (0..Galera::NODES)
                .map(|node| cluster.galera.url(node, ""))
                .collect(),
        },
        Side {
            url: single_db.clone(),
            pool_urls: vec![single_db.clone(); Galera::NODES],
            pids: machine_mariadbd().into_iter().collect(),
            nodes: Vec::new(),
        },
    ];
    let settings = json!({
        "cluster": settings(&cluster.galera.url(0, "")).await.unwrap_or(Value::Null),
        "single": settings(&single_db).await.unwrap_or(Value::Null),
    });
    let costs: Mutex<BTreeMap<(&'static str, usize, usize), Cost>> = Mutex::new(BTreeMap::new());
    let mut results = Vec::new();
    for work in Work::chosen() {
        let labels = match work {
            Work::Batched => [BATCH_LABEL, SINGLE_BATCH],
            _ => [LABEL, SINGLE],
        };
        let labels: Vec<String> = labels
            .iter()
            .map(|label| match work {
                Work::Leases | Work::Events => format!("{label} {}", work.name()),
                _ => (*label).to_owned(),
            })
            .collect();
        let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        let all = interleaved_all(
            &label_refs,
            &concurrency,
            options,
            async |index, workers, progress| {
                let side = &sides[index];
                let before = Probe::take(side).await;
                let measured = match work {
                    Work::PerStep => throughput::measure(&side.url, workers, steps, progress).await,
                    Work::Batched => batched(&side.pool_urls, workers, steps, progress).await,
                    Work::Leases => workloads::leases(&side.url, workers, steps / 2).await,
                    Work::Events => workloads::events(&side.url, workers, steps / 4).await,
                };
                let after = Probe::take(side).await;
                // A failed round's conflicts count too (a surfaced one is
                // often why it failed); its items do not.
                let mut cost = before.cost(&after, measured.as_ref().map_or(0, |m| m.steps));
                cost.failed_rounds = u64::from(measured.is_err());
                costs
                    .lock()
                    .expect("not poisoned")
                    .entry((work.name(), index, workers))
                    .or_default()
                    .add(&cost);
                measured
            },
        )
        .await;
        results.push((work, all));
    }
    let costs = costs.into_inner().expect("not poisoned");
    let (peaks, fired) = watchdog.stop();
    drop(cluster);
    let mut found = assemble(results, &costs, steps, &settings);
    found.lines.push(format!(
        "galera: the nodes' peak resident memory {peaks:?} MB (limit {} MB each)",
        NODE_RSS_LIMIT >> 20
    ));
    found.json["peak_rss_mb"] = json!(peaks);
    if let Some(why) = fired {
        found.lines.push(format!("galera: {why}"));
        found.json["killed"] = json!(why);
    }
    Ok(found)
}

/// The columns, pairs, JSON and lines of the section's results.
fn assemble(
    results: Vec<(Work, Vec<Result<Vec<Rounds>>>)>,
    costs: &BTreeMap<(&'static str, usize, usize), Cost>,
    steps: usize,
    settings: &Value,
) -> Found {
    let mut columns = vec![
        Column::rounds(LABEL, Ok(Vec::new())),
        Column::rounds(SINGLE, Ok(Vec::new())),
    ];
    let mut batch_columns = Vec::new();
    let mut pairs = Vec::new();
    let mut workload_pairs = Vec::new();
    for (work, all) in results {
        let [cluster, single]: [Result<Vec<Rounds>>; 2] =
            all.try_into().unwrap_or_else(|_| unreachable!("two sides"));
        match work {
            Work::PerStep => {
                columns[0].throughput = cluster;
                columns[1].throughput = single;
                pairs.push((LABEL.to_owned(), SINGLE.to_owned()));
            }
            Work::Batched => {
                batch_columns.push(Column::rounds(BATCH_LABEL, cluster));
                batch_columns.push(Column::rounds(SINGLE_BATCH, single));
                pairs.push((BATCH_LABEL.to_owned(), SINGLE_BATCH.to_owned()));
            }
            Work::Leases | Work::Events => {
                let title = work.title().unwrap_or_else(|| unreachable!("a workload"));
                columns[0].workloads.push(Workload {
                    title,
                    rounds: cluster,
                });
                columns[1].workloads.push(Workload {
                    title,
                    rounds: single,
                });
                workload_pairs.push((LABEL.to_owned(), SINGLE.to_owned(), title));
            }
        }
    }
    columns.extend(batch_columns);
    let mut lines = Vec::new();
    let mut rounds_json = Vec::new();
    for ((work, index, workers), cost) in costs {
        let side = if *index == 0 { "cluster" } else { "single" };
        let mut entry = cost.to_json();
        entry["work"] = json!(work);
        entry["side"] = json!(side);
        entry["workers"] = json!(workers);
        rounds_json.push(entry);
    }
    for work in Work::ALL {
        let workers: Vec<usize> = costs
            .keys()
            .filter(|(w, _, _)| *w == work.name())
            .map(|(_, _, n)| *n)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for n in workers {
            let (Some(cluster), single) = (
                costs.get(&(work.name(), 0, n)),
                costs.get(&(work.name(), 1, n)),
            ) else {
                continue;
            };
            lines.push(cost_line(work, n, cluster, single));
        }
    }
    let json = json!({
        "nodes": Galera::NODES,
        "steps": steps,
        "settings": settings,
        "costs": rounds_json,
    });
    Found {
        columns,
        pairs,
        workload_pairs,
        json,
        lines,
    }
}

/// One line of what `work` at `workers` cost on the cluster, beside the
/// single server's.
fn cost_line(work: Work, workers: usize, cluster: &Cost, single: Option<&Cost>) -> String {
    let tick_ms = 1000.0 / CLOCK_TICKS_PER_SECOND as f64;
    let unit = work.unit();
    let c = |name: &str| cluster.counters.get(name).copied().unwrap_or(0);
    if cluster.items == 0 {
        return format!(
            "galera {}, {workers} workers: no round succeeded; {} conflicts retried, {} surfaced; \
             {} certification failures, {} brute-force aborts",
            work.name(),
            cluster.retried,
            cluster.surfaced,
            c("WSREP_LOCAL_CERT_FAILURES"),
            c("WSREP_LOCAL_BF_ABORTS"),
        );
    }
    let server_cpu = |cost: &Cost| cost.per_thousand(cost.server_ticks as f64 * tick_ms);
    let busy = |cost: &Cost| 100.0 * cost.machine_busy as f64 / cost.machine_total.max(1) as f64;
    let mut line = format!(
        "galera {}, {workers} workers: {} conflicts retried over {} {unit} ({:.1} per 1,000), {} \
         surfaced{}; {} certification failures, {} brute-force aborts, flow control paused {} ms \
         ({} sent) in {:.1} s; {:.1} statements and {:.2} commits per {} on the nodes; server \
         CPU {:.0} ms per 1,000 {unit} (3 nodes)",
        work.name(),
        cluster.retried,
        cluster.items,
        cluster.per_thousand(cluster.retried as f64),
        cluster.surfaced,
        match cluster.failed_rounds {
            0 => String::new(),
            n => format!(" ({n} round(s) failed, their items left out)"),
        },
        c("WSREP_LOCAL_CERT_FAILURES"),
        c("WSREP_LOCAL_BF_ABORTS"),
        c("WSREP_FLOW_CONTROL_PAUSED_NS") / 1_000_000,
        c("WSREP_FLOW_CONTROL_SENT"),
        cluster.wall.as_secs_f64(),
        c("QUESTIONS") as f64 / cluster.items.max(1) as f64,
        c("COM_COMMIT") as f64 / cluster.items.max(1) as f64,
        unit.trim_end_matches('s'),
        server_cpu(cluster),
    );
    match single.filter(|single| single.items > 0) {
        Some(single) => write!(
            line,
            " vs {:.0} (1 server, {} conflicts retried), bench CPU {:.0} vs {:.0} ms; machine \
             busy {:.0}% vs {:.0}%",
            server_cpu(single),
            single.retried,
            cluster.per_thousand(cluster.bench_ticks as f64 * tick_ms),
            single.per_thousand(single.bench_ticks as f64 * tick_ms),
            busy(cluster),
            busy(single),
        ),
        None => write!(line, "; machine busy {:.0}%", busy(cluster)),
    }
    .unwrap_or_else(|_| unreachable!("writing to a String"));
    line
}

/// One row of the settings' query.
#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    value: String,
}

/// The server settings that weigh on a commit, as JSON.
async fn settings(url: &str) -> Result<Value> {
    let mut conn = AsyncMysqlConnection::establish(url).await?;
    let rows: Vec<Setting> = diesel::sql_query(
        "SELECT VARIABLE_NAME AS name, VARIABLE_VALUE AS value \
         FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN \
         ('INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'INNODB_BUFFER_POOL_SIZE', 'LOG_BIN', \
          'SYNC_BINLOG', 'WSREP_ON', 'WSREP_SYNC_WAIT', 'WSREP_SLAVE_THREADS', 'VERSION')",
    )
    .load(&mut conn)
    .await?;
    Ok(Value::Object(
        rows.into_iter()
            .map(|row| (row.name.to_ascii_lowercase(), json!(row.value)))
            .collect(),
    ))
}

/// Batched mode over several pools: creates `steps` fresh steps (through
/// the first URL), then times one `WorkerPool` per URL of `urls` (each on
/// a store of two connections there), `workers` handler tasks split
/// between them, until every step is claimed and succeeded; on a
/// terminal, `progress` labels a line that counts the steps done. Each
/// pool is configured as [`super::batched`]'s single one.
async fn batched(
    urls: &[String],
    workers: usize,
    steps: usize,
    progress: &str,
) -> Result<Throughput> {
    let first = urls.first().context("batched mode needs a URL")?;
    {
        let config = StoreConfig::default()
            .pool_size(workers.clamp(1, 8))
            .acquire_timeout(Duration::from_secs(30));
        let setup = Arc::new(
            DieselStore::open(first, config)
                .await
                .context("cannot open the store")?,
        );
        create_steps_for(&setup, steps, workers, BATCH_FUNCTION).await?;
    }
    let pools = urls.len().min(workers.max(1));
    let mut stores = Vec::with_capacity(pools);
    for url in &urls[..pools] {
        stores.push(batched::open_pool_store(url, None).await?);
    }
    let done = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(Notify::new());
    let started = Instant::now();
    let ticker = show_progress(progress.to_owned(), Arc::clone(&done), steps);
    let mut handles = Vec::with_capacity(pools);
    for (i, store) in stores.into_iter().enumerate() {
        let handlers = (workers / pools + usize::from(i < workers % pools)).max(1);
        let config = batched::pool_config(handlers, BATCH_FUNCTION);
        let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
        handles.push(
            WorkerPool::new(store, move |step: Step| {
                let (done, all_done) = (Arc::clone(&done), Arc::clone(&all_done));
                async move {
                    if done.fetch_add(1, Ordering::Relaxed) + 1 == steps {
                        all_done.notify_one();
                    }
                    Completion::Succeeded(json!({ "attempt": step.attempt }))
                }
            })
            .with_config(config)
            .spawn(),
        );
    }
    if steps > 0 {
        all_done.notified().await;
    }
    // Shutdown waits for each pool's last flush: the clock stops once every
    // step is durable.
    let mut claimed = 0;
    let mut succeeded = 0;
    let mut errors = Vec::new();
    for handle in handles {
        let stats = handle.shutdown().await;
        claimed += stats.claimed;
        succeeded += stats.succeeded;
        if stats.claim_errors + stats.commit_errors > 0 {
            errors.push(format!("{stats:?}"));
        }
    }
    let elapsed = started.elapsed();
    if let Some(ticker) = ticker {
        ticker.abort();
        eprint!("\r{:60}\r", "");
    }
    ensure!(
        errors.is_empty(),
        "a pool's claims or flushes failed: {}",
        errors.join("; ")
    );
    ensure!(
        claimed == steps as u64 && succeeded == steps as u64,
        "the pools claimed {claimed} and succeeded {succeeded} of {steps} fresh steps"
    );
    Ok(Throughput { steps, elapsed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_per_thousand_and_sums() {
        let mut all = Cost::default();
        let one = Cost {
            items: 500,
            retried: 30,
            surfaced: 0,
            counters: BTreeMap::from([("WSREP_LOCAL_CERT_FAILURES", 4)]),
            ..Cost::default()
        };
        all.add(&one);
        all.add(&one);
        assert_eq!((all.items, all.retried), (1000, 60));
        assert!((all.per_thousand(all.retried as f64) - 60.0).abs() < 1e-9);
        assert_eq!(all.counters["WSREP_LOCAL_CERT_FAILURES"], 8);
        let json = all.to_json();
        assert_eq!(json["conflicts_retried"], json!(60));
        assert_eq!(json["node_counters"]["wsrep_local_cert_failures"], json!(8));
    }

    #[test]
    fn this_process_has_cpu_time_memory_and_the_machine_ticks() {
        assert!(cpu_ticks(std::process::id()).is_some());
        let rss = rss_bytes(std::process::id()).expect("VmRSS");
        assert!(rss > 1 << 20 && rss < NODE_RSS_LIMIT, "{rss}");
        let (busy, total) = machine_ticks().expect("/proc/stat");
        assert!(busy <= total && total > 0);
    }
}
