//! Rows written behind the store's back that no valid write produces: each
//! read answers a typed `Corrupt` error naming the row, never a panic or a
//! wrong value. Written once, run on every dialect.

use flowstate_core::{Error, NewRun, NewStep, RunStore, StepStore};
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use super::db::TestDb;

/// A bad status, a bad id and an out-of-range attempt, each found on read.
pub async fn corrupt_rows_are_typed_errors(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let run = store
        .create_run(NewRun::new("wf", json!({})))
        .await
        .unwrap()
        .record;
    let step = store
        .insert_step(NewStep::new(run.id, "s", "f", json!({})))
        .await
        .unwrap()
        .record;
    let cases = [
        (
            format!(
                "UPDATE flowstate_runs SET status = 'bogus' WHERE id = '{}'",
                run.id
            ),
            "run status",
        ),
        (
            format!(
                "UPDATE flowstate_steps SET current_attempt = -1 WHERE id = '{}'",
                step.id
            ),
            "step attempt",
        ),
        (
            format!(
                "UPDATE flowstate_steps SET status = 'nope' WHERE id = '{}'",
                step.id
            ),
            "step status",
        ),
    ];
    for (sql, what) in cases {
        assert_eq!(db.execute(&sql).await, 1, "{sql}");
        let read = match what {
            "run status" => store.get_run(run.id).await.map(drop),
            _ => store.get_step(step.id).await.map(drop),
        };
        match read {
            Err(Error::Corrupt { what: found, .. }) => assert_eq!(found, what, "{sql}"),
            other => panic!("{sql}: expected Corrupt {what}, got {other:?}"),
        }
    }
    drop(store);
    db.drop_database().await;
}
