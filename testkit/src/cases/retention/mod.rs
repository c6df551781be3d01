//! The `retention` family:
//! [`RetentionStore`]: old settled
//! runs pruned with every row that goes with them, live, leased and waiting
//! runs and the parents of live children kept, batches bounded oldest
//! first, dedupe and idempotency keys protecting until their record is
//! pruned, dead letters kept for their longer window, finished
//! virtual-user runs pruned with their transcripts, the edge inputs, and
//! `flowstate-recovery`'s `Pruner` over the port.

pub mod batches;
pub mod events;
pub mod pruner;
pub mod runs;
pub mod virtual_users;

use std::time::Duration;

use flowstate_core::ports::{
    ChildRunStore, EffectJournal, RetentionStore, RunLeaseStore, RunStore, RunWaitStore,
    VirtualUserRunStore,
};
use flowstate_core::{PruneKind, RunId, RunStatus};

use crate::{EventQueueBackend, Harness};

/// A store with every port the retention cases touch: what a prune
/// deletes is written through them and read back through them.
pub trait RetentionBackend:
    EventQueueBackend
    + RetentionStore
    + RunLeaseStore
    + RunWaitStore
    + ChildRunStore
    + EffectJournal
    + VirtualUserRunStore
{
}

impl<T> RetentionBackend for T where
    T: EventQueueBackend
        + RetentionStore
        + RunLeaseStore
        + RunWaitStore
        + ChildRunStore
        + EffectJournal
        + VirtualUserRunStore
{
}

/// The window the cases prune with: an hour.
pub(crate) const WINDOW: Duration = Duration::from_secs(60 * 60);

/// Past the window: what the clock moves to make a record old.
pub(crate) const PAST_WINDOW: Duration = Duration::from_secs(2 * 60 * 60);

/// Prunes `kind` older than [`WINDOW`], at most `limit`, panicking on error.
pub(crate) async fn prune<H: Harness>(h: &H, kind: PruneKind, limit: u32) -> u64
where
    H::Store: RetentionStore,
{
    h.store()
        .prune(kind, WINDOW, limit)
        .await
        .unwrap_or_else(|err| panic!("prune {kind}: {err}"))
}

/// How many of `kind` are older than [`WINDOW`] and prunable.
pub(crate) async fn prunable<H: Harness>(h: &H, kind: PruneKind) -> u64
where
    H::Store: RetentionStore,
{
    h.store()
        .count_prunable(kind, WINDOW)
        .await
        .unwrap_or_else(|err| panic!("count_prunable {kind}: {err}"))
}

/// Whether run `id` can still be read.
pub(crate) async fn exists<H: Harness>(h: &H, id: RunId) -> bool {
    match h.store().get_run(id).await {
        Ok(_) => true,
        Err(flowstate_core::Error::RunNotFound(missing)) if missing == id => false,
        Err(err) => panic!("get_run {id}: {err}"),
    }
}

/// A fresh run of workflow `wf` settled as `status` now.
pub(crate) async fn settled<H: Harness>(h: &H, status: RunStatus) -> flowstate_core::Run {
    crate::cases::support::run_in(h, status).await
}
