//! Healing on PostgreSQL: a store whose every pooled session is killed,
//! whose session is killed mid-statement, or whose session turns read-only
//! answers again at once, the first call failing at most, retryably. And
//! the retryable rows of the error table a shared server can raise for
//! real: a session ended by an administrator (57P01), a deadlock (40P01),
//! a lock timeout (55P03), a serialization failure (40001), a read-only
//! transaction (25006); and a unique violation, which is not retryable.

use std::sync::Arc;
use std::time::Duration;

use diesel::result::Error as DieselError;
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use flowstate_core::NewRun;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::{Dialect, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::healing::{self, assert_retryable};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sessions_heal() {
    let healing = healing::killed_sessions_heal(Dialect::Postgres).await;
    // The server tells every session it ends (57P01) before it goes, so
    // the driver has closed them by the first call: the pool refuses the
    // closed connections without a check and opens new ones.
    assert_eq!(healing.failed(), 0, "{healing:?}");
    assert_eq!(healing.checks(), 0, "{healing:?}");
}

/// A demoted primary's every pooled session (here: every session turned
/// read-only) goes at the first refused write: the check after that loss
/// fails on a server that takes no writes (25006), so the next call gets a
/// new connection rather than the next stale one, which `SELECT 1` kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_only_session_goes_after_the_first_refused_write() {
    const SESSIONS: usize = 3;
    let db = TestDb::migrated(Dialect::Postgres).await;
    let log = StatementLog::new();
    let store = db
        .warm_store(
            StoreConfig::default().statement_log(Arc::clone(&log)),
            SESSIONS,
        )
        .await;
    // Each overlapping call holds a session of its own while it sleeps.
    let demoting: Vec<_> = (0..SESSIONS)
        .map(|_| {
            store.batch_execute("SET default_transaction_read_only = on; SELECT pg_sleep(0.3)")
        })
        .collect();
    for demoted in futures_util::future::join_all(demoting).await {
        demoted.unwrap();
    }

    let err = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .expect_err("a read-only session refuses the write");
    assert!(err.is_retryable(), "{err}");
    log.clear();
    let run = tokio::time::timeout(
        healing::CALL_BOUND,
        store.create_run(NewRun::new("wf", json!(2))),
    )
    .await
    .expect("the next call answers within the bound")
    .expect("the next call gets a new, writable connection")
    .record;
    let checks = log
        .statements()
        .iter()
        .filter(|sql| sql.as_str() == healing::PG_CHECK)
        .count();
    assert_eq!(
        checks,
        SESSIONS - 1,
        "every other stale session checked once"
    );
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_mid_statement_fails_retryably_and_is_replaced() {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let log = StatementLog::new();
    let store = db
        .warm_store(StoreConfig::default().statement_log(Arc::clone(&log)), 1)
        .await;
    let run = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .unwrap()
        .record;
    healing::wait_for_sessions(&db, 1).await;

    let sleeping = store.batch_execute("SELECT pg_sleep(30)");
    let killing = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        healing::kill_sessions(&db).await
    };
    let (slept, killed) = tokio::join!(sleeping, killing);
    assert_eq!(killed, 1);
    let err = slept.expect_err("the killed statement fails");
    assert!(err.is_retryable(), "{err}");

    log.clear();
    let read = tokio::time::timeout(healing::CALL_BOUND, store.get_run(run.id))
        .await
        .expect("the next call answers within the bound");
    assert_eq!(read.unwrap(), run);
    assert_eq!(log.count(), 1, "the read alone: {:?}", log.statements());
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_fails_retryably_and_is_replaced() {
    healing::read_only_session_is_replaced(
        Dialect::Postgres,
        "SET default_transaction_read_only = on",
    )
    .await;
}

/// A database holding `t (id, n)` with rows 1 and 2, and two connections
/// on it.
async fn two_sessions() -> (TestDb, AsyncPgConnection, AsyncPgConnection) {
    healing::two_sessions(
        Dialect::Postgres,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL)",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_by_an_administrator_is_retryable() {
    let (db, mut a, mut b) = two_sessions().await;
    let pid: i32 = diesel_async::RunQueryDsl::get_result(
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Integer>(
            "pg_backend_pid()",
        )),
        &mut a,
    )
    .await
    .unwrap();
    let sleeping = a.batch_execute("SELECT pg_sleep(30)");
    let killing = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.batch_execute(&format!("SELECT pg_terminate_backend({pid})"))
            .await
    };
    let (slept, killed) = tokio::join!(sleeping, killing);
    killed.unwrap();
    let during = slept.expect_err("the ended session's statement fails");
    assert_retryable(
        &during,
        "terminating connection due to administrator command",
    );
    let after = a
        .batch_execute("SELECT 1")
        .await
        .expect_err("the ended session is gone");
    assert!(
        flowstate_store_diesel::error::is_retryable(&after),
        "the next statement: {after}"
    );
    eprintln!("ended mid-statement: {during}; the next statement: {after}");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_retryable() {
    let (db, mut a, mut b) = two_sessions().await;
    a.batch_execute("BEGIN; UPDATE t SET n = 1 WHERE id = 1")
        .await
        .unwrap();
    b.batch_execute("BEGIN; UPDATE t SET n = 1 WHERE id = 2")
        .await
        .unwrap();
    // `a` waits for row 2; then `b` asks for row 1: after deadlock_timeout
    // (1 s by default) the server rolls one back.
    let a_waits = a.batch_execute("UPDATE t SET n = 2 WHERE id = 2");
    let b_closes = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.batch_execute("UPDATE t SET n = 2 WHERE id = 1").await
    };
    let (a_did, b_did) = tokio::join!(a_waits, b_closes);
    let victim = match (a_did, b_did) {
        (Err(err), Ok(())) | (Ok(()), Err(err)) => err,
        other => panic!("expected exactly one deadlock victim, got {other:?}"),
    };
    assert_retryable(&victim, "deadlock detected");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_timeout_is_retryable() {
    let (db, mut a, mut b) = two_sessions().await;
    a.batch_execute("BEGIN; UPDATE t SET n = 1 WHERE id = 1")
        .await
        .unwrap();
    let err = b
        .batch_execute("SET lock_timeout = '100ms'; UPDATE t SET n = 2 WHERE id = 1")
        .await
        .expect_err("the lock is held past the timeout");
    assert_retryable(&err, "canceling statement due to lock timeout");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serialization_failure_is_retryable() {
    let (db, mut a, mut b) = two_sessions().await;
    // `a`'s snapshot is taken by its first read; `b` then changes the row.
    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT n FROM t WHERE id = 1")
        .await
        .unwrap();
    b.batch_execute("UPDATE t SET n = 5 WHERE id = 1")
        .await
        .unwrap();
    let err = a
        .batch_execute("UPDATE t SET n = n + 1 WHERE id = 1")
        .await
        .expect_err("a concurrent update under REPEATABLE READ");
    assert!(
        matches!(
            err,
            DieselError::DatabaseError(diesel::result::DatabaseErrorKind::SerializationFailure, _)
        ),
        "{err:?}"
    );
    assert_retryable(&err, "could not serialize access due to concurrent update");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_transaction_is_retryable_and_a_duplicate_is_not() {
    let (db, mut a, _b) = two_sessions().await;
    let err = a
        .batch_execute("BEGIN READ ONLY; INSERT INTO t VALUES (3, 0)")
        .await
        .expect_err("a read-only transaction refuses the write");
    assert_retryable(&err, "cannot execute INSERT in a read-only transaction");
    a.batch_execute("ROLLBACK").await.unwrap();

    let err = a
        .batch_execute("INSERT INTO t VALUES (1, 0)")
        .await
        .expect_err("a duplicate key");
    assert!(!flowstate_store_diesel::error::is_retryable(&err), "{err}");
    db.drop_database().await;
}
