//! `flowstate_pool::WorkerPool` over the backend's store: every step run
//! exactly once (handler calls counted per `(step, attempt)`, history read
//! back per attempt), retries coming back through the pool, the function
//! filter, a panicking handler, and a shutdown mid-run that finishes what
//! it claimed and loses nothing. The faults are in `pool_faults`.

use std::sync::Arc;

use flowstate_core::ports::{BatchStepStore, StepStore};
use flowstate_core::{Completion, RetryPolicy, Step, StepStatus};
use flowstate_pool::{PoolReport, WorkerPool};
use serde_json::json;
use tokio::sync::watch;

use crate::Harness;
use crate::cases::policies::pool_support::{
    FUNCTION, IN_FLIGHT, Ledger, attempts, histories, insert_steps, pool_config, read_back, within,
};

/// 300 steps, three claimers racing each other: each step's handler runs
/// once, on attempt 1, and the step reads back succeeded with the
/// handler's result and one history row.
pub async fn the_pool_runs_300_steps_exactly_once<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    const STEPS: usize = 300;
    let steps = insert_steps(h, STEPS, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(STEPS);
    // Three claimers racing each other: the store hands each step to one.
    let pool = WorkerPool::new(Arc::clone(h.store()), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                tokio::task::yield_now().await;
                Completion::Succeeded(json!({ "input": step.input }))
            }
        }
    })
    .with_config(pool_config().claimers(3))
    .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!(stats.claimed, STEPS as u64, "{stats:?}");
    assert_eq!(stats.succeeded, STEPS as u64, "{stats:?}");
    assert_eq!(
        (
            stats.failed,
            stats.commit_errors,
            stats.abandoned,
            stats.panicked
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(stats.accounted(), stats.claimed);
    assert_eq!(stats.flushed_items, STEPS as u64);
    assert!(
        stats.flushes >= 1 && stats.flushes <= STEPS as u64,
        "{stats:?}"
    );
    // At least 300 / 64 claims took something.
    let full = STEPS.div_ceil(64) as u64;
    assert!(stats.claims - stats.empty_claims >= full, "{stats:?}");
    let calls = ledger.calls();
    assert_eq!(calls.len(), STEPS);
    assert!(calls.values().all(|n| *n == 1), "a step ran twice");
    let back = read_back(&**h.store(), &steps).await;
    let rows = histories(&**h.store(), &steps).await;
    for ((step, back), rows) in steps.iter().zip(&back).zip(&rows) {
        let result = json!({ "input": step.input });
        assert_eq!(back.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(back.attempt, 1);
        assert_eq!(back.result.as_ref(), Some(&result));
        assert_eq!(calls.get(&(step.id, 1)), Some(&1));
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
        assert_eq!(rows[0].result.as_ref(), Some(&result));
    }
}

/// 150 steps with one retry, whose first attempt fails: the pool claims
/// each failed step again as attempt 2, each attempt's handler runs once,
/// and each step keeps both attempts in its history.
pub async fn a_failed_attempt_comes_back_through_the_pool_as_the_next<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    const STEPS: usize = 150;
    let steps = insert_steps(h, STEPS, FUNCTION, RetryPolicy::with_retries(1)).await;
    let ledger = Ledger::new(2 * STEPS);
    let pool = WorkerPool::new(Arc::clone(h.store()), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                if step.attempt == 1 {
                    Completion::Failed(json!("first attempt fails"))
                } else {
                    Completion::Succeeded(json!(step.attempt))
                }
            }
        }
    })
    .with_config(pool_config())
    .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;

    let steps64 = STEPS as u64;
    assert_eq!(
        (stats.claimed, stats.failed, stats.succeeded),
        (2 * steps64, steps64, steps64),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    let calls = ledger.calls();
    assert_eq!(calls.len(), 2 * STEPS);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!((step.status, step.attempt), (StepStatus::Succeeded, 2));
        assert_eq!(calls.get(&(step.id, 1)), Some(&1));
        assert_eq!(calls.get(&(step.id, 2)), Some(&1));
        assert_eq!(
            attempts(rows),
            [(1, StepStatus::Failed), (2, StepStatus::Succeeded)],
            "{}",
            step.id
        );
        assert_eq!(rows[0].error, Some(json!("first attempt fails")));
        assert_eq!(rows[1].result, Some(json!(2)));
    }
}

