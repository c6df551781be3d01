//! Races the conformance suite leaves to the backend: a refused write that
//! lost a race after its statement's snapshot reports what the step (or
//! run) is now, not what the snapshot saw. Exactly one racer wins; every
//! loser gets the typed refusal naming the winner's status.

use std::sync::Arc;

use flowstate_core::{Error, RunStatus, RunStore, StepStatus, StepStore, StepTransition};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;
use tokio::sync::Barrier;

use crate::common::db::TestDb;
use crate::common::records;

const RACERS: usize = 32;

/// A store on a fresh database with a connection per racer, all opened up
/// front so the racers do not spend the race connecting one after another.
async fn racing_store() -> (Arc<DieselStore>, TestDb) {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let store = db.warm_store(StoreConfig::default(), RACERS).await;
    (Arc::new(store), db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_transitions_have_one_winner_and_honest_losers() {
    let (store, db) = racing_store().await;
    let run = records::run(&*store, json!({})).await;
    let step = records::step(&*store, run.id, "s1", json!({})).await;
    store.claim_step(run.id, "s1", "f").await.unwrap().unwrap();

    let barrier = Arc::new(Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|i| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                let outcome = store
                    .transition_step(step.id, StepTransition::Succeeded(json!(i)))
                    .await;
                (i, outcome)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (i, Ok(())) => winners.push(i),
            (_, Err(Error::IllegalStepTransition { step: s, from, to })) => {
                assert_eq!(
                    (s, from, to),
                    (step.id, StepStatus::Succeeded, StepStatus::Succeeded),
                    "a loser must report the status the winner wrote"
                );
            }
            (_, Err(other)) => panic!("a losing transition failed with {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let after = store.get_step(step.id).await.unwrap();
    assert_eq!(after.status, StepStatus::Succeeded);
    assert_eq!(
        after.result,
        Some(json!(winners[0])),
        "the step holds the winner's result"
    );
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Succeeded);
    assert_eq!(
        history[0].result, after.result,
        "the step and its history disagree on the winner"
    );
    drop(store);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_run_moves_have_one_winner_and_honest_losers() {
    let (store, db) = racing_store().await;
    let run = records::run(&*store, json!({})).await;
    let barrier = Arc::new(Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|_| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                store.set_run_status(run.id, RunStatus::Completed).await
            })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(moved) => {
                winners += 1;
                assert_eq!((moved.id, moved.status), (run.id, RunStatus::Completed));
            }
            Err(Error::IllegalRunTransition { run: r, from, to }) => assert_eq!(
                (r, from, to),
                (run.id, RunStatus::Completed, RunStatus::Completed),
                "a loser must report the status the winner wrote"
            ),
            Err(other) => panic!("a losing move failed with {other:?}"),
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(
        store.get_run(run.id).await.unwrap().status,
        RunStatus::Completed
    );
    drop(store);
    db.drop_database().await;
}
