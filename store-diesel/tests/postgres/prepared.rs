//! One statement is one round trip only if it is not prepared anew every
//! time: a bare `sql_query` is prepared (a round trip), executed (another)
//! and closed on every call. The store marks its hand-written hot
//! statements cacheable; this checks on the server itself, in the
//! connection's own `pg_prepared_statements`, that each claim, transition,
//! retry and insert text (and each typed read) is prepared exactly once on
//! a connection however often it runs, and that every run executed that one
//! prepared statement. The run lease's statements likewise: they are
//! typed, and read the lease clock, which diesel's own SQL literal would
//! mark unsafe to cache (every `finish` parsed and planned anew).

use std::sync::Arc;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewStep, RetryPolicy, RetryStart, StepStatus, StepTransition};
use flowstate_store_diesel::{Dialect, StatementLog, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// How many times each hot operation runs.
const ROUNDS: usize = 3;

/// One prepared statement of the store's connection, as it saw it.
#[derive(Debug, QueryableByName)]
struct Prepared {
    #[diesel(sql_type = Text)]
    statement: String,
    /// How many times it was executed (each execution picks a generic or a
    /// custom plan).
    #[diesel(sql_type = BigInt)]
    executions: i64,
}

#[tokio::test]
async fn statements_are_prepared_once_per_connection() {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let (store, log) = one_connection(&db).await;
    let run = records::run(&store, json!({})).await;
    log.clear();
    for i in 0..ROUNDS {
        let name = format!("s{i}");
        let new_step =
            NewStep::new(run.id, &name, "f", json!({})).with_retry(RetryPolicy::with_retries(1));
        let step = store.insert_step(new_step).await.unwrap().record;
        let claimed = store.claim_step(run.id, &name, "f").await.unwrap();
        assert_eq!(claimed.map(|s| s.attempt), Some(1));
        store
            .transition_step(step.id, StepTransition::Failed(json!(i)))
            .await
            .unwrap();
        store
            .create_retry_attempt(step.id, RetryStart::Running)
            .await
            .unwrap();
        store
            .transition_step(step.id, StepTransition::Succeeded(json!(i)))
            .await
            .unwrap();
        let done = store.get_step(step.id).await.unwrap();
        assert_eq!((done.status, done.attempt), (StepStatus::Succeeded, 2));
        store.find_step(run.id, &name).await.unwrap();
        store.list_steps(run.id).await.unwrap();
        store.write_state(run.id, &name, &json!(i)).await.unwrap();
        store
            .list_runs(&flowstate_core::RunQuery::default())
            .await
            .unwrap();
    }
    let sent = log.statements();
    // insert, claim, fail, retry, succeed: one fixed text each, ROUNDS times.
    let mut hot: Vec<&String> = sent.iter().filter(|sql| sql.starts_with("WITH")).collect();
    assert_eq!(hot.len(), 5 * ROUNDS, "{sent:#?}");
    hot.sort();
    hot.dedup();
    assert_eq!(hot.len(), 5, "each hot operation sends one fixed text");
    // With the typed statements of the cold path (get, find, list steps,
    // which diesel caches by itself; the state upsert and the boxed runs
    // listing, which the store caches), ten texts, each sent once per round.
    let every = assert_each_prepared_once(&store, &db, &sent).await;
    assert_eq!(every.len(), 10, "{every:#?}");
    for sql in &every {
        assert_eq!(
            sent.iter().filter(|s| *s == sql).count(),
            ROUNDS,
            "sent once per round: {sql}"
        );
    }
    drop(store);
    db.drop_database().await;
}

#[tokio::test]
async fn lease_statements_are_prepared_once_per_connection() {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let (store, log) = one_connection(&db).await;
    for _ in 0..ROUNDS {
        records::run(&store, json!({})).await;
    }
    log.clear();
    for i in 0..ROUNDS {
        crate::common::lease_round::lease_round(&store, i).await;
    }
    let sent = log.statements();
    let every = assert_each_prepared_once(&store, &db, &sent).await;
    // claim, renew, the two releases (a yield, a failure), finish, and
    // the read of the run.
    assert_eq!(every.len(), 6, "{every:#?}");
    drop(store);
    db.drop_database().await;
}

/// A store on `db` with one connection, and its statement log: every
/// statement runs on that connection, and so does the snapshot of its
/// prepared statements.
async fn one_connection(db: &TestDb) -> (flowstate_store_diesel::DieselStore, Arc<StatementLog>) {
    let log = StatementLog::new();
    let config = StoreConfig::default()
        .pool_size(1)
        .statement_log(log.clone());
    (db.store(config).await, log)
}

/// Asserts each distinct text in `sent` is prepared exactly once on the
/// store's one connection and executed as often as it was sent; answers
/// the distinct texts.
async fn assert_each_prepared_once(
    store: &flowstate_store_diesel::DieselStore,
    db: &TestDb,
    sent: &[String],
) -> Vec<String> {
    let mut every = sent.to_vec();
    every.sort();
    every.dedup();
    // Snapshot what the store's one connection holds prepared, through the
    // store itself (a simple query: it prepares nothing), then read it from
    // a connection of our own.
    store
        .batch_execute(
            "CREATE TABLE prepared_probe AS SELECT statement, \
             generic_plans + custom_plans AS executions FROM pg_prepared_statements",
        )
        .await
        .unwrap();
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let prepared: Vec<Prepared> =
        diesel::sql_query("SELECT statement, executions FROM prepared_probe")
            .load(&mut conn)
            .await
            .unwrap();
    for sql in &every {
        let copies: Vec<&Prepared> = prepared.iter().filter(|p| &p.statement == sql).collect();
        assert_eq!(
            copies.len(),
            1,
            "not prepared exactly once on the connection: {sql}\nprepared: {prepared:#?}"
        );
        let times = sent.iter().filter(|s| *s == sql).count();
        assert_eq!(
            copies[0].executions, times as i64,
            "every call should execute the one prepared statement: {sql}"
        );
    }
    every
}
