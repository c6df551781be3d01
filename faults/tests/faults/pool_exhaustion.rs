//! Pool exhaustion: a store with a pool of 2 and an acquire wait of
//! 100 ms, 16 concurrent workers claiming and completing 160 steps, while
//! a hog holds both connections for 400 ms. Every call answers `Ok` or the
//! typed `PoolTimeout` (retried), none hangs, no work is lost. Time to heal
//! runs from the hog letting go to the first call that succeeded on every
//! worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_faults::load::CrewOptions;
use flowstate_faults::{Scenario, SharedDb};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

use crate::support::{StepRun, bounded};

/// How long the hog holds the whole pool.
const HOG: Duration = Duration::from_millis(400);

async fn pool_exhaustion(dialect: Dialect) {
    let db = SharedDb::migrated(dialect).await.expect("a database");
    let config = StoreConfig::default()
        .pool_size(2)
        .acquire_timeout(Duration::from_millis(100));
    let store = Arc::new(DieselStore::open(&db.url, config).await.expect("a store"));
    let options = CrewOptions {
        workers: 16,
        hold: Duration::from_millis(2),
        call_timeout: Duration::from_secs(5),
        ..CrewOptions::default()
    };
    let run = StepRun::start(Arc::clone(&store), &db.url, 10, 16, options).await;
    bounded(
        "40 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(40, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    // The hog takes both connections (queueing like any caller), holds
    // them, and lets go.
    let started = Instant::now();
    let mut held = Vec::new();
    while held.len() < 2 {
        match store.reserve_connection().await {
            Ok(conn) => held.push(conn),
            Err(err) if err.is_retryable() && started.elapsed() < Duration::from_secs(10) => {}
            Err(err) => panic!("the hog cannot take the pool: {err}"),
        }
    }
    tokio::time::sleep(HOG).await;
    drop(held);
    run.crew.progress.fault_over();
    let mut scenario = Scenario::new(
        "pool exhaustion",
        dialect,
        "160 steps, 16 workers, pool of 2".into(),
        format!(
            "both connections held {} ms, acquire wait 100 ms",
            HOG.as_millis()
        ),
    );
    let crew = run.finish(&mut scenario, &db.url).await;
    // Anything but Ok and PoolTimeout is a wrong answer here.
    scenario.wrong += crew.total.typed;
    assert!(
        crew.total.pool_timeouts > 0,
        "the pool was never exhausted: the scenario tested nothing ({})",
        scenario.note
    );
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_postgres() {
    pool_exhaustion(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_mariadb() {
    pool_exhaustion(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_exhaustion_sqlite() {
    pool_exhaustion(Dialect::Sqlite).await;
}
