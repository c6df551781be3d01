//! [`RunStore`] under real concurrency: idempotent creates and
//! status-guarded moves.

use flowstate_core::ports::RunStore;
use flowstate_core::{Error, NewRun, RunQuery, RunStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{new_run, race};

/// 32 concurrent creates with one idempotency key make one run: exactly one
/// `inserted: true`, and every caller gets its id.
pub async fn create_run_race_32_same_key<H: Harness>(h: &H) {
    let outcomes = race(h.store(), 32, |store, i| async move {
        let run = NewRun::new("wf", json!({"i": i})).with_idempotency_key("event:e1:a1");
        store.create_run(run).await
    })
    .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes.iter().filter(|o| o.inserted).count(), 1);
    let winner = outcomes.iter().find(|o| o.inserted).unwrap().record.clone();
    for outcome in &outcomes {
        assert_eq!(outcome.record, winner);
    }
    let listed = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(listed.items, vec![winner]);
}

/// 32 concurrent moves out of `running` into settled statuses: exactly one
/// succeeds; the others are `IllegalRunTransition` from the winner's status.
pub async fn set_run_status_race_32<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let targets = [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];
    let outcomes = race(h.store(), 32, |store, i| async move {
        store
            .set_run_status(run.id, targets[i % targets.len()])
            .await
    })
    .await;
    let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(
        winners.len(),
        1,
        "{} moves out of running succeeded",
        winners.len()
    );
    let won = winners[0].status;
    for outcome in &outcomes {
        match outcome {
            Ok(moved) => assert_eq!(moved.status, won),
            Err(Error::IllegalRunTransition { run: r, from, to }) => {
                assert_eq!((*r, *from), (run.id, won));
                assert!(targets.contains(to));
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(h.store().get_run(run.id).await.unwrap().status, won);
}
