//! The pool: a bounded wait for a connection, `:memory:` on one connection,
//! and a dropped call that still leaves its connection healthy.

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewRun, StepStatus};
use flowstate_store_diesel::sqlite::SqliteStore;
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;

use crate::records;
use crate::support::TestDb;

#[tokio::test]
async fn holding_the_only_connection_gives_a_pool_timeout_not_a_hang() {
    let db = TestDb::migrated().await;
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let store = db.store(config).await;
    let held = store.pool().get("test").await.unwrap();
    let started = Instant::now();
    let call = tokio::time::timeout(
        Duration::from_secs(5),
        store.create_run(NewRun::new("wf", json!(1))),
    )
    .await
    .expect("the call hung past its acquire timeout");
    let waited = started.elapsed();
    assert!(
        matches!(call, Err(Error::PoolTimeout { waited_ms: 200 })),
        "{call:?}"
    );
    assert!(call.unwrap_err().is_retryable());
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    drop(held);
    store.create_run(NewRun::new("wf", json!(1))).await.unwrap();
}

#[tokio::test]
async fn an_in_memory_store_is_one_migrated_connection() {
    let store = DieselStore::open("sqlite://:memory:", StoreConfig::default().pool_size(8))
        .await
        .unwrap();
    let DieselStore::Sqlite(sqlite) = &store else {
        panic!("not sqlite");
    };
    let held = sqlite.pool().get("test").await.unwrap();
    let timed_out =
        tokio::time::timeout(Duration::from_millis(300), sqlite.pool().get("test")).await;
    assert!(
        timed_out.is_err(),
        "a second connection to :memory: would be another database"
    );
    drop(held);
    let run = records::run(&store, json!(1)).await;
    records::step(&store, run.id, "a", json!(1)).await;
    let claimed = store.claim_step(run.id, "a", "f").await.unwrap().unwrap();
    assert_eq!(claimed.status, StepStatus::Running);
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
}

#[tokio::test]
async fn opening_creates_the_parent_directory() {
    let db = TestDb::empty();
    let nested = db.path.with_extension("d").join("deeper").join("flow.db");
    let store = SqliteStore::connect(&nested.display().to_string(), StoreConfig::default())
        .await
        .unwrap();
    store.batch_execute("SELECT 1").await.unwrap();
    assert!(nested.exists());
    drop(store);
    std::fs::remove_dir_all(db.path.with_extension("d")).unwrap();
}

/// A claim whose future is dropped while it waits on the write lock still
/// runs to its COMMIT, and its connection comes back to the pool healthy
/// (diesel-async's recycle check would panic on a connection still shared
/// with a blocking thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_finishes_its_transaction_and_frees_its_connection() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default().pool_size(1)).await;
    let run = records::run(&store, json!(1)).await;
    let step = records::step(&store, run.id, "a", json!(1)).await;

    let mut locker = SqliteConnection::establish(&db.target()).unwrap();
    locker.batch_execute("BEGIN IMMEDIATE").unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(200),
        store.claim_step(run.id, "a", "f"),
    )
    .await;
    assert!(
        dropped.is_err(),
        "the claim cannot finish while the write lock is held"
    );
    locker.batch_execute("COMMIT").unwrap();

    // The only connection is handed back once the dropped claim committed.
    let seen = tokio::time::timeout(Duration::from_secs(10), store.get_step(step.id))
        .await
        .expect("the connection never came back")
        .unwrap();
    assert_eq!(seen.status, StepStatus::Running);
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
    assert!(store.claim_step(run.id, "a", "f").await.unwrap().is_none());
}
