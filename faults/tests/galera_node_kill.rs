//! A Galera node lost under load (issue 35): three nodes, workers on each
//! (a store per node whose URL lists every node, its own first), per-step
//! claims and completions, batched claims and `claim_run` leases over the
//! same work; one node taken away mid-load, two ways ([`Fault`]):
//! SIGKILLed and rejoined (IST), or drained by its operator
//! (`wsrep_reject_queries = ALL`: it answers every statement but `SET` and
//! `SHOW` with 1047, "WSREP has not yet prepared node for application
//! use") and then let back. Then one recovery pass past every deadline and
//! the drain (as every step scenario ends, `faults/src/recovery.rs`), and
//! the verdict read with SQL on a node that stayed: every step executed
//! exactly once (the ledger, primary key `(step, attempt)`), none lost,
//! none stuck, every fencing token issued once, no conflict surfaced to a
//! caller. Prints the table row (scenario, load, fault, lost, doubled,
//! stuck, conflicts retried, surfaced, time to heal: how long the lost
//! node's workers went without a successful call).
//!
//! The per-step stores keep to their own node while it answers
//! (`load_balance_hosts=disable`), so "the lost node's workers" are the
//! workers of one store; the batch and lease stores spread over the nodes
//! (the default). Needs `galera-4`; about 45 s a scenario here.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flowstate_core::ports::{BatchStepStore as _, RunLeaseStore as _, RunStore as _};
use flowstate_core::{BatchClaim, Completion, Release, RunId};
use flowstate_faults::cluster::Galera;
use flowstate_faults::ledger::{self, Entry, Ledger};
use flowstate_faults::load::{Crew, CrewOptions, CrewReport, FUNCTION, StepRef, result_of, seed};
use flowstate_faults::recovery::{recover_and_drain, store_past_deadlines};
use flowstate_faults::sql::RawConn;
use flowstate_faults::{Heal, Scenario, Verdict};
use flowstate_store_diesel::{
    Dialect, DieselStore, StoreConfig, conflict_retries, not_ready_retries,
};

/// Runs seeded, of [`STEPS_PER_RUN`] steps each.
const RUNS: usize = 80;
/// Steps per run.
const STEPS_PER_RUN: usize = 10;
/// Per-step workers per node.
const WORKERS_PER_NODE: usize = 3;
/// The node taken away.
const VICTIM: usize = 2;
/// The node the ledger, the recovery and the verdict use (never taken).
const WITNESS: usize = 0;
/// How long a drained node refuses statements.
const DRAINED_FOR: Duration = Duration::from_secs(4);

/// How the victim node is taken away mid-load.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL, then a rejoin by IST.
    Kill,
    /// `SET GLOBAL wsrep_reject_queries = ALL` for [`DRAINED_FOR`], then
    /// `NONE`: the node stays in the cluster, applies every write set and
    /// keeps its client connections open, but refuses their statements
    /// with 1047.
    Drain,
}

impl Fault {
    /// The scenario's name and its fault column.
    fn describe(self) -> (&'static str, String) {
        match self {
            Self::Kill => (
                "Galera node killed under load",
                format!("SIGKILL of node {VICTIM}, rejoined by IST"),
            ),
            Self::Drain => (
                "Galera node drained under load",
                format!(
                    "node {VICTIM} answers 1047 (wsrep_reject_queries = ALL) for {} s, then NONE",
                    DRAINED_FOR.as_secs()
                ),
            ),
        }
    }
}

/// `future`, or a panic naming `what` if it takes longer than `limit`.
async fn bounded<T>(what: &str, limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {limit:?}"))
}

/// A store on `url` with a pool of `size`.
async fn store(url: &str, size: usize) -> Arc<DieselStore> {
    let config = StoreConfig::default()
        .pool_size(size)
        .acquire_timeout(Duration::from_secs(3));
    Arc::new(
        bounded(
            "open a store",
            Duration::from_secs(20),
            DieselStore::open(url, config),
        )
        .await
        .unwrap_or_else(|err| panic!("open {url}: {err}")),
    )
}

/// Waits until node `url`'s session has applied every write the cluster
/// committed before now (`wsrep_sync_wait`).
async fn synced(url: &str) {
    let mut conn = RawConn::connect(url).await.expect("connect to a node");
    conn.run_sql("SET SESSION wsrep_sync_wait = 15")
        .await
        .expect("wsrep_sync_wait");
    conn.count("SELECT COUNT(*) AS n FROM flowstate_steps")
        .await
        .expect("a synced read");
}

