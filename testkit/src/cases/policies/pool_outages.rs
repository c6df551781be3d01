//! `flowstate_pool::WorkerPool` through a store outage and a lost claim:
//! flushes that fail a few times are retried and every completion is
//! written; a store that stays down past the give-up limit leaves every
//! step running, counted as given up, for recovery's
//! `expire_step_claims` to take back; a completion that comes after its
//! claim ran out is refused as `ClaimLost`, counted, and writes nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{BatchStepStore, RecoveryStore};
use flowstate_core::step_claim::claim_expired_error;
use flowstate_core::{BatchClaim, Completion, RetryPolicy, Step, StepStatus};
use flowstate_pool::WorkerPool;
use serde_json::json;
use tokio::sync::watch;

use crate::Harness;
use crate::cases::policies::pool_support::{
    CLAIM_TIMEOUT, FUNCTION, Ledger, Watched, attempts, histories, insert_expiring_steps,
    insert_steps, pool_config, read_back, recording, retry_within, within,
};

/// Moves the harness's clock (and so the store's lease clock, which claim
/// deadlines are measured on) past [`CLAIM_TIMEOUT`] and takes back every
/// expired claim, checking that exactly `steps` were taken back, each in
/// attempt 1, retrying as `retrying` says.
///
/// The expiry skips rows another transaction holds locked (`SKIP LOCKED`:
/// on MySQL a batch claim the stopping pool still had in flight may hold
/// the running rows it scanned), and takes them on a later pass, as the
/// sweeper's next pass would: so passes repeat, a few milliseconds apart,
/// until every step is taken back or 50 passes took nothing more. The
/// clock moves once; a step taken twice, or one not ours, still fails.
async fn expire<H: Harness>(h: &H, steps: &[Step], retrying: bool)
where
    H::Store: RecoveryStore,
{
    h.clock().advance(CLAIM_TIMEOUT + Duration::from_secs(1));
    let mut expired = Vec::new();
    for _ in 0..50 {
        expired.extend(
            h.store()
                .expire_step_claims(1_000)
                .await
                .expect("expire_step_claims"),
        );
        if expired.len() >= steps.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let taken: HashSet<_> = expired.iter().map(|e| e.step).collect();
    let ours: HashSet<_> = steps.iter().map(|s| s.id).collect();
    assert_eq!(taken, ours, "recovery took back other steps than ours");
    assert_eq!(expired.len(), steps.len());
    assert!(
        expired
            .iter()
            .all(|e| e.attempt == 1 && e.retrying == retrying),
        "{expired:?}"
    );
}

/// 100 steps, the first three flush tries failing with a retryable error
/// and the fourth held in the store: while it is held no completion is
/// answered and no step is written; released, every step is written once
/// (succeeded, one history row), the pool counts 3 retries and nothing
/// given up, and the first flush's items were sent four times.
pub async fn a_pool_whose_flushes_fail_three_times_writes_every_completion<H: Harness>(h: &H)
where
    H::Store: BatchStepStore + RecoveryStore,
{
    let store = Arc::new(Watched::over(h.store()).failing_first(3).holding_call(3));
    let steps = insert_steps(h, 100, FUNCTION, RetryPolicy::NONE).await;
    let ledger = Ledger::new(100);
    let pool = WorkerPool::new(Arc::clone(&store), recording(&ledger, json!(9)))
        .with_config(pool_config())
        .spawn();
    within("the fourth try", store.entered.notified()).await;
    let held = pool.report();
    assert_eq!(
        (held.accounted(), held.flush_retries),
        (0, 3),
        "answered a failed try: {held:?}"
    );
    let back = read_back(&**h.store(), &steps).await;
    assert!(
        back.iter().all(|s| s.status != StepStatus::Succeeded),
        "written by a failed try"
    );
    store.release.notify_one();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!(
        (stats.claimed, stats.succeeded, stats.commit_errors),
        (100, 100, 0),
        "{stats:?}"
    );
    assert_eq!(
        (stats.flush_retries, stats.given_up, stats.claims_lost),
        (3, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.accounted(), stats.claimed);
    let sizes = store.flush_sizes();
    assert_eq!(sizes.len() as u64, stats.flushes + 3, "{sizes:?}");
    assert!(sizes[..4].iter().all(|n| *n == sizes[0]), "{sizes:?}");
    assert_eq!(sizes[3..].iter().sum::<usize>(), 100, "{sizes:?}");
    let calls = ledger.calls();
    assert!(
        steps.iter().all(|s| calls.get(&(s.id, 1)) == Some(&1)),
        "a step ran twice"
    );
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(step.status, StepStatus::Succeeded, "{}", step.id);
        assert_eq!(step.result, Some(json!(9)), "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Succeeded)], "{}", step.id);
    }
}

/// 40 steps (one retry each), every flush failing with a retryable error,
/// a give-up limit of 200 ms: shutdown returns once the flushes gave up,
/// every step's completion is counted as given up, nothing was
/// acknowledged and every step is still running in attempt 1. Once the
/// clock passes the claim deadline, recovery takes every one back (attempt
/// 1 failed with the claim-expired error) and they are claimable again, as
/// attempt 2.
pub async fn a_pool_gives_up_on_a_store_that_stays_down_and_recovery_takes_the_steps_back<
    H: Harness,
>(
    h: &H,
) where
    H::Store: BatchStepStore + RecoveryStore,
{
    let store = Arc::new(Watched::over(h.store()).failing());
    let steps = insert_expiring_steps(h, 40, RetryPolicy::with_retries(1)).await;
    let ledger = Ledger::new(40);
    let config = pool_config().flush_retry(retry_within(Duration::from_millis(200)));
    let pool = WorkerPool::new(Arc::clone(&store), recording(&ledger, json!(1)))
        .with_config(config.clone())
        .spawn();
    ledger.reached().await;
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!(
        (stats.claimed, stats.succeeded, stats.claims_lost),
        (40, 0, 0),
        "{stats:?}"
    );
    assert_eq!((stats.given_up, stats.commit_errors), (40, 40), "{stats:?}");
    assert_eq!(stats.accounted(), stats.claimed);
    let calls = store.flush_sizes().len() as u64;
    assert!(stats.flush_retries >= 1, "never retried: {stats:?}");
    assert_eq!(calls, stats.flushes + stats.flush_retries, "{stats:?}");
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(
            (step.status, step.attempt),
            (StepStatus::Running, 1),
            "{}",
            step.id
        );
        assert_eq!(attempts(rows), [(1, StepStatus::Running)], "{}", step.id);
    }

    expire(h, &steps, true).await;
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(
            (step.status, step.attempt),
            (StepStatus::Failed, 1),
            "{}",
            step.id
        );
        assert_eq!(step.error, Some(claim_expired_error()), "{}", step.id);
        assert_eq!(attempts(rows), [(1, StepStatus::Failed)], "{}", step.id);
        assert_eq!(rows[0].error, Some(claim_expired_error()), "{}", step.id);
    }
    let again = h
        .store()
        .claim_batch(&BatchClaim::new(100))
        .await
        .expect("claim_batch");
    let ids: HashSet<_> = again.iter().map(|s| s.id).collect();
    assert_eq!(
        ids,
        steps.iter().map(|s| s.id).collect(),
        "not claimable again"
    );
    assert!(again.iter().all(|s| s.attempt == 2), "{again:?}");
    for rows in histories(&**h.store(), &steps).await {
        assert_eq!(
            attempts(&rows),
            [(1, StepStatus::Failed), (2, StepStatus::Running)]
        );
    }
}

