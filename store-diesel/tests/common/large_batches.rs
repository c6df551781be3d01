//! Batches larger than one listed statement carries
//! (`sql_listed::MAX_LISTED`, 500 steps, on MySQL and SQLite) and a batch
//! whose moves are partly refused. Written once, run on every dialect.

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{BatchClaim, Completion, NewStep, RetryPolicy, StepStatus};
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use super::db::TestDb;
use super::records;

/// Steps in the batch: more than two chunks of 500, and more than a
/// batch claim takes at once (1,000).
const STEPS: usize = 1_201;

/// Every one of [`STEPS`] steps is claimed in two batch claims, completed
/// in one batch (a few as failures), and each has exactly the history row
/// its completion wrote; a second batch naming them all again moves none.
pub async fn a_batch_over_many_chunks_moves_every_step(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await;
    for index in 0..STEPS {
        store
            .insert_step(
                NewStep::new(run.id, format!("s{index}"), "f", json!({}))
                    .with_retry(RetryPolicy::NONE),
            )
            .await
            .unwrap();
    }

    let mut claimed = store.claim_batch(&BatchClaim::new(1_000)).await.unwrap();
    assert_eq!(claimed.len(), 1_000);
    claimed.extend(store.claim_batch(&BatchClaim::new(1_000)).await.unwrap());
    assert_eq!(claimed.len(), STEPS, "every step claimed once");
    let running = db
        .count("SELECT COUNT(*) AS n FROM flowstate_step_history WHERE status = 'running'")
        .await;
    assert_eq!(running, STEPS as i64, "a running history row per claim");

    let completions: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let completion = if index % 100 == 7 {
                Completion::Failed(json!({ "index": index }))
            } else {
                Completion::Succeeded(json!({ "index": index }))
            };
            (step.claim(), completion)
        })
        .collect();
    let outcomes = store.complete_batch(completions.clone()).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let failed = (0..STEPS).filter(|index| index % 100 == 7).count() as i64;
    let counts = (
        db.count("SELECT COUNT(*) AS n FROM flowstate_steps WHERE status = 'succeeded'")
            .await,
        db.count("SELECT COUNT(*) AS n FROM flowstate_steps WHERE status = 'failed'")
            .await,
        db.count(
            "SELECT COUNT(*) AS n FROM flowstate_step_history WHERE status = 'succeeded' \
             AND succeeded_at IS NOT NULL AND result IS NOT NULL",
        )
        .await,
        db.count(
            "SELECT COUNT(*) AS n FROM flowstate_step_history WHERE status = 'failed' \
             AND failed_at IS NOT NULL AND error IS NOT NULL",
        )
        .await,
    );
    assert_eq!(
        counts,
        (STEPS as i64 - failed, failed, STEPS as i64 - failed, failed)
    );
    let last = claimed.last().unwrap();
    let read = store.get_step(last.id).await.unwrap();
    assert_eq!(read.status, StepStatus::Succeeded);
    assert_eq!(read.result, Some(json!({ "index": STEPS - 1 })));

    // The same completions again (a flush retried after an unknown
    // outcome): each is a repeat of what is written, answered `Ok`, and
    // nothing is written twice.
    let again = store.complete_batch(completions).await.unwrap();
    assert!(again.iter().all(Result::is_ok), "{again:?}");
    let moved_again = db
        .count("SELECT COUNT(*) AS n FROM flowstate_steps WHERE status = 'running'")
        .await;
    assert_eq!(moved_again, 0);
    let history = db
        .count("SELECT COUNT(*) AS n FROM flowstate_step_history")
        .await;
    assert_eq!(history, STEPS as i64, "one history row per step");
    db.drop_database().await;
}

/// A batch in which one step is already done with another result: that
/// item's claim is lost, every other one moves (on MySQL this is the path
/// that locks and re-reads).
pub async fn a_partly_refused_batch_moves_the_rest(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let store = db.store(StoreConfig::default()).await;
    let run = records::run(&store, json!({})).await;
    for name in ["a", "b", "c"] {
        records::step(&store, run.id, name, json!({})).await;
    }
    let claimed = store.claim_batch(&BatchClaim::new(10)).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let first = vec![(claimed[1].claim(), Completion::Succeeded(json!("early")))];
    assert!(store.complete_batch(first).await.unwrap()[0].is_ok());

    let batch = claimed
        .iter()
        .map(|step| (step.claim(), Completion::Succeeded(json!(step.name))))
        .collect();
    let outcomes = store.complete_batch(batch).await.unwrap();
    assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
    assert!(
        matches!(
            outcomes[1],
            Err(flowstate_core::Error::ClaimLost { attempt: 1, .. })
        ),
        "{outcomes:?}"
    );
    let early = store.get_step(claimed[1].id).await.unwrap();
    assert_eq!(
        early.result,
        Some(json!("early")),
        "the refused item wrote nothing"
    );
    for index in [0, 2] {
        let step = store.get_step(claimed[index].id).await.unwrap();
        assert_eq!(step.status, StepStatus::Succeeded);
        assert_eq!(step.result, Some(json!(claimed[index].name)));
    }
    db.drop_database().await;
}
