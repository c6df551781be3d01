//! What the transaction-pooler switch (`?pool_mode=transaction`) costs:
//! the same statements, counted by the statement log, as without it, and
//! nothing left prepared on the server connection under a client's name:
//! only under the content keys (`fs_...`) any client's same statement
//! finds. Run here against the
//! server directly (the switch needs no pooler to be correct); the fault
//! suite runs stores through PgBouncer itself (`past_one_server.rs`).

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowstate_core::NewStep;
use flowstate_core::ports::StepStore;
use flowstate_store_diesel::{Dialect, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// How many claims each store makes.
const CLAIMS: usize = 3;

#[derive(Debug, QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Inserts and claims `CLAIMS` steps through the store at `url`; answers
/// the statements sent and how many statements the store's one
/// connection held prepared afterwards: under a client's name, and under
/// a content key.
async fn claims_through(db: &TestDb, url: &str) -> (Vec<String>, i64, i64) {
    let log = StatementLog::new();
    let config = StoreConfig::default()
        .pool_size(1)
        .statement_log(log.clone());
    let store = flowstate_store_diesel::DieselStore::open(url, config)
        .await
        .unwrap_or_else(|err| panic!("open {url}: {err}"));
    let run = records::run(&store, json!({})).await;
    log.clear();
    for i in 0..CLAIMS {
        let name = format!("s{i}");
        store
            .insert_step(NewStep::new(run.id, &name, "f", json!({})))
            .await
            .unwrap();
        let claimed = store.claim_step(run.id, &name, "f").await.unwrap();
        assert_eq!(claimed.map(|s| s.attempt), Some(1));
    }
    let sent = log.statements();
    let table = format!("prepared_{}", uuid::Uuid::now_v7().simple());
    store
        .batch_execute(&format!(
            "CREATE TABLE {table} AS SELECT name LIKE 'fs\\_%' AS keyed FROM pg_prepared_statements"
        ))
        .await
        .unwrap();
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let held = |keyed: bool| {
        diesel::sql_query(format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE keyed = {keyed}"
        ))
    };
    let named: Count = held(false).get_result(&mut conn).await.unwrap();
    let keyed: Count = held(true).get_result(&mut conn).await.unwrap();
    (sent, named.n, keyed.n)
}

#[tokio::test]
async fn the_switch_sends_the_same_statements_and_leaves_none_prepared() {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let (direct, prepared_direct, _) = claims_through(&db, &db.url).await;
    let pooled_url = format!("{}?pool_mode=transaction", db.url);
    let (pooled, prepared_pooled, keyed_pooled) = claims_through(&db, &pooled_url).await;
    println!(
        "{CLAIMS} inserts and claims: {} statements direct, {} with the switch; \
         prepared on the server: {prepared_direct} direct, {prepared_pooled} with the switch \
         (and {keyed_pooled} under content keys)",
        direct.len(),
        pooled.len()
    );
    assert_eq!(direct, pooled, "the switch changes no statement");
    assert_eq!(direct.len(), 2 * CLAIMS, "one insert and one claim each");
    assert!(
        prepared_direct >= 2,
        "direct, the hot statements stay prepared"
    );
    assert_eq!(
        prepared_pooled, 0,
        "with the switch nothing stays prepared under a client's name"
    );
    assert!(
        keyed_pooled >= 2,
        "the insert and the claim, run outside a transaction, stay under their keys"
    );
    db.drop_database().await;
}
