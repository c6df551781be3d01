//! The pool on SQLite: a bounded wait for a connection, `:memory:` on one
//! migrated connection, a parent directory created on open, and a call
//! dropped mid-flight that still finishes its transaction, its connection
//! detached from the pool, which opens another.

use std::sync::Arc;
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewRun, StepStatus};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::records;
use crate::support::{TestDb, eventually};

/// A bound on a call that must answer (with an error) after the 200 ms
/// acquire timeout: a hang guard, far above any answer, not a timing check.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test]
async fn holding_the_only_connection_gives_a_pool_timeout_not_a_hang() {
    let db = TestDb::migrated().await;
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let store = db.store(config).await;
    let held = store.reserve_connection().await.unwrap();
    let call = tokio::time::timeout(HANG_GUARD, store.create_run(NewRun::new("wf", json!(1))))
        .await
        .expect("the call hung past its acquire timeout");
    match call {
        Err(err @ Error::PoolTimeout { waited_ms: 200 }) => assert!(err.is_retryable(), "{err}"),
        other => panic!("expected PoolTimeout after 200 ms, got {other:?}"),
    }
    drop(held);
    let run = records::run(&store, json!(1)).await;
    assert_eq!(
        store.get_run(run.id).await.unwrap(),
        run,
        "the released connection serves again"
    );
}

#[tokio::test]
async fn an_in_memory_store_is_one_migrated_connection() {
    let config = StoreConfig::default()
        .pool_size(8)
        .acquire_timeout(Duration::from_millis(200));
    let store = DieselStore::open("sqlite://:memory:", config)
        .await
        .unwrap();
    assert_eq!(store.dialect(), Dialect::Sqlite);
    assert_eq!(
        store.pool_size(),
        1,
        "a second connection to :memory: would be another database"
    );
    let held = store.reserve_connection().await.unwrap();
    match store.reserve_connection().await {
        Err(Error::PoolTimeout { waited_ms: 200 }) => {}
        other => panic!("a second connection was handed out: {other:?}"),
    }
    drop(held);
    // No migration was run by hand: the one connection has the schema.
    let run = records::run(&store, json!(1)).await;
    records::step(&store, run.id, "a", json!(1)).await;
    let claimed = store.claim_step(run.id, "a", "f").await.unwrap().unwrap();
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 1));
    assert!(store.claim_step(run.id, "a", "f").await.unwrap().is_none());
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
    assert_eq!(store.step_history(run.id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn opening_creates_the_parent_directory() {
    let db = TestDb::empty();
    let root = db.path.with_extension("d");
    let nested = root.join("deeper").join("flow.db");
    assert!(!root.exists());
    let url = format!("sqlite://{}", nested.display());
    // Opening an unmigrated file makes it (and its folders), then says the
    // schema is missing; migrating applies to that same real file.
    let refused = DieselStore::open(&url, StoreConfig::default()).await;
    assert!(
        matches!(
            refused,
            Err(flowstate_store_diesel::Error::NotMigrated { .. })
        ),
        "{refused:?}"
    );
    assert!(nested.is_file(), "no database file at {}", nested.display());
    let store = DieselStore::open_migrated(&url, StoreConfig::default())
        .await
        .unwrap();
    store.batch_execute("SELECT 1").await.unwrap();
    drop(store);
    assert!(
        flowstate_store_diesel::migrate::up(&url)
            .await
            .unwrap()
            .is_empty(),
        "open_migrated applied every migration"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A claim whose future is dropped while its transaction waits on the
/// write lock: the drop returns at once, the blocking work runs to its
/// COMMIT once the lock is free, and then the connection goes back to the
/// pool (of one) and serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_returns_at_once_finishes_its_transaction_and_frees_its_connection() {
    let db = TestDb::migrated().await;
    let log = StatementLog::new();
    let store = Arc::new(
        db.store(
            StoreConfig::default()
                .pool_size(1)
                .statement_log(log.clone()),
        )
        .await,
    );
    let run = records::run(&*store, json!(1)).await;
    let step = records::step(&*store, run.id, "a", json!(1)).await;

    let mut locker = SqliteConnection::establish(&db.target()).unwrap();
    locker.batch_execute("BEGIN IMMEDIATE").unwrap();
    log.clear();
    let claim = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.claim_step(run.id, "a", "f").await }
    });
    // The claim is on the blocking pool, in its BEGIN IMMEDIATE, waiting on
    // the lock the locker holds (for up to the 10 s busy timeout).
    eventually("the claim begins its transaction", || {
        let log = Arc::clone(&log);
        async move { log.statements().iter().any(|s| s.starts_with("BEGIN")) }
    })
    .await;
    // Drop the claim's future while the lock is still held: the caller
    // gets control back at once (the work goes on in the background), and
    // only then is the lock freed.
    claim.abort();
    match claim.await {
        Err(err) if err.is_cancelled() => {}
        other => panic!("the claim was not dropped mid-flight: {other:?}"),
    }
    locker.batch_execute("COMMIT").unwrap();

    // Its transaction ran to the end, and then its connection went back to
    // the pool: the next call waits for it and runs on it (no new
    // connection, so no pragmas).
    let claimed = store.get_step(step.id).await.unwrap();
    assert_eq!((claimed.status, claimed.attempt), (StepStatus::Running, 1));
    assert_eq!(
        verbs(&log.statements()),
        ["BEGIN", "UPDATE", "INSERT", "COMMIT", "SELECT"],
        "{:#?}",
        log.statements()
    );
    log.clear();
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(verbs(&log.statements()), ["SELECT"]);
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
    assert!(history[0].running_at.is_some());
    // The step was claimed once: a second claim loses.
    assert!(store.claim_step(run.id, "a", "f").await.unwrap().is_none());
}

/// The first word of each statement.
fn verbs(statements: &[String]) -> Vec<&str> {
    statements
        .iter()
        .map(|s| s.split_whitespace().next().unwrap_or_default())
        .collect()
}
