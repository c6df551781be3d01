//! One statement is one round trip only if it is not prepared anew every
//! time: `sql_query` alone would prepare (a round trip) then execute
//! (another) on every call. The store marks its fixed statements cacheable,
//! and this checks the server keeps each one prepared exactly once.

use flowstate_core::{RunStore, StepStore, StepTransition};
use serde_json::json;

use crate::records;
use crate::support;

/// `n`, for counting rows.
#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Every statement the hot operations send stays prepared on the
/// connection, exactly once however often it runs.
#[tokio::test]
async fn statements_are_prepared_once_per_connection() {
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;

    let log = flowstate_store_diesel::StatementLog::new();
    let config = flowstate_store_diesel::StoreConfig::default()
        .pool_size(1)
        .statement_log(log.clone());
    let (store, url) = support::store_with(config).await;
    let run = records::run(&store, json!({})).await;
    log.clear();
    for i in 0..3 {
        let name = format!("s{i}");
        let step = records::step(&store, run.id, &name, json!({})).await;
        store.get_step(step.id).await.unwrap();
        store.find_step(run.id, &name).await.unwrap();
        store.claim_step(run.id, &name, "f").await.unwrap().unwrap();
        store
            .transition_step(step.id, StepTransition::Succeeded(json!(i)))
            .await
            .unwrap();
        store.write_state(run.id, &name, &json!(i)).await.unwrap();
        store.list_steps(run.id).await.unwrap();
    }
    let mut sent = log.statements();
    assert_eq!(sent.len(), 21);
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), 7, "each operation sends one fixed text");
    let mut conn = store.pool().get("test").await.unwrap();
    for sql in sent {
        let prepared: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = $1",
        )
        .bind::<Text, _>(&sql)
        .get_result(&mut *conn)
        .await
        .unwrap();
        assert_eq!(prepared.n, 1, "not kept prepared: {sql}");
    }
    support::drop_database(&url).await;
}
