//! `flowstate-recovery`'s [`Pruner`] over the retention port: a pass
//! prunes every kind its policy keeps for a limited time, batch after
//! batch; a kind kept for ever is left alone; the spawned loop reports and
//! shuts down.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{RunStore, VirtualUserRunStore};
use flowstate_core::{PruneKind, RunStatus};
use flowstate_recovery::{Pruner, RetentionPolicy};
use serde_json::json;

use super::{PAST_WINDOW, RetentionBackend, WINDOW, exists, settled};
use crate::LeaseHarness;
use crate::cases::support::new_run;

/// A pass with a batch of 2 takes the seven old runs in four batches (the
/// last short), the finished virtual-user run too, and leaves the live
/// run; with runs kept for ever it takes none.
pub async fn a_pruner_pass_takes_every_batch<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let mut old = Vec::new();
    for _ in 0..7 {
        old.push(settled(h, RunStatus::Completed).await.id);
    }
    let live = new_run(h).await;
    let vu = h.store().start_virtual_user_run("p").await.unwrap();
    h.store()
        .complete_virtual_user_run(vu.id, &json!({}))
        .await
        .unwrap();
    h.clock().advance(PAST_WINDOW);

    let forever = RetentionPolicy {
        runs: None,
        ..RetentionPolicy::uniform(WINDOW)
    };
    let kept = Pruner::new(Arc::clone(h.store()), forever)
        .pass()
        .await
        .unwrap();
    assert_eq!(kept.deleted.get(&PruneKind::Runs), None);
    assert_eq!(kept.deleted[&PruneKind::VirtualUserRuns], 1);
    assert!(exists(h, old[0]).await);

    let policy = RetentionPolicy {
        batch: 2,
        ..RetentionPolicy::uniform(WINDOW)
    };
    let report = Pruner::new(Arc::clone(h.store()), policy)
        .pass()
        .await
        .unwrap();
    assert_eq!(report.deleted[&PruneKind::Runs], 7);
    assert_eq!(report.deleted[&PruneKind::VirtualUserRuns], 0);
    // Runs: 2, 2, 2, 1; each other kind one empty batch.
    assert_eq!(report.batches, 4 + 3);
    for id in old {
        assert!(!exists(h, id).await);
    }
    assert!(exists(h, live.id).await);
}

/// A spawned pruner passes at once, reports what it deleted, and stops
/// on shutdown; what settles after the last pass stays.
pub async fn a_spawned_pruner_reports_and_shuts_down<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let run = settled(h, RunStatus::Failed).await;
    h.clock().advance(PAST_WINDOW);
    let handle = Pruner::new(Arc::clone(h.store()), RetentionPolicy::uniform(WINDOW))
        .with_interval(Duration::from_secs(3600))
        .spawn();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while handle.report().passes == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no pass in 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = handle.shutdown().await;
    assert_eq!(report.passes, 1);
    assert_eq!(report.failed_passes, 0);
    assert_eq!(report.runs, 1);
    assert!(!exists(h, run.id).await);
    let young = h.store().get_run(new_run(h).await.id).await.unwrap();
    assert_eq!(young.status, RunStatus::Running);
}
