//! Healing on SQLite, which has no server to lose: a write lock held by
//! another process past the busy timeout fails a call retryably (BUSY, the
//! error table's row), and the first call after the lock is released
//! answers, with nothing written before lost. A locked database, a
//! duplicate key: the raw errors as diesel hands them over.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use flowstate_core::NewRun;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::StoreConfig;
use serde_json::json;

use crate::common::healing::{CALL_BOUND, message};
use crate::support::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_past_the_busy_timeout_fails_retryably_then_heals() {
    let db = TestDb::migrated().await;
    let config = StoreConfig::default().sqlite_busy_timeout(Duration::from_millis(100));
    let store = db.store(config).await;
    let before = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .unwrap()
        .record;

    // Another process's writer, holding the write lock.
    let mut other = SqliteConnection::establish(&db.target()).unwrap();
    other.batch_execute("BEGIN IMMEDIATE").unwrap();
    let err = store
        .create_run(NewRun::new("wf", json!(2)))
        .await
        .expect_err("the write lock is held past the busy timeout");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("database is locked"), "{err}");
    other.batch_execute("COMMIT").unwrap();

    let after = tokio::time::timeout(CALL_BOUND, store.create_run(NewRun::new("wf", json!(3))))
        .await
        .expect("the next call answers within the bound")
        .expect("the lock is free")
        .record;
    assert_eq!(store.get_run(before.id).await.unwrap(), before);
    assert_eq!(store.get_run(after.id).await.unwrap(), after);
    let mut count = SqliteConnection::establish(&db.target()).unwrap();
    let runs: i64 = diesel::RunQueryDsl::get_result(
        diesel::dsl::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
            "(SELECT COUNT(*) FROM flowstate_runs)",
        )),
        &mut count,
    )
    .unwrap();
    assert_eq!(
        runs, 2,
        "the refused write wrote nothing, the others are there"
    );
}

#[tokio::test]
async fn a_locked_database_is_retryable_and_a_duplicate_is_not() {
    let db = TestDb::migrated().await;
    let mut holder = SqliteConnection::establish(&db.target()).unwrap();
    let mut waiter = SqliteConnection::establish(&db.target()).unwrap();
    holder.batch_execute("BEGIN IMMEDIATE").unwrap();
    waiter.batch_execute("PRAGMA busy_timeout = 0").unwrap();
    let err = waiter
        .batch_execute("BEGIN IMMEDIATE")
        .expect_err("the write lock is held");
    assert!(message(&err).starts_with("database is locked"), "{err}");
    assert!(flowstate_store_diesel::error::is_retryable(&err), "{err}");
    holder.batch_execute("ROLLBACK").unwrap();

    waiter
        .batch_execute("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)")
        .unwrap();
    let err = waiter
        .batch_execute("INSERT INTO t VALUES (1)")
        .expect_err("a duplicate key");
    assert!(!flowstate_store_diesel::error::is_retryable(&err), "{err}");
}
