//! [`RunLeaseStore`]: which runs a claim takes, fencing tokens, renewal,
//! finishing, releases and the consecutive-failure limit, cancel.
//!
//! Time moves only through [`LeaseHarness::advance_lease_clock`], and every
//! lease is long enough (minutes) that a slow machine cannot expire one
//! behind a case's back.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::lease::LONGEST_LEASE;
use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{Error, Release, RunId, RunOutcome, RunStatus};

use crate::LeaseHarness;
use crate::cases::support::{assert_err, new_run, run_in};

/// The lease the cases take: long enough that no case sees it run out
/// unless it moves the lease clock.
pub(crate) const LEASE: Duration = Duration::from_secs(5 * 60);

/// Less than [`LEASE`]: moving the lease clock this far expires nothing.
pub(crate) const ALMOST_LEASE: Duration = Duration::from_secs(4 * 60);

/// More than [`LEASE`]: moving the lease clock this far expires a lease.
pub(crate) const PAST_LEASE: Duration = Duration::from_secs(6 * 60);

/// A claim of one run by `worker`, which must find one.
pub(crate) async fn claim<H: LeaseHarness>(h: &H, worker: &str) -> flowstate_core::RunLease {
    h.store()
        .claim_run(worker, LEASE)
        .await
        .expect("claim_run")
        .expect("a runnable run")
}

/// Runs are claimed oldest first, each once, with the worker and the run as
/// it is.
pub async fn claim_takes_the_oldest_runnable_run<H: LeaseHarness>(h: &H) {
    let first = new_run(h).await;
    h.clock().advance(Duration::from_millis(1));
    let second = new_run(h).await;
    let lease = claim(h, "w1").await;
    assert_eq!(lease.run, first);
    assert_eq!(lease.worker, "w1");
    assert_eq!(lease.token, 1);
    assert_eq!(lease.failures, 0);
    assert_eq!(claim(h, "w2").await.run.id, second.id);
    assert!(h.store().claim_run("w3", LEASE).await.unwrap().is_none());
    let state = h.store().lease_state(first.id).await.unwrap();
    assert_eq!(state.token, 1);
    assert_eq!(state.worker.as_deref(), Some("w1"));
    assert_eq!(state.expires_at, Some(lease.expires_at));
}

/// Settled runs are never claimed; a suspended run is (it is not settled);
/// a leased run is not claimed again while its lease holds.
pub async fn claim_leaves_settled_and_leased_runs<H: LeaseHarness>(h: &H) {
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        run_in(h, status).await;
    }
    let suspended = run_in(h, RunStatus::Suspended).await;
    let lease = claim(h, "w1").await;
    assert_eq!(lease.run.id, suspended.id);
    assert_eq!(lease.run.status, RunStatus::Suspended);
    assert!(h.store().claim_run("w2", LEASE).await.unwrap().is_none());
    h.advance_lease_clock(ALMOST_LEASE).await;
    assert!(
        h.store().claim_run("w2", LEASE).await.unwrap().is_none(),
        "a lease was taken before it ran out"
    );
}