/// What the side workers (batches, leases) saw.
#[derive(Debug, Default)]
struct Side {
    /// Steps a batch worker completed.
    batched: AtomicU64,
    /// Leases answered.
    leases: AtomicU64,
    /// Calls that failed retryably (tried again).
    retried: AtomicU64,
    /// Calls that failed otherwise, or completions refused: each wrong.
    wrong: AtomicU64,
    /// Executions the ledger refused as doubles.
    doubles: AtomicU64,
    /// The first wrong answer.
    sample: Mutex<Option<String>>,
}

impl Side {
    fn wrong(&self, what: String) {
        self.wrong.fetch_add(1, Ordering::SeqCst);
        self.sample.lock().unwrap().get_or_insert(what);
    }
}

/// A batch worker: claims up to 2 steps at a time, records each in the
/// ledger, holds them a moment and completes them in one batch, until
/// `stop`.
async fn batch_worker(
    name: String,
    store: Arc<DieselStore>,
    ledger: Arc<Ledger>,
    slot: usize,
    side: Arc<Side>,
    stop: Arc<AtomicBool>,
) {
    let claim = BatchClaim {
        limit: 2,
        function: Some(FUNCTION.to_owned()),
    };
    while !stop.load(Ordering::SeqCst) {
        let steps = match store.claim_batch(&claim).await {
            Ok(steps) => steps,
            Err(err) if err.is_retryable() => {
                side.retried.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(err) => {
                side.wrong(format!("{name}: claim_batch: {err}"));
                continue;
            }
        };
        if steps.is_empty() {
            tokio::time::sleep(Duration::from_millis(30)).await;
            continue;
        }
        let mut done = Vec::new();
        for step in &steps {
            match ledger.record(slot, step.id, step.attempt, &name).await {
                Ok(Entry::First) => {}
                Ok(Entry::Double) => {
                    side.doubles.fetch_add(1, Ordering::SeqCst);
                }
                Err(err) => side.wrong(format!("{name}: ledger: {err:#}")),
            }
            done.push((step.claim(), Completion::Succeeded(result_of(&name))));
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let started = Instant::now();
        loop {
            match store.complete_batch(done.clone()).await {
                Ok(results) => {
                    for result in results {
                        match result {
                            Ok(()) => {
                                side.batched.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(err) => side.wrong(format!("{name}: a completion: {err}")),
                        }
                    }
                    break;
                }
                Err(err) if err.is_retryable() && started.elapsed() < Duration::from_secs(20) => {
                    side.retried.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(err) => {
                    side.wrong(format!("{name}: complete_batch: {err}"));
                    break;
                }
            }
        }
    }
}

/// A lease worker: leases a run, notes its token, yields it, until
/// `stop`.
async fn lease_worker(
    name: String,
    store: Arc<DieselStore>,
    answers: Arc<Mutex<Vec<(RunId, u64)>>>,
    side: Arc<Side>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let lease = match store.claim_run(&name, Duration::from_secs(30)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                tokio::time::sleep(Duration::from_millis(30)).await;
                continue;
            }
            Err(err) if err.is_retryable() => {
                side.retried.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(err) => {
                side.wrong(format!("{name}: claim_run: {err}"));
                continue;
            }
        };
        side.leases.fetch_add(1, Ordering::SeqCst);
        answers.lock().unwrap().push((lease.run.id, lease.token));
        tokio::time::sleep(Duration::from_millis(10)).await;
        // A release lost to the node's death leaves the lease to run out:
        // the run is leased by nobody else meanwhile, nothing is doubled.
        let _ = store
            .release(lease.run.id, lease.token, Release::Yield)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_killed_under_load_loses_and_doubles_nothing() {
    a_node_lost_under_load(Fault::Kill).await;
}

/// The 1047 path: a node that refuses statements (an operator draining it)
/// is left by every store within seconds, each refused call runs again on
/// another node, and the node is taken back once it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_drained_under_load_loses_and_doubles_nothing() {
    a_node_lost_under_load(Fault::Drain).await;
}

/// One scenario at a time: each starts a cluster of its own, and two at
/// once on two cores would measure each other.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The scenario, with the victim node taken away by `fault`.
async fn a_node_lost_under_load(fault: Fault) {
    let _alone = ONE_CLUSTER.lock().await;
    let started = Instant::now();
    let mut cluster = Galera::start().await.expect("a 3-node Galera cluster");
    println!("galera: 3 nodes Synced in {:?}", cluster.started_in());
    let urls = cluster.create_database("fs").await.expect("a database");
    flowstate_store_diesel::migrate::up(&urls[WITNESS])
        .await
        .expect("migrate");
    ledger::create(&urls[WITNESS]).await.expect("the ledger");

    // The per-step stores: each node's own first, kept to while it answers.
    let mut own = Vec::new();
    for node in 0..Galera::NODES {
        own.push(
            store(
                &cluster.nodes_url(node, "fs", "load_balance_hosts=disable"),
                4,
            )
            .await,
        );
    }
    let steps: Arc<[StepRef]> = bounded(
        "seeding",
        Duration::from_secs(60),
        seed(&own[WITNESS], RUNS, STEPS_PER_RUN),
    )
    .await
    .expect("seed the steps")
    .into();
    synced(&urls[VICTIM]).await;
    let ledger = Arc::new(Ledger::new(&urls[WITNESS], 8));
    let seeded_in = started.elapsed();

    let (retries_before, surfaced_before) = conflict_retries();
    let not_ready_before = not_ready_retries();
    let options = CrewOptions {
        workers: WORKERS_PER_NODE,
        hold: Duration::from_millis(100),
        patience: Duration::from_secs(30),
        call_timeout: Duration::from_secs(20),
        deadline: Duration::from_secs(60),
        ..CrewOptions::default()
    };
    // Every crew works the whole list: each step is offered to workers on
    // all three nodes.
    let crews: Vec<Crew> = (0..Galera::NODES)
        .map(|node| Crew::start(&format!("n{node}"), &own[node], &ledger, &steps, options))
        .collect();

    // Batches and leases on stores spread over the nodes.
    let stop = Arc::new(AtomicBool::new(false));
    let side = Arc::new(Side::default());
    let answers: Arc<Mutex<Vec<(RunId, u64)>>> = Arc::default();
    let mut side_tasks = Vec::new();
    for node in 0..Galera::NODES {
        let spread = store(&cluster.nodes_url(node, "fs", ""), 3).await;
        side_tasks.push(tokio::spawn(batch_worker(
            format!("b{node}"),
            Arc::clone(&spread),
            Arc::clone(&ledger),
            WORKERS_PER_NODE + node,
            Arc::clone(&side),
            Arc::clone(&stop),
        )));
        side_tasks.push(tokio::spawn(lease_worker(
            format!("l{node}"),
            spread,
            Arc::clone(&answers),
            Arc::clone(&side),
            Arc::clone(&stop),
        )));
    }

    let fault_at = (RUNS * STEPS_PER_RUN / 5) as u64;
    bounded("the load under way", Duration::from_secs(30), async {
        while crews.iter().map(|c| c.progress.completed()).sum::<u64>() < fault_at {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let done_before = crews.iter().map(|c| c.progress.completed()).sum::<u64>();
    let mut drainer = match fault {
        Fault::Kill => {
            cluster.kill(VICTIM).await;
            None
        }
        Fault::Drain => {
            let mut conn = RawConn::connect(&urls[VICTIM])
                .await
                .expect("connect to the node drained");
            conn.run_sql("SET GLOBAL wsrep_reject_queries = ALL")
                .await
                .expect("drain the node");
            Some(conn)
        }
    };
    // Time to heal counts from the fault, for every crew: the victim
    // node's workers move to another node; everyone waits while the
    // others find the node gone (Galera's suspect timeout).
    for crew in &crews {
        crew.progress.fault_over();
    }
    let faulted = Instant::now();
    let taken = if let Some(conn) = drainer.as_mut() {
        tokio::time::sleep(DRAINED_FOR).await;
        conn.run_sql("SET GLOBAL wsrep_reject_queries = NONE")
            .await
            .expect("let the node serve again");
        format!("drained for {DRAINED_FOR:?}")
    } else {
        let left_in = bounded(
            "the others to see it leave",
            Duration::from_secs(30),
            cluster.wait_synced(Duration::from_secs(25)),
        )
        .await
        .expect("two nodes synced");
        let rejoined_in = bounded(
            "the rejoin",
            Duration::from_secs(70),
            cluster.rejoin(VICTIM),
        )
        .await
        .unwrap_or_else(|err| panic!("rejoin: {err:#}\n{}", cluster.log_tail(VICTIM, 20)));
        format!("the others saw it leave in {left_in:?}; rejoined in {rejoined_in:?}")
    };
    drop(drainer);
    let back_after = faulted.elapsed();

    // The victim node's store comes back to it (listed first, kept to
    // while it answers): its connections show on the node again.
    let back = Instant::now();
    let mut on_victim = 0;
    let probe_run = steps[0].run;
    while on_victim == 0 {
        let calls = (0..4).map(|_| own[VICTIM].get_run(probe_run));
        for answer in futures_util::future::join_all(calls).await {
            answer.expect("a read on the victim node's store");
        }
        let mut conn = RawConn::connect(&urls[VICTIM])
            .await
            .expect("the victim node, back");
        // Its sessions in the database, this one excluded.
        on_victim = conn
            .count(
                "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST \
                 WHERE DB = 'fs' AND ID <> CONNECTION_ID()",
            )
            .await
            .expect("the processlist");
        assert!(
            back.elapsed() < Duration::from_secs(15),
            "the victim node's store did not come back to it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let returned_in = back.elapsed();

    let mut reports: Vec<CrewReport> = Vec::new();
    for crew in crews {
        reports.push(
            bounded("a crew", Duration::from_secs(90), crew.join())
                .await
                .expect("the crew's workers"),
        );
    }
    stop.store(true, Ordering::SeqCst);
    for task in side_tasks {
        bounded("a side worker", Duration::from_secs(30), task)
            .await
            .expect("a side worker");
    }
    let (retries, surfaced) = conflict_retries();
    let (retried, surfaced) = (retries - retries_before, surfaced - surfaced_before);
    let not_ready = not_ready_retries() - not_ready_before;

    // Every node has applied everything before the witness judges.
    for url in &urls {
        bounded("a synced read", Duration::from_secs(20), synced(url)).await;
    }
    let past = store_past_deadlines(&urls[WITNESS])
        .await
        .expect("the recovery store");
    let recovery = bounded(
        "the recovery pass",
        Duration::from_secs(60),
        recover_and_drain(past, Arc::clone(&ledger), &steps),
    )
    .await
    .expect("the recovery pass");
    let (name, fault_column) = fault.describe();
    let mut scenario = Scenario::new(
        name,
        Dialect::Mysql,
        format!(
            "{} steps, {WORKERS_PER_NODE} per-step workers + 1 batch + 1 lease worker per node, 3 nodes",
            RUNS * STEPS_PER_RUN
        ),
        fault_column,
    );
    let victim = &reports[VICTIM];
    Verdict::judge(&mut scenario, &urls[WITNESS], Some(victim), &recovery)
        .await
        .expect("read the verdict");
    let mut heals = Vec::new();
    for (node, report) in reports.iter().enumerate() {
        if node != VICTIM {
            scenario.wrong +=
                report.total.not_retryable + report.total.hung + report.total.claims_lost;
        }
        scenario.note(format!("node {node}'s crew: {}", report.summary()));
        heals.push(format!("node {node}: {}", report.heal()));
    }
    scenario.wrong += side.wrong.load(Ordering::SeqCst);
    scenario.doubled +=
        side.doubles.load(Ordering::SeqCst) + reports.iter().map(|r| r.total.doubles).sum::<u64>();

    // Every fencing token once, and every run's token at least as high as
    // its leases answered.
    let answers = answers.lock().unwrap().clone();
    let distinct: HashSet<(RunId, u64)> = answers.iter().copied().collect();
    let tokens_twice = (answers.len() - distinct.len()) as u64;
    scenario.doubled += tokens_twice;

    let heal = scenario.heal;
    let row = format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        scenario.name,
        scenario.load,
        scenario.fault,
        scenario.lost,
        scenario.doubled,
        scenario.stuck,
        retried,
        surfaced,
        heal
    );
    println!(
        "| scenario | load | fault | lost | doubled | stuck | conflicts retried | surfaced | time to heal |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n{row}"
    );
    println!(
        "{name}: seeded in {seeded_in:?}; {done_before} steps done before the fault; \
         {taken} ({back_after:?} after the fault); the victim node's store back on it \
         {returned_in:?} after; time to heal by crew, from the fault: {}; batches completed {}, \
         leases {} ({} tokens twice), side calls retried {}; {not_ready} calls run again on \
         another node after a 1047; wrong {}{}; whole test {:?}",
        heals.join(", "),
        side.batched.load(Ordering::SeqCst),
        side.leases.load(Ordering::SeqCst),
        tokens_twice,
        side.retried.load(Ordering::SeqCst),
        scenario.wrong,
        side.sample
            .lock()
            .unwrap()
            .as_deref()
            .map(|s| format!(" (first: {s})"))
            .unwrap_or_default(),
        started.elapsed()
    );
    println!("note: {}", scenario.note);
    assert!(
        scenario.held(),
        "the scenario did not hold: {}",
        scenario.row()
    );
    assert_eq!(surfaced, 0, "a conflict reached a caller");
    if matches!(fault, Fault::Drain) {
        assert!(
            not_ready > 0,
            "no call met the drained node's 1047: the scenario did not test the path"
        );
    }
    assert!(
        matches!(heal, Heal::Healed(took) if took < Duration::from_secs(10)),
        "the victim node's workers were not served again within 10 s: {heal}"
    );
    assert!(side.leases.load(Ordering::SeqCst) > 0 && side.batched.load(Ordering::SeqCst) > 0);
}
