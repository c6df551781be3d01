//! [`RunLeaseStore`] releases and cancels: a yield frees the lease and
//! clears the failures, failures in a row fail the run at their limit, and
//! a requested cancel is carried out by the next claim.

use flowstate_core::lease::MAX_CONSECUTIVE_FAILURES;
use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{Error, Release, Released, RunOutcome, RunStatus};

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, PAST_LEASE, claim};
use crate::cases::support::{assert_err, new_run};

/// A yield frees the lease at once (another worker claims the run before
/// it would have expired) and clears the failure count.
pub async fn release_yield_frees_and_resets_failures<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    let released = h
        .store()
        .release(run.id, lease.token, Release::failure("flaky"))
        .await
        .unwrap();
    assert_eq!(
        released,
        Released {
            status: RunStatus::Running,
            failures: 1
        }
    );
    let lease = claim(h, "w2").await;
    assert_eq!(lease.failures, 1);
    let released = h
        .store()
        .release(run.id, lease.token, Release::Yield)
        .await
        .unwrap();
    assert_eq!(released.failures, 0);
    let lease = claim(h, "w3").await;
    assert_eq!((lease.run.id, lease.failures), (run.id, 0));
    assert_err!(
        h.store()
            .release(run.id, lease.token - 1, Release::Yield)
            .await,
        Error::LeaseLost { .. }
    );
}

/// Releases that fail [`MAX_CONSECUTIVE_FAILURES`] times in a row fail the
/// run, with the last reason recorded; it is never claimed again.
pub async fn failure_limit_fails_the_run<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    for n in 1..=MAX_CONSECUTIVE_FAILURES {
        let lease = claim(h, "w1").await;
        let released = h
            .store()
            .release(run.id, lease.token, Release::failure(format!("boom {n}")))
            .await
            .unwrap();
        let expected = if n == MAX_CONSECUTIVE_FAILURES {
            RunStatus::Failed
        } else {
            RunStatus::Running
        };
        assert_eq!(
            released,
            Released {
                status: expected,
                failures: n
            }
        );
    }
    assert_eq!(
        h.store().get_run(run.id).await.unwrap().status,
        RunStatus::Failed
    );
    let state = h.store().lease_state(run.id).await.unwrap();
    let last = format!("boom {MAX_CONSECUTIVE_FAILURES}");
    assert_eq!(state.failure_reason.as_deref(), Some(last.as_str()));
    assert!(h.store().claim_run("w2", LEASE).await.unwrap().is_none());
}

/// A release may name its own limit.
pub async fn failure_limit_is_overridable<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    let once = Release::failure("first").with_limit(2);
    let released = h
        .store()
        .release(run.id, lease.token, once.clone())
        .await
        .unwrap();
    assert_eq!(released.status, RunStatus::Running);
    let lease = claim(h, "w1").await;
    let released = h.store().release(run.id, lease.token, once).await.unwrap();
    assert_eq!(
        released,
        Released {
            status: RunStatus::Failed,
            failures: 2
        }
    );
}

/// A cancel request (twice: it is idempotent) is carried out by the next
/// claim that finds the run free: the run is cancelled, not handed out,
/// and its holder's lease, taken before the request, is then lost.
pub async fn cancel_is_settled_at_the_next_claim<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.store().request_cancel(run.id).await.unwrap();
    h.store().request_cancel(run.id).await.unwrap();
    assert!(
        h.store()
            .lease_state(run.id)
            .await
            .unwrap()
            .cancel_requested
    );
    assert!(
        h.store().claim_run("w2", LEASE).await.unwrap().is_none(),
        "the lease holds until it runs out"
    );
    h.advance_lease_clock(PAST_LEASE).await;
    assert!(h.store().claim_run("w2", LEASE).await.unwrap().is_none());
    assert_eq!(
        h.store().get_run(run.id).await.unwrap().status,
        RunStatus::Cancelled
    );
    assert!(
        !h.store()
            .lease_state(run.id)
            .await
            .unwrap()
            .cancel_requested
    );
    assert_err!(
        h.store()
            .finish(run.id, lease.token, RunOutcome::Completed)
            .await,
        Error::LeaseLost { .. }
    );
    // A settled run stays as it is.
    h.store().request_cancel(run.id).await.unwrap();
    assert!(
        !h.store()
            .lease_state(run.id)
            .await
            .unwrap()
            .cancel_requested
    );
}
