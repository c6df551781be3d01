//! Run claims whose transaction dies between their pick and their write
//! ([`Hooks::abort_after_pick`]), as a Galera node's claim does when
//! another node's commit aborts it between two statements: the claim
//! answers a retryable error (or no lease) and leaves the runs it picked
//! claimable with their tokens unissued, or (run again by the store)
//! leases each once; either way every run ends leased exactly once, with
//! token 1, to the worker the lease names.

use std::collections::BTreeMap;
use std::time::Duration;

use flowstate_core::ports::RunLeaseStore;
use flowstate_core::{RunId, RunLease};

use crate::cases::leases::basics::LEASE;
use crate::cases::support::{after_abort, new_run};
use crate::{Hooks, LeaseHarness, Pick};

/// Checks that `run` has never been leased: token 0, no holder.
async fn never_leased<H: LeaseHarness>(h: &H, run: RunId, what: &str) {
    let state = h.store().lease_state(run).await.expect("lease_state");
    assert_eq!(
        (state.token, state.worker.as_deref()),
        (0, None),
        "{what}, aborted after its pick, left run {run} leased"
    );
}

/// Checks that every run of `runs` was leased exactly once by `leases`,
/// with token 1, and that the store says so.
async fn leased_once<H: LeaseHarness>(h: &H, runs: &[RunId], leases: &[RunLease]) {
    let mut by_run: BTreeMap<RunId, &RunLease> = BTreeMap::new();
    for lease in leases {
        assert!(
            by_run.insert(lease.run.id, lease).is_none(),
            "run {} leased twice: {leases:?}",
            lease.run.id
        );
    }
    assert_eq!(
        by_run.keys().copied().collect::<Vec<_>>(),
        {
            let mut sorted = runs.to_vec();
            sorted.sort();
            sorted
        },
        "every run leased"
    );
    for (run, lease) in by_run {
        assert_eq!(lease.token, 1, "the first token of {run}, issued once");
        let state = h.store().lease_state(run).await.expect("lease_state");
        assert_eq!(
            (state.token, state.worker.as_deref()),
            (1, Some(lease.worker.as_str()))
        );
    }
}

/// Three runnable runs: `claim_runs` aborted after its pick answers a
/// retryable error and leaves all three unleased, or leases all three; a
/// second worker's claim takes what is left and a third finds nothing.
/// Then one more run and `claim_run`, the same way.
pub async fn a_run_claim_aborted_after_its_pick_leases_each_run_once<H>(h: &H)
where
    H: LeaseHarness + Hooks,
{
    let store = h.store();
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(new_run(h).await.id);
        h.clock().advance(Duration::from_millis(1));
    }
    h.abort_after_pick(Some(Pick::Runs)).await;
    let aborted = store.claim_runs("w1", 3, LEASE).await;
    h.abort_after_pick(None).await;
    let mut leases = after_abort("claim_runs", aborted).unwrap_or_default();
    if leases.is_empty() {
        for &run in &runs {
            never_leased(h, run, "claim_runs").await;
        }
    }
    leases.extend(store.claim_runs("w2", 3, LEASE).await.expect("claim_runs"));
    let none = store.claim_run("w3", LEASE).await.expect("claim_run");
    assert!(none.is_none(), "a run leased twice: {none:?}");
    leased_once(h, &runs, &leases).await;

    let run = new_run(h).await.id;
    h.abort_after_pick(Some(Pick::Runs)).await;
    let aborted = store.claim_run("w4", LEASE).await;
    h.abort_after_pick(None).await;
    let mut leases: Vec<RunLease> = after_abort("claim_run", aborted)
        .flatten()
        .into_iter()
        .collect();
    if leases.is_empty() {
        never_leased(h, run, "claim_run").await;
    }
    leases.extend(store.claim_run("w5", LEASE).await.expect("claim_run"));
    let none = store.claim_run("w6", LEASE).await.expect("claim_run");
    assert!(none.is_none(), "a run leased twice: {none:?}");
    leased_once(h, &[run], &leases).await;
}
