//! [`RetentionStore`] for [`DieselStore`]: each prune one `DELETE` whose
//! own `WHERE` decides what may go (settled, settled before the cutoff, no
//! lease held on the database's clock, no child that is not settled), so
//! a run claimed, re-opened or given a live child concurrently is never
//! deleted: nothing is read first and decided in the process.
//!
//! What goes with a record is the schema's: `ON DELETE CASCADE` from a run
//! to its state, steps (and their history: a foreign key on MySQL and
//! SQLite, the statement trigger on PostgreSQL, migration 000012),
//! signals and effects; `ON DELETE SET NULL` for its children; from an
//! event to its deliveries; from a virtual-user run to its transcript.
//!
//! The statements are each dialect's (`Dialect::prune_runs`,
//! `prune_records`, `count_prunable`, in its `retention.rs`), their
//! conditions written once in `crate::sql::retention`:
//!
//! | prune | PostgreSQL | SQLite | MySQL |
//! | --- | --- | --- | --- |
//! | runs | `WITH picked AS (SELECT ... ORDER BY updated_at, id LIMIT n FOR UPDATE SKIP LOCKED) DELETE ... USING picked`, the conditions again on the row deleted | `DELETE ... WHERE id IN (SELECT ... INDEXED BY flowstate_runs_settled_idx ... LIMIT n)`: one statement under the one writer's lock | a transaction: the pick `SELECT ... FOR UPDATE SKIP LOCKED`, then `DELETE r FROM runs r LEFT JOIN runs c ...` over the ids picked, re-checking every condition |
//! | events, dead letters, virtual-user runs | as runs | as runs | one `DELETE ... ORDER BY ... LIMIT n` |
//!
//! `SCHEMA.md` (migration 000018) says which index each walks.

use std::time::Duration;

use flowstate_core::ports::RetentionStore;
use flowstate_core::retention::{self, PruneKind};
use flowstate_core::{Result, Timestamp};

use crate::backend::by_dialect;
use crate::store::DieselStore;

impl DieselStore {
    /// The cutoff of `older_than` on the stamping clock, in microseconds.
    fn prune_cutoff(&self, older_than: Duration) -> i64 {
        retention::cutoff(Timestamp::from_micros(self.now()), older_than).as_micros()
    }
}

impl RetentionStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(kind = %kind, limit = limit))]
    async fn prune(&self, kind: PruneKind, older_than: Duration, limit: u32) -> Result<u64> {
        let limit = i64::from(retention::effective_limit(limit));
        let cutoff = self.prune_cutoff(older_than);
        let deleted = match kind {
            PruneKind::Runs => by_dialect!(self, prune_runs(cutoff, limit))?,
            _ => by_dialect!(self, prune_records(kind, cutoff, limit))?,
        };
        tracing::debug!(deleted, "pruned");
        Ok(deleted)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(kind = %kind))]
    async fn count_prunable(&self, kind: PruneKind, older_than: Duration) -> Result<u64> {
        let cutoff = self.prune_cutoff(older_than);
        by_dialect!(self, count_prunable(kind, cutoff))
    }
}
