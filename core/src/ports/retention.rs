//! [`RetentionStore`]: deleting what is old and settled, in bounded
//! batches, never what work may still touch.
//!
//! The rules are [`retention`](crate::retention)'s; the policy that runs
//! them on a schedule (windows per kind, the batch, the loop until a batch
//! comes back empty) is `flowstate-recovery`'s `Pruner`, and
//! `cargo xtask prune` runs it once. A trait of its own, so a backend
//! without it still compiles.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::retention::PruneKind;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, retention};

/// Deletes settled records older than a window, oldest first, a bounded
/// batch per call.
///
/// **The window** is `older_than` before now on the store's stamping clock
/// (the clock that stamped `updated_at`, `dispatched_at` and
/// `dead_lettered_at`; [`retention::cutoff`]): a record settled strictly
/// before the cutoff is old enough. **The batch** is `limit`
/// ([`retention::effective_limit`]: `0` reads as 500, at most 5,000),
/// picked by an index in settle order (the oldest first), so a call on a
/// table of a million rows costs what a call on a table of a batch does.
/// A caller loops until a call answers `0`.
///
/// **Never live work.** Whatever races with it, a prune never deletes a
/// run that is not settled, a settled run whose lease is still held on the
/// store's lease clock, a parent one of whose children is not settled
/// ([`retention::is_prunable_run`]), an event not yet dispatched unless it
/// is a dead letter past its window ([`retention::is_prunable_event`]), or
/// a virtual-user run still running. The exclusion is the delete's own
/// (its condition re-checked on the rows it deletes), never a read
/// followed by a write.
///
/// **What goes with a record.** A run: its steps, their history, its
/// state, its signals, its effects and its lease (the run row); its
/// children stay, with no parent, and are pruned by their own age; the
/// delivery that started it stays with its event. An event: its
/// deliveries. A virtual-user run: its transcript. Once a keyed run is
/// pruned its idempotency key is free, and once an event is pruned its
/// dedupe key is: a key protects for as long as its record is kept.
pub trait RetentionStore: Send + Sync {
    /// Deletes at most `limit` records of `kind` settled more than
    /// `older_than` ago, oldest first, with what goes with them, and
    /// answers how many it deleted (records of `kind`, not the rows that
    /// went with them). One atomic unit of work per call: a batch is
    /// deleted whole or not at all. Two concurrent calls never delete one
    /// record twice, and their counts add up to what was deleted.
    fn prune(
        &self,
        kind: PruneKind,
        older_than: Duration,
        limit: u32,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// How many records of `kind` [`prune`](Self::prune) would delete now
    /// with the same `older_than` and no limit: a `--dry-run`'s count, by
    /// the same conditions, deleting nothing.
    fn count_prunable(
        &self,
        kind: PruneKind,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64>> + Send;
}
