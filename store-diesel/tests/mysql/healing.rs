//! Healing on MariaDB: a store whose every pooled session is killed, whose
//! session is killed mid-statement, or whose session turns read-only
//! answers again at once, the first call failing at most, retryably. And
//! the retryable rows of the error table a shared server can raise for
//! real: a deadlock, a lock wait timeout, a killed session, a read-only
//! transaction (and a unique violation, which is not retryable).

use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};
use flowstate_core::NewRun;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::{Dialect, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::healing::{self, assert_retryable};

/// The statement every new pooled connection starts with.
const SETUP: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sessions_heal_after_one_retryable_failure() {
    let healing = healing::killed_sessions_heal(Dialect::Mysql).await;
    // The driver does not see that a killed session's socket closed: the
    // first call fails on its connection; the next checks every one the
    // pool holds, drops them and opens one. The pool holds four, that one
    // included, unless the first call's write found the socket reset
    // already (`Broken pipe`, as the kernel's timing has it): the driver
    // then marks that connection broken and the pool drops it unchecked.
    assert_eq!(healing.failed(), 1, "{healing:?}");
    let first = format!("{:?}", healing.first);
    let held = if first.contains("Broken pipe") { 3 } else { 4 };
    assert_eq!(healing.checks(), held, "{healing:?}");
    assert_eq!(
        healing.statements[1]
            .iter()
            .filter(|sql| sql.as_str() == healing::CHECK)
            .count(),
        held,
        "the second call checks them all: {healing:?}"
    );
    assert_eq!(
        healing.starting(SETUP),
        1,
        "one new connection: {healing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_mid_statement_fails_retryably_and_is_replaced() {
    let db = TestDb::migrated(Dialect::Mysql).await;
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

    let sleeping = store.batch_execute("SELECT SLEEP(30)");
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
    let sent = log.statements();
    assert_eq!(
        sent.len(),
        2,
        "a new connection's setup, then the read: {sent:?}"
    );
    assert!(sent[0].starts_with(SETUP), "{sent:?}");
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_fails_retryably_and_is_replaced() {
    healing::read_only_session_is_replaced(Dialect::Mysql, "SET SESSION TRANSACTION READ ONLY")
        .await;
}

/// A database holding `t (id, n)` with rows 1 and 2, and two connections
/// on it.
async fn two_sessions() -> (TestDb, AsyncMysqlConnection, AsyncMysqlConnection) {
    healing::two_sessions(
        Dialect::Mysql,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL) ENGINE = InnoDB",
    )
    .await
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
    // `a` waits for row 2; then `b` asks for row 1: InnoDB rolls one back.
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
    assert_retryable(&victim, "Deadlock found when trying to get lock");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_is_retryable() {
    let (db, mut a, mut b) = two_sessions().await;
    a.batch_execute("BEGIN; UPDATE t SET n = 1 WHERE id = 1")
        .await
        .unwrap();
    b.batch_execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    let err = b
        .batch_execute("UPDATE t SET n = 2 WHERE id = 1")
        .await
        .expect_err("the lock is held past the wait");
    assert_retryable(&err, "Lock wait timeout exceeded");
    drop((a, b));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_is_retryable() {
    let (db, mut a, _b) = two_sessions().await;
    let id: i64 = diesel_async::RunQueryDsl::get_result(
        diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
            "CAST(CONNECTION_ID() AS SIGNED)",
        )),
        &mut a,
    )
    .await
    .unwrap();
    let sleeping = a.batch_execute("SELECT SLEEP(30)");
    let killing = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        db.execute(&format!("KILL CONNECTION {id}")).await
    };
    let (slept, _) = tokio::join!(sleeping, killing);
    let during = slept.expect_err("the killed statement fails");
    assert!(
        flowstate_store_diesel::error::is_retryable(&during),
        "mid-statement: {during}"
    );
    let after = a
        .batch_execute("SELECT 1")
        .await
        .expect_err("the killed session is gone");
    assert!(
        flowstate_store_diesel::error::is_retryable(&after),
        "the next statement: {after}"
    );
    eprintln!("killed mid-statement: {during}; the next statement: {after}");
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_transaction_is_retryable_and_a_duplicate_is_not() {
    let (db, mut a, _b) = two_sessions().await;
    a.batch_execute("START TRANSACTION READ ONLY")
        .await
        .unwrap();
    let err = a
        .batch_execute("INSERT INTO t VALUES (3, 0)")
        .await
        .expect_err("a read-only transaction refuses the write");
    assert_retryable(&err, "Cannot execute statement in a READ ONLY transaction");
    a.batch_execute("ROLLBACK").await.unwrap();

    let err = a
        .batch_execute("INSERT INTO t VALUES (1, 0)")
        .await
        .expect_err("a duplicate key");
    assert!(!flowstate_store_diesel::error::is_retryable(&err), "{err}");
    db.drop_database().await;
}
