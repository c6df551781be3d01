//! A step's completion is a heap-only (HOT) update on PostgreSQL: it
//! changes no value any step index names (migration 000010 moved the
//! batch-claim indexes onto the generated `claimable` column and dropped
//! `(run_id, status)`), so it writes no index entry, only a new row version
//! on the page of the claim's. The claim cannot be one: the step leaves
//! the claimable indexes.
//!
//! PostgreSQL counts HOT updates per table (`pg_stat_user_tables`), from
//! each connection's counters once it goes idle or closes; the check waits
//! until every update is counted.

use std::time::{Duration, Instant};

use flowstate_core::{BatchClaim, BatchStepStore, Completion, NewStep, StepStore, StepTransition};
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// Steps claimed and completed in each path: few enough that they and
/// all their versions fit on one heap page (about 200 bytes a version), so
/// whether a completion is HOT never depends on when PostgreSQL prunes a
/// page, only on the indexes.
const STEPS: i64 = 10;

/// The updates and HOT updates PostgreSQL has counted on `flowstate_steps`
/// once it has counted `updates` of them, or what it counted after 20 s.
async fn step_updates(db: &TestDb, updates: i64) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let counted = (
            db.count("SELECT n_tup_upd AS n FROM pg_stat_user_tables WHERE relname = 'flowstate_steps'")
                .await,
            db.count(
                "SELECT n_tup_hot_upd AS n FROM pg_stat_user_tables WHERE relname = 'flowstate_steps'",
            )
            .await,
        );
        if counted.0 >= updates || Instant::now() > deadline {
            return counted;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `STEPS` steps claimed and succeeded, in batches or one at a time: of the
/// `2 × STEPS` updates, the claims are never HOT, and every completion is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_write_no_step_index_entry() {
    for batched in [true, false] {
        let db = TestDb::migrated(Dialect::Postgres).await;
        let store = db.store(StoreConfig::default()).await;
        let run = records::run(&store, json!({})).await;
        let mut steps = Vec::new();
        for index in 0..STEPS {
            let step = NewStep::new(run.id, format!("s{index}"), "f", json!({ "i": index }));
            steps.push(store.insert_step(step).await.unwrap().record);
        }
        if batched {
            let claimed = store
                .claim_batch(&BatchClaim::new(STEPS as u32))
                .await
                .unwrap();
            assert_eq!(claimed.len() as i64, STEPS);
            let completions = claimed
                .iter()
                .map(|step| {
                    (
                        step.claim(),
                        Completion::Succeeded(json!({ "ok": step.name })),
                    )
                })
                .collect();
            let outcomes = store.complete_batch(completions).await.unwrap();
            assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        } else {
            for step in &steps {
                let claimed = store.claim_step(run.id, &step.name, "f").await.unwrap();
                assert!(claimed.is_some(), "{} claimed", step.name);
                store
                    .transition_step(step.id, StepTransition::Succeeded(json!({ "ok": 1 })))
                    .await
                    .unwrap();
            }
        }
        drop(store);

        let (updates, hot) = step_updates(&db, 2 * STEPS).await;
        assert_eq!(
            updates,
            2 * STEPS,
            "one update per claim and per completion"
        );
        // Before migration 000010 none could be HOT: `status`, which every
        // completion changes, was in three step indexes.
        assert_eq!(
            hot, STEPS,
            "of {updates} updates (batched: {batched}), the completions should be the HOT ones: \
             a claim leaves the claimable indexes, and a completion changes no indexed value"
        );
        db.drop_database().await;
    }
}
