//! [`RunRecoveryStore`]: leasing one named run for a message about it,
//! exactly once among racers, and reaping leases whose holder is gone so
//! another worker takes the run.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunLeaseStore, RunRecoveryStore, RunStore};
use flowstate_core::{Error, RunId, RunStatus};

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, PAST_LEASE};
use crate::cases::support::{assert_err, new_run, race, run_in};

/// A lease of run `run` by `worker`, answered as the store answers it.
async fn lease<H: LeaseHarness>(h: &H, run: RunId, worker: &str) -> Option<u64>
where
    H::Store: RunRecoveryStore,
{
    let lease = h.store().lease_run(run, worker, LEASE).await.unwrap();
    lease.map(|lease| {
        assert_eq!((lease.run.id, lease.worker.as_str()), (run, worker));
        lease.token
    })
}

/// `lease_run` takes the named run when it is runnable, with a raised
/// token; not while another holds it, not a settled run; again once the
/// lease ran out.
pub async fn lease_run_takes_the_named_run<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let older = new_run(h).await;
    let run = new_run(h).await;
    assert_eq!(lease(h, run.id, "w1").await, Some(1), "not the named run");
    assert_eq!(
        lease(h, run.id, "w2").await,
        None,
        "a held run was leased again"
    );
    let state = h.store().lease_state(older.id).await.unwrap();
    assert_eq!(state.token, 0, "another run was leased");
    h.advance_lease_clock(PAST_LEASE).await;
    assert_eq!(lease(h, run.id, "w2").await, Some(2));
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let settled = run_in(h, status).await;
        assert_eq!(
            lease(h, settled.id, "w1").await,
            None,
            "a {status} run was leased"
        );
        assert_eq!(h.store().lease_state(settled.id).await.unwrap().token, 0);
    }
    let suspended = run_in(h, RunStatus::Suspended).await;
    assert_eq!(lease(h, suspended.id, "w1").await, Some(1));
}

/// A run with a cancel requested is settled as cancelled by `lease_run`,
/// not handed out.
pub async fn lease_run_carries_out_a_cancel<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let run = new_run(h).await;
    h.store().request_cancel(run.id).await.unwrap();
    assert_eq!(lease(h, run.id, "w1").await, None);
    let run = h.store().get_run(run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(h.store().lease_state(run.id).await.unwrap().worker, None);
}

/// An unknown run is `RunNotFound`; a bad worker name or lease length is
/// refused before anything is read.
pub async fn lease_run_refusals<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let store = h.store();
    let missing = RunId::generate();
    assert_err!(
        store.lease_run(missing, "w1", LEASE).await,
        Error::RunNotFound(id) if id == missing
    );
    let run = new_run(h).await;
    assert_err!(
        store.lease_run(run.id, "", LEASE).await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    assert_err!(
        store.lease_run(run.id, "w1", Duration::ZERO).await,
        Error::InvalidInput(_)
    );
    assert_eq!(store.lease_state(run.id).await.unwrap().token, 0);
}

/// 16 workers lease one run at once: exactly one gets it.
pub async fn lease_run_race_16<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let run = new_run(h).await.id;
    let won = race(h.store(), 16, move |store, i| async move {
        store
            .lease_run(run, &format!("w{i}"), LEASE)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert_eq!(won.iter().filter(|won| **won).count(), 1, "{won:?}");
    assert_eq!(h.store().lease_state(run).await.unwrap().token, 1);
}

/// Reaping frees the leases that ran out, first expired first, keeps
/// their tokens, leaves live ones alone, answers each once; a reaped run
/// is claimed by another worker.
pub async fn reap_frees_expired_leases_only<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let first = new_run(h).await;
    let second = new_run(h).await;
    let live = new_run(h).await;
    let store = h.store();
    assert!(
        store
            .lease_run(first.id, "dead", LEASE)
            .await
            .unwrap()
            .is_some()
    );
    h.advance_lease_clock(Duration::from_secs(1)).await;
    assert!(
        store
            .lease_run(second.id, "dead", LEASE)
            .await
            .unwrap()
            .is_some()
    );
    let long = LEASE * 10;
    assert!(
        store
            .lease_run(live.id, "alive", long)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store.reap_expired_leases(0).await.unwrap(),
        [],
        "a live lease was reaped"
    );
    h.advance_lease_clock(PAST_LEASE).await;
    assert_eq!(
        store.reap_expired_leases(0).await.unwrap(),
        [first.id, second.id]
    );
    assert_eq!(
        store.reap_expired_leases(0).await.unwrap(),
        [],
        "reaped twice"
    );
    let state = store.lease_state(first.id).await.unwrap();
    assert_eq!(
        (state.worker, state.expires_at, state.token),
        (None, None, 1)
    );
    let live_state = store.lease_state(live.id).await.unwrap();
    assert_eq!(live_state.worker.as_deref(), Some("alive"));
    let taken = store.claim_run("elsewhere", LEASE).await.unwrap().unwrap();
    assert_eq!((taken.run.id, taken.token), (first.id, 2));
}

/// Reaping answers at most its limit.
pub async fn reap_honours_its_limit<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    for _ in 0..3 {
        let run = new_run(h).await;
        assert!(
            h.store()
                .lease_run(run.id, "dead", LEASE)
                .await
                .unwrap()
                .is_some()
        );
    }
    h.advance_lease_clock(PAST_LEASE).await;
    assert_eq!(h.store().reap_expired_leases(2).await.unwrap().len(), 2);
    assert_eq!(h.store().reap_expired_leases(2).await.unwrap().len(), 1);
}

/// 8 reapers over 24 expired leases at once: every run reaped by exactly
/// one of them.
pub async fn reap_race_8<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let mut runs = HashSet::new();
    for _ in 0..24 {
        let run = new_run(h).await;
        assert!(
            h.store()
                .lease_run(run.id, "dead", LEASE)
                .await
                .unwrap()
                .is_some()
        );
        runs.insert(run.id);
    }
    h.advance_lease_clock(PAST_LEASE).await;
    let reaped: Vec<Vec<RunId>> = race(h.store(), 8, |store: Arc<H::Store>, _| async move {
        let mut mine = Vec::new();
        loop {
            let batch = store.reap_expired_leases(4).await.unwrap();
            if batch.is_empty() {
                return mine;
            }
            mine.extend(batch);
        }
    })
    .await;
    let all: Vec<RunId> = reaped.into_iter().flatten().collect();
    assert_eq!(all.len(), 24, "a run was reaped twice or missed");
    assert_eq!(all.into_iter().collect::<HashSet<_>>(), runs);
}

/// A run deleted while leased leaves no lease behind: reaping never
/// answers a run that is gone.
pub async fn reap_leaves_deleted_runs_out<H: LeaseHarness>(h: &H)
where
    H::Store: RunRecoveryStore,
{
    let gone = new_run(h).await;
    let kept = new_run(h).await;
    for run in [gone.id, kept.id] {
        assert!(
            h.store()
                .lease_run(run, "dead", LEASE)
                .await
                .unwrap()
                .is_some()
        );
    }
    h.store().delete_run(gone.id).await.unwrap();
    h.advance_lease_clock(PAST_LEASE).await;
    assert_eq!(h.store().reap_expired_leases(0).await.unwrap(), [kept.id]);
}
