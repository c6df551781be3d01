//! Bad input and bad rows on SQLite: typed errors, nothing written.

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};
use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunStore, StepStore, VersionStore};
use flowstate_core::{
    Error, NewRun, NewStep, NewWorkflowVersion, RetryPolicy, RunId, RunStatus, StepId, StepStatus,
    StepTransition,
};
use flowstate_store_diesel::StoreConfig;
use serde_json::{Value, json};

use crate::records;
use crate::support::{TABLES, TestDb};

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Rows per flowstate table, and how many flowstate tables there are.
fn census(db: &TestDb) -> Vec<i64> {
    let mut conn = SqliteConnection::establish(&db.target()).unwrap();
    let mut counts = Vec::new();
    let tables: Count = sql_query(
        "SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND name LIKE 'flowstate%'",
    )
    .get_result(&mut conn)
    .unwrap();
    counts.push(tables.n);
    for table in TABLES {
        let rows: Count = sql_query(format!("SELECT count(*) AS n FROM {table}"))
            .get_result(&mut conn)
            .unwrap();
        counts.push(rows.n);
    }
    counts
}

#[tokio::test]
async fn unknown_ids_are_typed_not_found_errors() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let (run, step) = (RunId::generate(), StepId::generate());
    assert!(matches!(store.get_run(run).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(
        matches!(store.set_run_status(run, RunStatus::Completed).await, Err(Error::RunNotFound(r)) if r == run)
    );
    assert!(matches!(store.delete_run(run).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(matches!(store.count_children(run).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(
        matches!(store.write_state(run, "k", &json!(1)).await, Err(Error::RunNotFound(r)) if r == run)
    );
    assert!(matches!(store.read_state(run).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(matches!(store.list_steps(run).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(matches!(store.step_history(run).await, Err(Error::RunNotFound(r)) if r == run));
    let orphan = NewStep::new(run, "a", "f", json!(1));
    assert!(matches!(store.insert_step(orphan).await, Err(Error::RunNotFound(r)) if r == run));
    let child = NewRun::new("wf", json!(1)).with_parent(run);
    assert!(matches!(store.create_run(child).await, Err(Error::RunNotFound(r)) if r == run));
    assert!(matches!(store.get_step(step).await, Err(Error::StepNotFound(s)) if s == step));
    let moved = store.transition_step(step, StepTransition::Running).await;
    assert!(matches!(moved, Err(Error::StepNotFound(s)) if s == step));
    let retried = store.create_retry_attempt(step, StepStatus::Running).await;
    assert!(matches!(retried, Err(Error::StepNotFound(s)) if s == step));
    assert!(
        matches!(store.set_branch_taken(step, "b").await, Err(Error::StepNotFound(s)) if s == step)
    );
    assert!(
        matches!(store.find_step(run, "a").await, Err(Error::StepNameNotFound { run: r, .. }) if r == run)
    );
    assert!(
        matches!(store.claim_step(run, "a", "f").await, Err(Error::StepNameNotFound { run: r, .. }) if r == run)
    );
    assert_eq!(store.get_version("wf", "h").await.unwrap(), None);
    assert_eq!(census(&db), [5, 0, 0, 0, 0, 0]);
}

#[tokio::test]
async fn ten_megabytes_of_json_are_refused_and_nothing_is_written() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({"keep": 1})).await;
    store.write_state(run.id, "k", &json!("old")).await.unwrap();
    let step = records::step(&store, run.id, "a", json!(1)).await;
    store.claim_step(run.id, "a", "f").await.unwrap().unwrap();
    let before = census(&db);
    let huge = json!("x".repeat(10 * 1024 * 1024));
    let too_large = |result: Result<(), Error>| {
        assert!(
            matches!(
                result,
                Err(Error::InvalidInput(InvalidInput::TooLarge { .. }))
            ),
            "{result:?}"
        );
    };
    too_large(store.write_state(run.id, "k", &huge).await);
    too_large(store.write_state(run.id, "new", &huge).await);
    too_large(
        store
            .create_run(NewRun::new("wf", huge.clone()))
            .await
            .map(drop),
    );
    too_large(
        store
            .insert_step(NewStep::new(run.id, "b", "f", huge.clone()))
            .await
            .map(drop),
    );
    too_large(
        store
            .transition_step(step.id, StepTransition::Succeeded(huge.clone()))
            .await,
    );
    too_large(
        store
            .transition_step(step.id, StepTransition::Failed(huge.clone()))
            .await,
    );
    let version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "h".into(),
        graph: huge,
    };
    too_large(store.upsert_version(version).await.map(drop));
    assert_eq!(census(&db), before);
    assert_eq!(store.read_state(run.id).await.unwrap()["k"], json!("old"));
    let unchanged = store.get_step(step.id).await.unwrap();
    assert_eq!(
        (unchanged.status, unchanged.result),
        (StepStatus::Running, None)
    );
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Running);
}

#[tokio::test]
async fn a_nul_character_is_refused_everywhere() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!(1)).await;
    let step = records::step(&store, run.id, "a", json!(1)).await;
    store.claim_step(run.id, "a", "f").await.unwrap().unwrap();
    let before = census(&db);
    let nul = |result: Result<(), Error>| {
        assert!(
            matches!(
                result,
                Err(Error::InvalidInput(InvalidInput::NulCharacter { .. }))
            ),
            "{result:?}"
        );
    };
    nul(store
        .write_state(run.id, "k", &json!({"a": "x\u{0}y"}))
        .await);
    nul(store.write_state(run.id, "k\u{0}", &json!(1)).await);
    nul(store
        .create_run(NewRun::new("wf", json!(["\u{0}"])))
        .await
        .map(drop));
    nul(store
        .transition_step(step.id, StepTransition::Succeeded(json!({"k\u{0}": 1})))
        .await);
    nul(store
        .insert_step(NewStep::new(run.id, "b\u{0}", "f", json!(1)))
        .await
        .map(drop));
    assert_eq!(census(&db), before);
}

#[tokio::test]
async fn an_sql_looking_state_key_is_just_a_key() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!(1)).await;
    let keys = [
        "'; drop table flowstate_runs; --",
        "a.b",
        "say \"hi\"",
        "A",
        "a",
    ];
    for (i, key) in keys.iter().enumerate() {
        store.write_state(run.id, key, &json!(i)).await.unwrap();
    }
    let state = store.read_state(run.id).await.unwrap();
    assert_eq!(
        state.len(),
        keys.len(),
        "keys compare byte-exact: {state:?}"
    );
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(state[*key], json!(i), "{key}");
    }
    assert_eq!(census(&db)[..3], [5, 1, 5]);
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
}