/// An empty store has nothing to claim, one run or a batch.
pub async fn claim_with_nothing_runnable_is_none<H: LeaseHarness>(h: &H) {
    assert!(h.store().claim_run("w1", LEASE).await.unwrap().is_none());
    assert!(
        h.store()
            .claim_runs("w1", 5, LEASE)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Every claim of a run raises its token by one, whoever claims.
pub async fn token_rises_with_every_claim<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    for expected in 1..=3 {
        let lease = claim(h, &format!("w{expected}")).await;
        assert_eq!((lease.run.id, lease.token), (run.id, expected));
        h.advance_lease_clock(PAST_LEASE).await;
    }
    let lease = claim(h, "w4").await;
    h.store()
        .release(run.id, lease.token, Release::Yield)
        .await
        .unwrap();
    assert_eq!(claim(h, "w5").await.token, 5);
}

/// A lease that ran out is taken over; the old holder's renew, release and
/// finish are [`Error::LeaseLost`] and write nothing.
pub async fn expired_lease_is_taken_over<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let old = claim(h, "old").await;
    h.advance_lease_clock(PAST_LEASE).await;
    let new = claim(h, "new").await;
    assert_eq!(new.run.id, run.id);
    assert_eq!(new.token, old.token + 1);
    let before = h.store().lease_state(run.id).await.unwrap();
    let token = old.token;
    assert_err!(
        h.store().renew(run.id, token, LEASE).await,
        Error::LeaseLost { run: r, token: t } if r == run.id && t == token
    );
    assert_err!(
        h.store().finish(run.id, token, RunOutcome::Completed).await,
        Error::LeaseLost { .. }
    );
    assert_err!(
        h.store()
            .release(run.id, token, Release::failure("old"))
            .await,
        Error::LeaseLost { .. }
    );
    assert_eq!(h.store().get_run(run.id).await.unwrap(), run);
    assert_eq!(h.store().lease_state(run.id).await.unwrap(), before);
    // The new holder still holds it.
    h.store().renew(run.id, new.token, LEASE).await.unwrap();
    h.store()
        .finish(run.id, new.token, RunOutcome::Completed)
        .await
        .unwrap();
    assert_eq!(
        h.store().get_run(run.id).await.unwrap().status,
        RunStatus::Completed
    );
}

/// A renewed lease holds past its first expiry; a lease that ran out cannot
/// be renewed, even before anyone takes it over.
pub async fn renew_keeps_the_lease<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.advance_lease_clock(ALMOST_LEASE).await;
    h.store().renew(run.id, lease.token, LEASE).await.unwrap();
    h.advance_lease_clock(Duration::from_secs(120)).await;
    assert!(
        h.store().claim_run("w2", LEASE).await.unwrap().is_none(),
        "a renewed lease was taken over"
    );
    let expires = h.store().lease_state(run.id).await.unwrap().expires_at;
    assert!(
        expires > Some(lease.expires_at),
        "renew did not move the expiry"
    );
    h.advance_lease_clock(PAST_LEASE).await;
    assert_err!(
        h.store().renew(run.id, lease.token, LEASE).await,
        Error::LeaseLost { .. }
    );
}

/// Finishing settles the run in the outcome's status, frees the lease and
/// records a failure's reason; the run is not claimed again.
pub async fn finish_settles_the_run<H: LeaseHarness>(h: &H) {
    let outcomes = [
        RunOutcome::Completed,
        RunOutcome::Failed {
            reason: "card declined".into(),
        },
        RunOutcome::Cancelled,
    ];
    for outcome in outcomes {
        let run = new_run(h).await;
        let lease = claim(h, "w1").await;
        assert_eq!(lease.run.id, run.id);
        h.store()
            .finish(run.id, lease.token, outcome.clone())
            .await
            .unwrap();
        assert_eq!(
            h.store().get_run(run.id).await.unwrap().status,
            outcome.status()
        );
        let state = h.store().lease_state(run.id).await.unwrap();
        assert_eq!((state.worker, state.expires_at), (None, None));
        assert_eq!(state.failure_reason.as_deref(), outcome.reason());
        assert_err!(
            h.store()
                .finish(run.id, lease.token, RunOutcome::Completed)
                .await,
            Error::LeaseLost { .. }
        );
    }
    assert!(h.store().claim_run("w2", LEASE).await.unwrap().is_none());
}

/// A batch claim takes up to `n` runs, oldest first, and leaves the rest.
pub async fn claim_runs_takes_a_batch<H: LeaseHarness>(h: &H) {
    let mut runs = Vec::new();
    for _ in 0..5 {
        runs.push(new_run(h).await.id);
        h.clock().advance(Duration::from_millis(1));
    }
    let batch = h.store().claim_runs("w1", 3, LEASE).await.unwrap();
    let ids: Vec<RunId> = batch.iter().map(|l| l.run.id).collect();
    assert_eq!(ids, runs[..3]);
    assert!(batch.iter().all(|l| l.token == 1 && l.worker == "w1"));
    let rest = h.store().claim_runs("w2", 3, LEASE).await.unwrap();
    let ids: Vec<RunId> = rest.iter().map(|l| l.run.id).collect();
    assert_eq!(ids, runs[3..]);
}

