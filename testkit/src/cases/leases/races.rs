//! [`RunLeaseStore`] under real concurrency: workers racing for runnable
//! runs each get disjoint runs, and workers whose clocks are ten minutes
//! apart never hold one run at once.

use std::collections::BTreeSet;

use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{Error, RunId, RunStatus};

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, PAST_LEASE};
use crate::cases::support::{assert_err, new_run, race, run_in};

/// Ten minutes, in microseconds: how far apart the skewed workers' clocks are
/// from the harness clock, each way.
const TEN_MINUTES_US: i64 = 10 * 60 * 1_000_000;

/// `runs` runnable runs (and some settled ones) claimed by `workers`
/// racing workers, each claiming `batch` at a time until nothing is left:
/// every runnable run is leased exactly once, and no settled run is.
async fn claim_race<H: LeaseHarness>(h: &H, workers: usize, runs: usize, batch: u32) {
    let mut expected = BTreeSet::new();
    for _ in 0..runs {
        expected.insert(new_run(h).await.id);
    }
    for status in [RunStatus::Completed, RunStatus::Cancelled] {
        run_in(h, status).await;
    }
    let claimed = race(h.store(), workers, |store, i| async move {
        let worker = format!("w{i}");
        let mut mine: Vec<RunId> = Vec::new();
        loop {
            let got = if batch == 1 {
                store
                    .claim_run(&worker, LEASE)
                    .await
                    .map(|l| l.into_iter().collect())
            } else {
                store.claim_runs(&worker, batch, LEASE).await
            };
            let got: Vec<_> = got.expect("a claim under contention is not an error");
            if got.is_empty() {
                return mine;
            }
            assert!(got.len() <= batch as usize);
            assert!(got.iter().all(|l| l.token == 1 && l.worker == worker));
            mine.extend(got.iter().map(|l| l.run.id));
        }
    })
    .await;
    let all: Vec<RunId> = claimed.into_iter().flatten().collect();
    let unique: BTreeSet<RunId> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        unique.len(),
        "a run was leased to two workers at once"
    );
    assert_eq!(
        unique, expected,
        "the claimed runs are not the runnable runs"
    );
}

/// Two workers race over 20 runs.
pub async fn claim_race_2_workers<H: LeaseHarness>(h: &H) {
    claim_race(h, 2, 20, 1).await;
}

/// Sixteen workers race over 48 runs.
pub async fn claim_race_16_workers<H: LeaseHarness>(h: &H) {
    claim_race(h, 16, 48, 1).await;
}

/// Sixteen workers race over 48 runs, four at a time.
pub async fn claim_runs_race_16_workers<H: LeaseHarness>(h: &H) {
    claim_race(h, 16, 48, 4).await;
}

/// Two workers whose clocks are 10 minutes behind and 10 minutes ahead of
/// the harness clock, leasing for 5 minutes: whichever claims first, the
/// other finds the run held, because expiry is measured on the store's
/// clock; once that clock has moved past the lease, the other takes it over
/// and the first has lost it.
pub async fn skewed_clocks_never_share_a_run<H: LeaseHarness>(h: &H) {
    let behind = h.skewed_store(-TEN_MINUTES_US).await;
    let ahead = h.skewed_store(TEN_MINUTES_US).await;
    for (first, second) in [(&behind, &ahead), (&ahead, &behind)] {
        let run = new_run(h).await;
        let held = first
            .claim_run("first", LEASE)
            .await
            .unwrap()
            .expect("a run");
        assert_eq!(held.run.id, run.id);
        assert!(
            second.claim_run("second", LEASE).await.unwrap().is_none(),
            "a worker with another clock took a run whose lease holds"
        );
        assert!(first.claim_run("first", LEASE).await.unwrap().is_none());
        first.renew(run.id, held.token, LEASE).await.unwrap();
        assert!(second.claim_run("second", LEASE).await.unwrap().is_none());
        h.advance_lease_clock(PAST_LEASE).await;
        let taken = second
            .claim_run("second", LEASE)
            .await
            .unwrap()
            .expect("expired");
        assert_eq!((taken.run.id, taken.token), (run.id, held.token + 1));
        assert_err!(
            first.renew(run.id, held.token, LEASE).await,
            Error::LeaseLost { .. }
        );
        second
            .finish(run.id, taken.token, flowstate_core::RunOutcome::Completed)
            .await
            .unwrap();
        // Both see the same run, whichever clock stamped it.
        assert_eq!(
            first.get_run(run.id).await.unwrap().status,
            RunStatus::Completed
        );
    }
}