/// 16 steps, each handler held until after recovery took its claim back
/// (the clock moved past the claim deadline, `expire_step_claims`): each
/// late completion is answered `ClaimLost` and counted as a claim lost,
/// and none is written: every step keeps the expiry's failure.
pub async fn a_completion_whose_claim_ran_out_is_claim_lost_and_writes_nothing<H: Harness>(h: &H)
where
    H::Store: BatchStepStore + RecoveryStore,
{
    const N: usize = 16;
    let store = Arc::new(Watched::over(h.store()));
    let steps = insert_expiring_steps(h, N, RetryPolicy::NONE).await;
    let ledger = Ledger::new(N);
    let (open, gate) = watch::channel(false);
    let handler = {
        let ledger = Arc::clone(&ledger);
        move |step: Step| {
            ledger.record(&step);
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Completion::Succeeded(json!("late"))
            }
        }
    };
    let pool = WorkerPool::new(Arc::clone(&store), handler)
        .with_config(pool_config().workers(N))
        .spawn();
    ledger.reached().await;
    pool.control().stop();
    expire(h, &steps, false).await;
    open.send_replace(true);
    let stats = within("shutdown", pool.shutdown()).await;

    assert_eq!(
        (stats.claimed, stats.succeeded, stats.failed),
        (N as u64, 0, 0),
        "{stats:?}"
    );
    assert_eq!(
        (stats.claims_lost, stats.commit_errors),
        (N as u64, N as u64),
        "{stats:?}"
    );
    assert_eq!((stats.given_up, stats.flush_retries), (0, 0), "{stats:?}");
    assert_eq!(stats.accounted(), stats.claimed);
    let rows = histories(&**h.store(), &steps).await;
    for (step, rows) in read_back(&**h.store(), &steps).await.iter().zip(&rows) {
        assert_eq!(
            (step.status, step.attempt),
            (StepStatus::Failed, 1),
            "{}",
            step.id
        );
        assert_eq!(step.error, Some(claim_expired_error()), "{}", step.id);
        assert_eq!(step.result, None, "the late completion wrote");
        assert_eq!(attempts(rows), [(1, StepStatus::Failed)], "{}", step.id);
        assert_eq!(rows[0].result, None, "the late completion wrote");
    }
}
