//! flowstate on a 3-node MariaDB Galera cluster (issue 35): workers on all
//! three nodes race `claim_run` for the same runs, and every fencing token
//! is issued once and no run has two holders, read back with SQL; four
//! migrators started together on the cluster's nodes apply the schema
//! once. Row locks are local to a node on Galera, so this is what the
//! claims' guarded `UPDATE`s are for (store-diesel's `mysql/leases.rs`).
//! Needs `galera-4` (`.ci/run` installs it); about 30 s here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{NewRun, Release, RunId};
use flowstate_faults::cluster::Galera;
use flowstate_faults::sql::RawConn;
use flowstate_store_diesel::{DieselStore, StoreConfig, conflict_retries, migrate};

/// Runs the workers race for, per round.
const RUNS: usize = 60;
/// Workers per node.
const WORKERS_PER_NODE: usize = 3;
/// Rounds: in each, every run is claimed once and released after.
const ROUNDS: u64 = 3;

/// `future`, or a panic naming `what` if it takes longer than `limit`.
async fn bounded<T>(what: &str, limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {limit:?}"))
}

/// A connection to `url` whose reads wait for every write the cluster
/// committed before them.
async fn synced(url: &str) -> RawConn {
    let mut conn = RawConn::connect(url).await.expect("connect to a node");
    conn.run_sql("SET SESSION wsrep_sync_wait = 1")
        .await
        .expect("wsrep_sync_wait");
    conn
}

/// One lease a worker was answered: run, token, worker.
type Answer = (RunId, u64, String);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_on_three_nodes_are_issued_once_and_four_migrators_migrate_once() {
    let started = Instant::now();
    let cluster = Galera::start().await.expect("a 3-node Galera cluster");
    println!("galera: 3 nodes Synced in {:?}", cluster.started_in());
    let urls = cluster.create_database("fs").await.expect("a database");

    // Four migrators at once, on nodes 0, 1, 2 and 0.
    let at = Instant::now();
    let migrators: Vec<_> = (0..4)
        .map(|i| {
            let url = urls[i % Galera::NODES].clone();
            tokio::spawn(async move {
                let at = Instant::now();
                let up = migrate::up(&url).await;
                (up, at.elapsed())
            })
        })
        .collect();
    let mut ups = Vec::new();
    let mut took = Vec::new();
    for migrator in migrators {
        let (up, elapsed) = bounded("a migrator", Duration::from_secs(60), migrator)
            .await
            .expect("a migrator task");
        ups.push(up);
        took.push(elapsed);
    }
    let mut applied = Vec::new();
    for (i, up) in ups.into_iter().enumerate() {
        applied.extend(up.unwrap_or_else(|err| panic!("migrator {i} failed: {err:?}")));
    }
    let versions = migrate::status(&urls[1]).await.expect("status");
    assert_eq!(
        applied.len(),
        versions.len(),
        "each version applied once: {applied:?}"
    );
    let mut check = synced(&urls[2]).await;
    let rows = check
        .count("SELECT COUNT(*) AS n FROM __diesel_schema_migrations")
        .await
        .expect("count versions");
    assert_eq!(rows, versions.len() as u64);
    println!(
        "galera: 4 concurrent migrators on 3 nodes in {:?} (each: {took:?})",
        at.elapsed()
    );

    let mut stores: Vec<Arc<DieselStore>> = Vec::new();
    for url in &urls {
        stores.push(Arc::new(
            DieselStore::open(url, StoreConfig::default().pool_size(WORKERS_PER_NODE))
                .await
                .expect("a store on a node"),
        ));
    }
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let run = stores[i % Galera::NODES]
            .create_run(NewRun::new("wf", serde_json::json!({ "i": i })))
            .await
            .expect("create a run")
            .record;
        runs.push(run.id);
    }

    let (retries_before, surfaced_before) = conflict_retries();
    let race = Instant::now();
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    for round in 1..=ROUNDS {
        let before = answers.lock().unwrap().len();
        let mut tasks = Vec::new();
        for (node, store) in stores.iter().enumerate() {
            for w in 0..WORKERS_PER_NODE {
                let (store, answers) = (store.clone(), answers.clone());
                let worker = format!("n{node}w{w}");
                tasks.push(tokio::spawn(async move {
                    let mut held = Vec::new();
                    let mut empty = 0;
                    while empty < 3 {
                        match store.claim_run(&worker, Duration::from_secs(120)).await {
                            Ok(Some(lease)) => {
                                empty = 0;
                                answers.lock().unwrap().push((
                                    lease.run.id,
                                    lease.token,
                                    worker.clone(),
                                ));
                                held.push((lease.run.id, lease.token));
                            }
                            Ok(None) => {
                                empty += 1;
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            Err(err) => panic!("{worker}: claim_run failed: {err:?}"),
                        }
                    }
                    held
                }));
            }
        }
        let mut held = Vec::new();
        for task in tasks {
            held.extend(
                bounded("a round", Duration::from_secs(60), task)
                    .await
                    .expect("a worker"),
            );
        }
        assert_eq!(
            answers.lock().unwrap().len() - before,
            RUNS,
            "round {round}: every run leased once"
        );

        // What the database says: each run held by the worker answered
        // its lease, with its token, on every node.
        let mine: HashMap<RunId, (u64, String)> = answers.lock().unwrap()[before..]
            .iter()
            .map(|(run, token, worker)| (*run, (*token, worker.clone())))
            .collect();
        assert_eq!(mine.len(), RUNS, "round {round}: no run answered twice");
        for url in &urls {
            let mut conn = synced(url).await;
            for (run, (token, worker)) in &mine {
                let n = conn
                    .count(&format!(
                        "SELECT COUNT(*) AS n FROM flowstate_runs WHERE id = '{run}' \
                         AND lease_owner = '{worker}' AND lease_token = {token}"
                    ))
                    .await
                    .expect("read a lease");
                assert_eq!(
                    n, 1,
                    "round {round}: run {run} is not held by {worker} with token {token}"
                );
            }
        }
        // Free them all for the next round, each through a node of its own.
        for (i, (run, token)) in held.into_iter().enumerate() {
            stores[i % Galera::NODES]
                .release(run, token, Release::Yield)
                .await
                .expect("release a lease");
        }
    }
    let race = race.elapsed();

    let answers = answers.lock().unwrap().clone();
    let tokens: HashSet<(RunId, u64)> = answers
        .iter()
        .map(|(run, token, _)| (*run, *token))
        .collect();
    assert_eq!(tokens.len(), answers.len(), "a fencing token issued twice");
    for run in &runs {
        let mut issued: Vec<u64> = answers
            .iter()
            .filter(|(r, _, _)| r == run)
            .map(|(_, token, _)| *token)
            .collect();
        issued.sort_unstable();
        assert_eq!(
            issued,
            (1..=ROUNDS).collect::<Vec<_>>(),
            "run {run}'s tokens"
        );
    }
    let (retries, surfaced) = conflict_retries();
    println!(
        "galera: {} leases by {} workers on 3 nodes in {race:?}, every token once; \
         conflicts retried {}, surfaced {}; whole test {:?}",
        answers.len(),
        WORKERS_PER_NODE * Galera::NODES,
        retries - retries_before,
        surfaced - surfaced_before,
        started.elapsed()
    );
    assert_eq!(surfaced, surfaced_before, "a conflict reached a caller");
}
