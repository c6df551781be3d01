//! Races the conformance suite leaves to the backend: a refused write that
//! lost a race after its statement's snapshot reports what the step (or
//! run) is now, not what the snapshot saw. Exactly one racer wins; every
//! loser gets the typed refusal naming the winner's status. And a run's
//! delete, racing batch claims that write history, leaves no history row
//! without its step (PostgreSQL deletes history by trigger, not by key).

use std::sync::Arc;

use flowstate_core::ports::{BatchStepStore, RunStore, StepStore};
use flowstate_core::{BatchClaim, Completion, Error, RunStatus, StepStatus, StepTransition};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deletes_racing_batch_claims_leave_no_history_without_its_step() {
    const RUNS: usize = 48;
    const STEPS: usize = 8;
    const CLAIMERS: usize = 8;
    let (store, db) = racing_store().await;
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let run = records::run(&*store, json!({})).await;
        for s in 0..STEPS {
            records::step(&*store, run.id, format!("s{s}"), json!({})).await;
        }
        runs.push(run.id);
    }
    let barrier = Arc::new(Barrier::new(CLAIMERS + 1));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|_| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                let mut claimed = 0;
                loop {
                    let batch = store.claim_batch(&BatchClaim::new(4)).await.unwrap();
                    if batch.is_empty() {
                        return claimed;
                    }
                    claimed += batch.len();
                    let completions: Vec<_> = batch
                        .iter()
                        .map(|step| (step.claim(), Completion::Succeeded(json!(1))))
                        .collect();
                    // A step deleted since its claim is an unknown step:
                    // refused alone, never written. A delete locks a run's
                    // steps in its own order, so a batch holding two of
                    // them can deadlock with it: the loser's error is
                    // retryable, and a retry finishes the batch.
                    loop {
                        match store.complete_batch(completions.clone()).await {
                            Ok(_) => break,
                            Err(err) if err.is_retryable() => {}
                            Err(err) => panic!("complete_batch: {err:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    let deleter = {
        let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
        let doomed: Vec<_> = runs.iter().copied().step_by(2).collect();
        tokio::spawn(async move {
            barrier.wait().await;
            for run in doomed {
                store.delete_run(run).await.unwrap();
            }
        })
    };
    let mut claimed = 0;
    for claimer in claimers {
        claimed += claimer.await.unwrap();
    }
    deleter.await.unwrap();

    assert!(claimed >= RUNS / 2 * STEPS, "only {claimed} claimed");
    assert_eq!(
        db.count(
            "SELECT COUNT(*) AS n FROM flowstate_step_history AS h \
             WHERE NOT EXISTS (SELECT 1 FROM flowstate_steps AS s WHERE s.id = h.step_id)"
        )
        .await,
        0,
        "history rows outlived their steps"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM flowstate_steps").await,
        (RUNS / 2 * STEPS) as i64,
        "the kept runs' steps, and only those"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM flowstate_step_history")
            .await,
        (RUNS / 2 * STEPS) as i64,
        "one history row per kept step"
    );
    drop(store);
    db.drop_database().await;
}

/// The wake sweep meets a run whose due wait another transaction is
/// replacing (a claimer took it and put it to wait again, not due): the
/// sweep's snapshot saw the old wait due, so it picks the run, then waits
/// for that transaction's row lock. Once it commits, READ COMMITTED
/// re-checks the row as committed, and the sweep must leave the new wait
/// alone: ending it would wake the run before its time, without its
/// signal. Before the sweep's `UPDATE` re-stated the due condition on the
/// row itself (its picks are a subquery, which a re-check does not read
/// again), it cleared the new wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wake_sweep_leaves_a_wait_begun_while_it_waited_for_the_row() {
    crate::common::wake_race::a_wait_begun_under_the_sweep_stands::<diesel_async::AsyncPgConnection>(
        Dialect::Postgres,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND query LIKE 'UPDATE flowstate_runs SET wake_at = NULL%'",
    )
    .await;
}
