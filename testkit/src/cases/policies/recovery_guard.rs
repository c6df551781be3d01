//! The settled-run guard, `flowstate_recovery::handle_run_message`: a
//! message for a completed, failed or cancelled run is answered without
//! taking its lease or running its body; a suspended run is still handled;
//! a message delivered many times at once runs the body once.
//!
//! The translated cases of the seed engine's terminal-run-guard tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flowstate_core::ports::{RunLeaseStore, RunRecoveryStore, RunStore};
use flowstate_core::{RunId, RunLease, RunOutcome, RunStatus};
use flowstate_recovery::{Handled, handle_run_message};

use crate::LeaseHarness;
use crate::cases::leases::basics::LEASE;
use crate::cases::support::{new_run, race, run_in};

/// Handles a message for `run` with a body that counts its entries in
/// `entered` and answers the lease's token.
async fn message<S: RunRecoveryStore>(
    store: &S,
    run: RunId,
    entered: &AtomicUsize,
) -> Handled<u64> {
    handle_run_message(
        store,
        run,
        "orchestrator",
        LEASE,
        |lease: RunLease| async move {
            entered.fetch_add(1, Ordering::SeqCst);
            lease.token
        },
    )
    .await
    .expect("handle_run_message")
}

/// A completed, failed or cancelled run: answered as settled, its lease
/// never taken (the token stays 0), the body never entered.
pub async fn settled_runs_are_answered_without_their_lease<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    for status in [
        RunStatus::Failed,
        RunStatus::Completed,
        RunStatus::Cancelled,
    ] {
        let run = run_in(h, status).await;
        let entered = AtomicUsize::new(0);
        let handled = message(&**h.store(), run.id, &entered).await;
        assert_eq!(handled, Handled::Settled(status));
        let state = h.store().lease_state(run.id).await.unwrap();
        assert_eq!(
            (state.token, state.worker),
            (0, None),
            "the lease was taken for a {status} run"
        );
        assert_eq!(entered.load(Ordering::SeqCst), 0, "the body was replayed");
    }
}

/// Guards the case above, which a guard refusing everything would pass: a
/// suspended run ends a pass, not the run, and is handled under a lease; so
/// is a running one.
pub async fn suspended_and_running_runs_are_handled<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    for status in [RunStatus::Suspended, RunStatus::Running] {
        let run = run_in(h, status).await;
        let entered = AtomicUsize::new(0);
        assert_eq!(
            message(&**h.store(), run.id, &entered).await,
            Handled::Ran(1)
        );
        assert_eq!(entered.load(Ordering::SeqCst), 1);
        let state = h.store().lease_state(run.id).await.unwrap();
        assert_eq!(state.worker.as_deref(), Some("orchestrator"));
    }
}

/// A run another worker holds is not runnable: the message is answered
/// without the body. Once that worker settles the run, a late message is
/// answered as settled.
pub async fn held_runs_are_not_run_twice<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let run = new_run(h).await;
    let held = h.store().claim_run("other", LEASE).await.unwrap().unwrap();
    let entered = AtomicUsize::new(0);
    assert_eq!(
        message(&**h.store(), run.id, &entered).await,
        Handled::NotRunnable
    );
    h.store()
        .finish(run.id, held.token, RunOutcome::Completed)
        .await
        .unwrap();
    let late = message(&**h.store(), run.id, &entered).await;
    assert_eq!(late, Handled::Settled(RunStatus::Completed));
    assert_eq!(entered.load(Ordering::SeqCst), 0);
}

/// A run with a cancel requested is settled as cancelled by the message,
/// not run.
pub async fn a_cancel_requested_run_is_cancelled_not_run<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let run = new_run(h).await;
    h.store().request_cancel(run.id).await.unwrap();
    let entered = AtomicUsize::new(0);
    assert_eq!(
        message(&**h.store(), run.id, &entered).await,
        Handled::Cancelled
    );
    assert_eq!(entered.load(Ordering::SeqCst), 0);
    let status = h.store().get_run(run.id).await.unwrap().status;
    assert_eq!(status, RunStatus::Cancelled);
}

/// One message delivered 16 times at once: the body runs exactly once,
/// every other delivery is answered as not runnable.
pub async fn a_message_delivered_16_times_runs_once<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore + 'static,
{
    let run = new_run(h).await.id;
    let entered = Arc::new(AtomicUsize::new(0));
    let answers = race(h.store(), 16, |store, _| {
        let entered = Arc::clone(&entered);
        async move { message(&*store, run, &entered).await }
    })
    .await;
    let ran = answers
        .iter()
        .filter(|a| matches!(a, Handled::Ran(1)))
        .count();
    let refused = answers
        .iter()
        .filter(|a| **a == Handled::NotRunnable)
        .count();
    assert_eq!((ran, refused), (1, 15), "{answers:?}");
    assert_eq!(entered.load(Ordering::SeqCst), 1);
}
