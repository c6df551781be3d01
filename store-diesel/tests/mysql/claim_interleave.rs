//! A run claim that loses its runs between its statements, as a Galera
//! node's claim does when another node's commit aborts it (row locks are
//! local to a node): the claim must answer no lease or a fresh token, never
//! a lease another worker holds and never a corrupt row. One server cannot
//! abort a transaction between statements on its own, so the test does
//! what the cluster does, on the claim's own connection: its transaction
//! is rolled back (its row locks gone, its later statements autocommit),
//! then another worker's claim commits through a second connection, then
//! the claim goes on.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use flowstate_core::RunId;
use flowstate_core::ports::RunLeaseStore;
use flowstate_store_diesel::mysql_claim_interleave::{Stage, once};
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// What another worker, on another node, writes while the claim is
/// between statements: its own claim of `run` (token raised, held for a
/// minute), and, `then_release`, its release.
fn competing_claim(run: RunId, then_release: bool) -> String {
    let claim = format!(
        "UPDATE flowstate_runs SET lease_token = lease_token + 1, lease_owner = 'other', \
         lease_expires_at = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
         + 60000000 WHERE id = '{run}'"
    );
    if !then_release {
        return claim;
    }
    format!(
        "{claim}; UPDATE flowstate_runs SET lease_owner = NULL, lease_expires_at = NULL \
         WHERE id = '{run}'"
    )
}

/// Makes the next claim by `worker` lose `run` at `stage`: its transaction
/// rolled back, then [`competing_claim`] committed on a connection of its
/// own.
fn lose_between_statements(
    db: &TestDb,
    worker: &str,
    stage: Stage,
    run: RunId,
    then_release: bool,
) {
    let url = db.url.clone();
    once(worker, stage, move |conn: &mut AsyncMysqlConnection| {
        Box::pin(async move {
            conn.batch_execute("ROLLBACK")
                .await
                .expect("roll the claim back");
            let mut other = AsyncMysqlConnection::establish(&url)
                .await
                .expect("connect");
            other
                .batch_execute(&competing_claim(run, then_release))
                .await
                .expect("the competing claim");
        })
    });
}

/// The lease of `run` as the database has it: owner and token.
async fn lease_of(db: &TestDb, run: RunId) -> (i64, i64) {
    let token = db
        .count(&format!(
            "SELECT lease_token AS n FROM flowstate_runs WHERE id = '{run}'"
        ))
        .await;
    let others = db
        .count(&format!(
            "SELECT COUNT(*) AS n FROM flowstate_runs WHERE id = '{run}' AND lease_owner = 'other'"
        ))
        .await;
    (token, others)
}

#[tokio::test]
async fn a_claim_that_loses_its_run_before_its_update_answers_no_lease() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await.id;
    let worker = format!("w-{}", uuid::Uuid::now_v7().simple());
    lose_between_statements(&db, &worker, Stage::BeforeUpdate, run, false);
    let claimed = store
        .claim_run(&worker, Duration::from_secs(30))
        .await
        .expect("a lost race is run again, not an error");
    assert!(
        claimed.is_none(),
        "the run is held by another worker: {claimed:?}"
    );
    assert_eq!(
        lease_of(&db, run).await,
        (1, 1),
        "the other worker's lease stands"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_claim_whose_read_back_shows_another_holder_answers_no_lease() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await.id;
    let worker = format!("w-{}", uuid::Uuid::now_v7().simple());
    // The claim's own UPDATE rolled back with its transaction, and the
    // other claim committed: the read-back shows token 1, held by `other`.
    lose_between_statements(&db, &worker, Stage::BeforeReadBack, run, false);
    let claimed = store
        .claim_run(&worker, Duration::from_secs(30))
        .await
        .expect("a lost race is run again, not an error");
    assert!(
        claimed.is_none(),
        "never the other worker's lease, never its token: {claimed:?}"
    );
    assert_eq!(lease_of(&db, run).await, (1, 1));
    db.drop_database().await;
}

#[tokio::test]
async fn a_claim_that_loses_a_run_freed_again_takes_it_with_a_fresh_token() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await.id;
    let worker = format!("w-{}", uuid::Uuid::now_v7().simple());
    // Another worker claims (token 1) and releases between the pick (which
    // read token 0) and the UPDATE: the UPDATE's token guard misses, and
    // the claim run again takes the run with token 2, never 1 again.
    lose_between_statements(&db, &worker, Stage::BeforeUpdate, run, true);
    let lease = store
        .claim_run(&worker, Duration::from_secs(30))
        .await
        .expect("a lost race is run again, not an error")
        .expect("the run is free again");
    assert_eq!(
        (lease.run.id, lease.token, lease.worker.as_str()),
        (run, 2, worker.as_str())
    );
    assert_eq!(lease_of(&db, run).await, (2, 0));
    db.drop_database().await;
}
