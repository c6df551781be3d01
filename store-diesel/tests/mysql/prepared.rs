//! A statement is one round trip only if the connection keeps it
//! prepared: a statement diesel-async may not cache is prepared, executed
//! and closed on every call. MariaDB lists no session's prepared
//! statements without the performance schema, but it counts the prepares
//! each session asked for (`Com_stmt_prepare`): after a first round of the
//! hot step and lease operations, further rounds on the same connection
//! must prepare nothing.

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use flowstate_core::ports::StepStore;
use flowstate_core::{NewStep, StepTransition};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// The rounds after the first.
const ROUNDS: usize = 3;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// One round of the hot operations: a step inserted, claimed and
/// succeeded; a run claimed, renewed, released (a yield, then a failure)
/// and finished.
async fn round(store: &DieselStore, i: usize) {
    let run = records::run(store, json!({})).await;
    let name = format!("s{i}");
    let step = store
        .insert_step(NewStep::new(run.id, &name, "f", json!({})))
        .await
        .unwrap()
        .record;
    assert!(
        store
            .claim_step(run.id, &name, "f")
            .await
            .unwrap()
            .is_some()
    );
    store
        .transition_step(step.id, StepTransition::Succeeded(json!(i)))
        .await
        .unwrap();
    let leased = crate::common::lease_round::lease_round(store, i).await;
    assert_eq!(leased, run.id, "the only unsettled run");
}

/// The prepares the store's one connection has asked for so far, copied
/// into table `into` through the store (a text-protocol statement: it
/// prepares nothing), then read from a connection of our own.
async fn prepares(store: &DieselStore, db: &TestDb, into: &str) -> i64 {
    store
        .batch_execute(&format!(
            "CREATE TABLE {into} AS SELECT CAST(VARIABLE_VALUE AS SIGNED) AS n \
             FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_STMT_PREPARE'"
        ))
        .await
        .unwrap();
    let mut conn = AsyncMysqlConnection::establish(&db.url).await.unwrap();
    let count: Count = diesel::sql_query(format!("SELECT n FROM {into}"))
        .get_result(&mut conn)
        .await
        .unwrap();
    count.n
}

#[tokio::test]
async fn the_hot_statements_are_prepared_once_per_connection() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let store = db.store(StoreConfig::default().pool_size(1)).await;
    round(&store, 0).await;
    let before = prepares(&store, &db, "prepares_before").await;
    assert!(before > 0, "the first round prepares its statements");
    for i in 1..=ROUNDS {
        round(&store, i).await;
    }
    let after = prepares(&store, &db, "prepares_after").await;
    assert_eq!(
        after - before,
        0,
        "statements prepared again on the same connection in {ROUNDS} rounds"
    );
    drop(store);
    db.drop_database().await;
}
