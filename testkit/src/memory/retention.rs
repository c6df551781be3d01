//! [`RetentionStore`] for [`MemoryStore`]: each prune under the one lock,
//! every rule asked of core ([`retention::is_prunable_run`],
//! [`retention::is_prunable_event`],
//! [`retention::is_prunable_virtual_user_run`]), oldest first, and a run's
//! dependants removed as `delete_run` removes them.

use std::collections::HashSet;
use std::time::Duration;

use flowstate_core::ports::RetentionStore;
use flowstate_core::retention::{self, PruneKind};
use flowstate_core::{EventId, Result, RunId, Timestamp};

use super::{MemoryStore, Tables};

impl Tables {
    /// The runs a prune may delete at `cutoff` (lease-clock `now`),
    /// oldest settled first by `(updated_at, id)`.
    fn prunable_runs(&self, cutoff: Timestamp, now: Timestamp) -> Vec<RunId> {
        let live_parents: HashSet<RunId> = self
            .runs
            .values()
            .filter(|run| !run.status.is_settled())
            .filter_map(|run| run.parent)
            .collect();
        let mut old: Vec<_> = self
            .runs
            .values()
            .filter(|run| {
                let lease = self.leases.get(&run.id).and_then(|l| l.state.expires_at);
                retention::is_prunable_run(run, lease, live_parents.contains(&run.id), cutoff, now)
            })
            .map(|run| (run.updated_at, run.id))
            .collect();
        old.sort();
        old.into_iter().map(|(_, id)| id).collect()
    }

    /// The events a prune of `kind` may delete at `cutoff`, oldest first
    /// by `(occurred_at, id)`.
    fn prunable_events(&self, kind: PruneKind, cutoff: Timestamp) -> Vec<EventId> {
        let mut old: Vec<_> = self
            .events
            .events
            .values()
            .filter(|event| retention::is_prunable_event(event, kind, cutoff))
            .map(|event| (event.occurred_at, event.id))
            .collect();
        old.sort();
        old.into_iter().map(|(_, id)| id).collect()
    }

    /// Deletes event `id` with its deliveries, freeing its dedupe key.
    fn remove_event(&mut self, id: EventId) {
        let Some(event) = self.events.events.remove(&id) else {
            return;
        };
        if let Some(key) = event.dedupe_key {
            self.events.event_by_dedupe.remove(&(
                event.app_id,
                event.scope_id,
                event.event_type,
                key,
            ));
        }
        for delivery in self.events.deliveries.remove(&id).unwrap_or_default() {
            self.events.delivery_of_run.remove(&delivery.run);
        }
    }

    /// What a prune of `kind` may delete at `cutoff`, as ids in the order
    /// it deletes them.
    fn prunable(&self, kind: PruneKind, cutoff: Timestamp, now: Timestamp) -> Prunable {
        match kind {
            PruneKind::Runs => Prunable::Runs(self.prunable_runs(cutoff, now)),
            PruneKind::Events | PruneKind::DeadLetters => {
                Prunable::Events(self.prunable_events(kind, cutoff))
            }
            PruneKind::VirtualUserRuns => {
                Prunable::VirtualUserRuns(self.virtual_users.prunable(cutoff))
            }
        }
    }
}

/// The ids a prune would delete, by table.
enum Prunable {
    Runs(Vec<RunId>),
    Events(Vec<EventId>),
    VirtualUserRuns(Vec<flowstate_core::VirtualUserRunId>),
}

impl Prunable {
    fn len(&self) -> usize {
        match self {
            Self::Runs(ids) => ids.len(),
            Self::Events(ids) => ids.len(),
            Self::VirtualUserRuns(ids) => ids.len(),
        }
    }
}

impl RetentionStore for MemoryStore {
    async fn prune(&self, kind: PruneKind, older_than: Duration, limit: u32) -> Result<u64> {
        let limit = retention::effective_limit(limit) as usize;
        let cutoff = retention::cutoff(self.now(), older_than);
        let now = self.lease_clock.now();
        let mut tables = self.lock();
        let found = tables.prunable(kind, cutoff, now);
        let deleted = found.len().min(limit);
        match found {
            Prunable::Runs(ids) => {
                for id in ids.into_iter().take(limit) {
                    tables.remove_run(id)?;
                }
            }
            Prunable::Events(ids) => {
                for id in ids.into_iter().take(limit) {
                    tables.remove_event(id);
                }
            }
            Prunable::VirtualUserRuns(ids) => {
                for id in ids.into_iter().take(limit) {
                    tables.virtual_users.remove(id);
                }
            }
        }
        Ok(deleted as u64)
    }

    async fn count_prunable(&self, kind: PruneKind, older_than: Duration) -> Result<u64> {
        let cutoff = retention::cutoff(self.now(), older_than);
        let now = self.lease_clock.now();
        Ok(self.lock().prunable(kind, cutoff, now).len() as u64)
    }
}
