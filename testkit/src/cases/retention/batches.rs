//! Batches: a prune deletes at most its limit, the longest settled first;
//! concurrent prunes never delete one run twice; the edge inputs (a zero
//! limit, a limit past the cap, windows of zero and of for ever).

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RetentionStore, RunStore};
use flowstate_core::{PruneKind, RunStatus};

use super::{PAST_WINDOW, RetentionBackend, WINDOW, exists, prunable, prune, settled};
use crate::LeaseHarness;
use crate::cases::support::{new_run, race};

/// A prune deletes at most `limit` runs, the longest settled first
/// (`updated_at`, not creation: the run created first but settled last
/// goes last), so a loop until `0` empties the backlog.
pub async fn batches_are_bounded_oldest_settled_first<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let runs: Vec<_> = {
        let mut runs = Vec::new();
        for _ in 0..5 {
            runs.push(new_run(h).await);
        }
        runs
    };
    // Settled in the order 4, 3, 2, 1, 0, a millisecond apart.
    for run in runs.iter().rev() {
        h.clock().advance(Duration::from_millis(1));
        h.store()
            .set_run_status(run.id, RunStatus::Completed)
            .await
            .unwrap();
    }
    h.clock().advance(PAST_WINDOW);
    assert_eq!(prune(h, PruneKind::Runs, 2).await, 2);
    let left = [
        exists(h, runs[0].id).await,
        exists(h, runs[1].id).await,
        exists(h, runs[2].id).await,
        exists(h, runs[3].id).await,
        exists(h, runs[4].id).await,
    ];
    assert_eq!(left, [true, true, true, false, false]);
    assert_eq!(prunable(h, PruneKind::Runs).await, 3);
    assert_eq!(prune(h, PruneKind::Runs, 2).await, 2);
    assert!(exists(h, runs[0].id).await);
    assert!(!exists(h, runs[1].id).await);
    assert_eq!(prune(h, PruneKind::Runs, 2).await, 1);
    assert_eq!(prune(h, PruneKind::Runs, 2).await, 0);
}

/// Eight prunes racing over twenty old runs, five at a time: each run is
/// deleted by one of them, and their counts add up to twenty.
pub async fn prune_race_8<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(settled(h, RunStatus::Completed).await.id);
    }
    h.clock().advance(PAST_WINDOW);
    let store = Arc::clone(h.store());
    let counts = race(&store, 8, |store, _| async move {
        store
            .prune(PruneKind::Runs, WINDOW, 5)
            .await
            .expect("prune")
    })
    .await;
    let mut total: u64 = counts.iter().sum();
    // A racer that found its picks taken may answer 0 before the rest is
    // gone; loop as a caller would.
    loop {
        let more = prune(h, PruneKind::Runs, 5).await;
        if more == 0 {
            break;
        }
        total += more;
    }
    assert_eq!(total, 20, "{counts:?}");
    for id in ids {
        assert!(!exists(h, id).await);
    }
}

/// The edge inputs: a limit of `0` reads as the default batch (500), a
/// limit past the cap as the cap; a window longer than the clock's age
/// prunes and counts nothing; a zero window prunes what settled strictly
/// before now; every kind on an empty store is `0`.
pub async fn prune_edge_inputs<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    for kind in PruneKind::ALL {
        assert_eq!(prunable(h, kind).await, 0);
        assert_eq!(prune(h, kind, 10).await, 0);
        assert_eq!(h.store().prune(kind, Duration::ZERO, 0).await.unwrap(), 0);
    }
    let a = settled(h, RunStatus::Completed).await;
    let b = settled(h, RunStatus::Cancelled).await;
    assert_eq!(
        h.store()
            .prune(PruneKind::Runs, Duration::ZERO, 10)
            .await
            .unwrap(),
        0,
        "settled this very microsecond"
    );
    h.clock().advance(Duration::from_micros(1));
    assert_eq!(
        h.store()
            .count_prunable(PruneKind::Runs, Duration::MAX)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        h.store()
            .prune(PruneKind::Runs, Duration::MAX, u32::MAX)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        h.store()
            .count_prunable(PruneKind::Runs, Duration::ZERO)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        h.store()
            .prune(PruneKind::Runs, Duration::ZERO, 0)
            .await
            .unwrap(),
        2
    );
    assert!(!exists(h, a.id).await);
    assert!(!exists(h, b.id).await);
}