#[tokio::test]
async fn a_hand_written_status_is_corrupt_for_that_step_only() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!(1)).await;
    let bad = records::step(&store, run.id, "bad", json!(1)).await;
    let good = records::step(&store, run.id, "good", json!(1)).await;
    store
        .batch_execute(&format!(
            "UPDATE flowstate_steps SET status = 'exploded' WHERE id = '{}'",
            bad.id
        ))
        .await
        .unwrap();
    match store.get_step(bad.id).await {
        Err(Error::Corrupt { what, row, detail }) => {
            assert_eq!(what, "step status");
            assert_eq!(row, bad.id.to_string());
            assert!(detail.contains("exploded"), "{detail}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(store.get_step(good.id).await.unwrap(), good);
    // A guarded write on the corrupt row reports it the same way.
    let moved = store.transition_step(bad.id, StepTransition::Running).await;
    assert!(
        matches!(moved, Err(Error::Corrupt { ref row, .. }) if *row == bad.id.to_string()),
        "{moved:?}"
    );
}

#[tokio::test]
async fn the_schema_refuses_what_no_port_writes() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!(1)).await;
    // JSON columns take JSON only (CHECK json_valid), like jsonb and MySQL's JSON.
    let not_json = store
        .batch_execute(&format!(
            "UPDATE flowstate_runs SET input = 'not json' WHERE id = '{}'",
            run.id
        ))
        .await;
    assert!(
        matches!(
            not_json,
            Err(Error::Backend {
                retryable: false,
                ..
            })
        ),
        "{not_json:?}"
    );
    // STRICT tables: a timestamp is an integer.
    let text_time = store
        .batch_execute(&format!(
            "UPDATE flowstate_runs SET created_at = 'yesterday' WHERE id = '{}'",
            run.id
        ))
        .await;
    assert!(
        matches!(text_time, Err(Error::Backend { .. })),
        "{text_time:?}"
    );
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
}

#[tokio::test]
async fn json_types_round_trip_exactly() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let values: [Value; 8] = [
        json!([]),
        json!({}),
        json!(0),
        json!(false),
        json!(null),
        json!("\u{e9}\u{1f600}"),
        json!(-1.5e300),
        json!({"a": [1, {"b": null}], "u": u64::MAX}),
    ];
    let run = records::run(&store, json!(1)).await;
    for (i, value) in values.iter().enumerate() {
        store
            .write_state(run.id, &i.to_string(), value)
            .await
            .unwrap();
        let step = records::step(&store, run.id, i.to_string(), value.clone()).await;
        assert_eq!(store.get_step(step.id).await.unwrap().input, *value);
    }
    let state = store.read_state(run.id).await.unwrap();
    for (i, value) in values.iter().enumerate() {
        assert_eq!(state[&i.to_string()], *value);
    }
}

#[tokio::test]
async fn a_retry_delay_that_cannot_be_stored_is_refused() {
    let db = TestDb::migrated().await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!(1)).await;
    let mut retry = RetryPolicy::with_retries(1);
    retry.retry_delay = Some(Duration::from_millis(u64::from(u32::MAX) + 1));
    let step = NewStep::new(run.id, "a", "f", json!(1)).with_retry(retry);
    let refused = store.insert_step(step).await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidInput(InvalidInput::OutOfRange { .. }))
        ),
        "{refused:?}"
    );
    retry.retry_delay = Some(Duration::from_millis(1500));
    let step = NewStep::new(run.id, "a", "f", json!(1)).with_retry(retry);
    let stored = store.insert_step(step).await.unwrap().record;
    assert_eq!(store.get_step(stored.id).await.unwrap().retry, retry);
}
