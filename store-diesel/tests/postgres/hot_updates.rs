//! What PostgreSQL makes of a step's two updates per attempt, counted:
//! neither is a heap-only (HOT) update. The claim leaves the claimable
//! indexes (migration 000010); the completion clears `claimed_until`,
//! which the index of running steps names (migration 000014: every running
//! step has a claim deadline, and the expiry sweep finds them by it).
//! Migration 000010 had made every completion HOT, by moving the claim
//! indexes onto the generated `claimable` column; claim deadlines took
//! that back, for the guarantee that a step held by a dead worker comes
//! back (SCHEMA.md says what it costs). The test keeps counting, so a
//! change that makes either update HOT again, or that makes a completion
//! write more than it does, is seen.
//!
//! PostgreSQL counts HOT updates per table (`pg_stat_user_tables`), from
//! each connection's counters once it goes idle or closes; the check waits
//! until every update is counted.

use std::time::{Duration, Instant};

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{BatchClaim, Completion, NewStep, StepTransition};
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
/// `2 × STEPS` updates, none is HOT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_completions_are_full_updates() {
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
                let claim = claimed.expect("claimed").claim();
                store
                    .transition_claimed(claim, StepTransition::Succeeded(json!({ "ok": 1 })))
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
        assert_eq!(
            hot, 0,
            "of {updates} updates (batched: {batched}), none should be HOT: a claim leaves the \
             claimable indexes, and a completion clears the indexed claim deadline"
        );
        db.drop_database().await;
    }
}