/// A claim beside runs under live leases takes the run-out leases and the
/// free runs, oldest first, and never a held one: an engine holds many
/// runs in flight, and a store that picks by creation order alone must
/// still step past them (on the databases they are in no range a claim
/// reads).
pub async fn claim_runs_takes_run_out_and_free_runs_past_held_ones<H: LeaseHarness>(h: &H) {
    let mut runs = Vec::new();
    for _ in 0..6 {
        runs.push(new_run(h).await.id);
        h.clock().advance(Duration::from_millis(1));
    }
    // runs[0] leased first; runs[1] and runs[2] two minutes later; at six
    // minutes the first has run out and the others still hold.
    assert_eq!(claim(h, "holder").await.run.id, runs[0]);
    h.advance_lease_clock(Duration::from_secs(2 * 60)).await;
    let held = h.store().claim_runs("holder", 2, LEASE).await.unwrap();
    let held: Vec<RunId> = held.iter().map(|l| l.run.id).collect();
    assert_eq!(held, runs[1..3]);
    h.advance_lease_clock(Duration::from_secs(4 * 60)).await;

    let batch = h.store().claim_runs("w", 3, LEASE).await.unwrap();
    let ids: Vec<RunId> = batch.iter().map(|l| l.run.id).collect();
    assert_eq!(ids, [runs[0], runs[3], runs[4]], "oldest first, none held");
    assert_eq!(batch[0].token, 2, "the run-out lease taken over");
    assert!(batch[1..].iter().all(|l| l.token == 1));
    let rest = h.store().claim_runs("w", 5, LEASE).await.unwrap();
    let ids: Vec<RunId> = rest.iter().map(|l| l.run.id).collect();
    assert_eq!(ids, [runs[5]]);
    for run in &runs[1..3] {
        let state = h.store().lease_state(*run).await.unwrap();
        assert_eq!((state.worker.as_deref(), state.token), (Some("holder"), 1));
    }
}

/// Lease writes on a run that does not exist are [`Error::RunNotFound`].
pub async fn lease_calls_on_unknown_runs<H: LeaseHarness>(h: &H) {
    let missing = RunId::generate();
    let store = h.store();
    assert_err!(store.renew(missing, 1, LEASE).await, Error::RunNotFound(r) if r == missing);
    assert_err!(
        store.finish(missing, 1, RunOutcome::Completed).await,
        Error::RunNotFound(_)
    );
    assert_err!(
        store.release(missing, 1, Release::Yield).await,
        Error::RunNotFound(_)
    );
    assert_err!(store.request_cancel(missing).await, Error::RunNotFound(_));
    assert_err!(store.lease_state(missing).await, Error::RunNotFound(_));
}

/// Empty workers, empty or over-long leases, empty or over-large batches
/// and NUL in a reason are refused before anything is written.
pub async fn bad_lease_input_is_refused<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    assert_err!(
        store.claim_run("", LEASE).await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    assert_err!(
        store.claim_run("w", Duration::ZERO).await,
        Error::InvalidInput(InvalidInput::OutOfRange { .. })
    );
    assert_err!(
        store.claim_run("w", LONGEST_LEASE * 2).await,
        Error::InvalidInput(InvalidInput::OutOfRange { .. })
    );
    assert_err!(
        store.claim_runs("w", 0, LEASE).await,
        Error::InvalidInput(InvalidInput::OutOfRange { .. })
    );
    assert_eq!(store.lease_state(run.id).await.unwrap().token, 0);
    let lease = claim(h, "w").await;
    assert_err!(
        store.renew(run.id, lease.token, Duration::ZERO).await,
        Error::InvalidInput(_)
    );
    assert_err!(
        store
            .release(run.id, lease.token, Release::failure("a\0b"))
            .await,
        Error::InvalidInput(InvalidInput::NulCharacter { .. })
    );
    assert_eq!(store.lease_state(run.id).await.unwrap().failures, 0);
}