/// A pool for function `mine` over 100 steps of `mine` and 100 of
/// `theirs`: it runs exactly the 100 of its function, once each, and the
/// others stay pending on attempt 1, untouched.
pub async fn a_pool_for_one_function_leaves_the_others<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let mine = insert_steps(h, 100, "mine", RetryPolicy::NONE).await;
    let theirs = insert_steps(h, 100, "theirs", RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::new(Arc::clone(h.store()), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                assert_eq!(step.function.as_deref(), Some("mine"));
                ledger.record(&step);
                Completion::Succeeded(json!(null))
            }
        }
    })
    .with_config(pool_config().function("mine"))
    .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;
    assert_eq!((stats.claimed, stats.succeeded), (100, 100), "{stats:?}");
    assert_eq!(stats.panicked, 0, "a step of another function reached it");
    let calls = ledger.calls();
    assert_eq!(calls.len(), 100);
    assert!(mine.iter().all(|s| calls.get(&(s.id, 1)) == Some(&1)));
    let back = read_back(&**h.store(), &mine).await;
    assert!(back.iter().all(|s| s.status == StepStatus::Succeeded));
    let back = read_back(&**h.store(), &theirs).await;
    assert_eq!(back, theirs, "a step of another function was touched");
    for rows in histories(&**h.store(), &theirs).await {
        assert_eq!(attempts(&rows), [(1, StepStatus::Pending)]);
    }
}

/// One worker, 50 steps, a handler that panics on one of them: that step
/// fails with the panic as its error, and the worker goes on to run the
/// other 49.
pub async fn a_panicking_handler_fails_its_step_and_the_worker_goes_on<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    let steps = insert_steps(h, 50, FUNCTION, RetryPolicy::NONE).await;
    let panicky = steps[7].id;
    let ledger = Ledger::new(50);
    let pool = WorkerPool::new(Arc::clone(h.store()), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let ledger = Arc::clone(&ledger);
            async move {
                ledger.record(&step);
                assert!(step.id != panicky, "the handler panics on this step");
                Completion::Succeeded(json!(1))
            }
        }
    })
    .with_config(pool_config().workers(1))
    .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;
    assert_eq!(
        (stats.claimed, stats.succeeded, stats.failed, stats.panicked),
        (50, 49, 1, 1),
        "{stats:?}"
    );
    assert!(ledger.calls().values().all(|n| *n == 1), "a step ran twice");
    let back = h.store().get_step(panicky).await.unwrap();
    assert_eq!(back.status, StepStatus::Failed);
    assert!(back.error.unwrap()["panic"].is_string());
    let others = read_back(&**h.store(), &steps).await;
    let succeeded = others.iter().filter(|s| s.status == StepStatus::Succeeded);
    assert_eq!(succeeded.count(), 49);
}

/// 300 steps, a stop asked for from another task once 60 handlers ran,
/// while the handlers called after those are still running: shutdown waits
/// for them, every claimed step is run once and written, none is left
/// running, and the rest stay pending (the in-flight bound keeps the pool
/// from having claimed more than 60 + 128).
pub async fn shutdown_mid_run_finishes_what_it_claimed_and_loses_nothing<H: Harness>(h: &H)
where
    H::Store: BatchStepStore,
{
    const STEPS: usize = 300;
    const STOP_AT: usize = 60;
    let steps = insert_steps(h, STEPS, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(STOP_AT);
    let (open, gate) = watch::channel(false);
    let config = pool_config().workers(4).claimers(2);
    let pool = WorkerPool::new(Arc::clone(h.store()), {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            let (ledger, mut gate) = (Arc::clone(&ledger), gate.clone());
            async move {
                // The calls after the 60th hold until the stop was asked.
                if ledger.record(&step) > STOP_AT {
                    let _ = gate.wait_for(|open| *open).await;
                }
                tokio::task::yield_now().await;
                Completion::Succeeded(json!(2))
            }
        }
    })
    .with_config(config.clone())
    .spawn();
    let handle = pool.control();
    ledger.reached().await;
    // Stopped from elsewhere, mid-run; shutdown drains.
    handle.stop();
    open.send_replace(true);
    let stats: PoolReport = within("shutdown", pool.shutdown()).await;

    assert!(stats.claimed >= STOP_AT as u64, "{stats:?}");
    assert!(
        stats.claimed <= (STOP_AT + IN_FLIGHT) as u64,
        "claimed past the in-flight bound after the stop: {stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed, "{stats:?}");
    assert_eq!(stats.succeeded, stats.claimed, "{stats:?}");
    assert_eq!(stats.flushed_items, stats.claimed);
    assert_eq!(stats, handle.report(), "nothing moves after shutdown");
    let calls = ledger.calls();
    assert_eq!(calls.len() as u64, stats.claimed);
    assert!(calls.values().all(|n| *n == 1));
    let back = read_back(&**h.store(), &steps).await;
    let count = |status| back.iter().filter(|s| s.status == status).count() as u64;
    assert_eq!(
        count(StepStatus::Running),
        0,
        "a claimed step was left running"
    );
    assert_eq!(count(StepStatus::Succeeded), stats.claimed);
    assert_eq!(count(StepStatus::Pending), STEPS as u64 - stats.claimed);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in back.iter().zip(&rows) {
        let ran = calls.get(&(step.id, 1));
        match step.status {
            StepStatus::Succeeded => assert_eq!(ran, Some(&1)),
            _ => assert_eq!(ran, None, "{} ran but was not written", step.id),
        }
        assert_eq!(attempts(rows), [(1, step.status)], "{}", step.id);
    }
}
