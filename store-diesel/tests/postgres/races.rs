//! Races the conformance suite leaves to the backend: a refused write that
//! lost a race after its statement's snapshot reports what the step (or
//! run) is now, not what the snapshot saw.

use std::sync::Arc;

use flowstate_core::{Error, RunStatus, RunStore, StepStatus, StepStore, StepTransition};
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::postgres::PgStore;
use serde_json::json;
use tokio::sync::Barrier;

use crate::records;
use crate::support;

const RACERS: usize = 32;

/// A store on a fresh database with a connection per racer, every one
/// opened up front so the racers do not spend the race connecting one
/// after another; answers the database's URL too.
async fn racing_store() -> (Arc<PgStore>, String) {
    let (store, url) = support::store_with(StoreConfig::default().pool_size(RACERS)).await;
    let mut held = Vec::new();
    for _ in 0..RACERS {
        held.push(store.pool().get("warm").await.unwrap());
    }
    drop(held);
    (Arc::new(store), url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_transitions_have_one_winner_and_honest_losers() {
    let (store, url) = racing_store().await;
    let run = records::run(&*store, json!({})).await;
    let step = records::step(&*store, run.id, "s1", json!({})).await;
    store.claim_step(run.id, "s1", "f").await.unwrap().unwrap();

    let barrier = Arc::new(Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|i| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .transition_step(step.id, StepTransition::Succeeded(json!(i)))
                    .await
            })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => winners += 1,
            Err(Error::IllegalStepTransition { step: s, from, to }) => {
                assert_eq!(
                    (s, from, to),
                    (step.id, StepStatus::Succeeded, StepStatus::Succeeded)
                );
            }
            Err(other) => panic!("a losing transition failed with {other:?}"),
        }
    }
    assert_eq!(winners, 1);
    let after = store.get_step(step.id).await.unwrap();
    let history = store.step_history(run.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, StepStatus::Succeeded);
    assert_eq!(
        history[0].result, after.result,
        "the step and its history disagree on the winner"
    );
    support::drop_database(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_run_moves_have_one_winner_and_honest_losers() {
    let (store, url) = racing_store().await;
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
                assert_eq!(moved.status, RunStatus::Completed);
            }
            Err(Error::IllegalRunTransition { from, .. }) => assert_eq!(from, RunStatus::Completed),
            Err(other) => panic!("a losing move failed with {other:?}"),
        }
    }
    assert_eq!(winners, 1);
    support::drop_database(&url).await;
}
