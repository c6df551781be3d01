//! The dispatchers: several `Dispatcher` runners over `dispatch_queued`,
//! each on a store of its own, sharing one queue of deferred events; and
//! the poison's end, from dead letter to redrive.
//!
//! Leans on `EventQueueStore::dispatch_next` (the pick is the lock: many
//! dispatchers take disjoint events, and each delivery gets exactly one
//! run however they race), on `flowstate-events`' backoff (a failed
//! materialisation is recorded on the event, retried after a delay and
//! dead-lettered at its limit, never rolled back with the runs) and on
//! `EventStore::list_undispatched` and `EventStore::redrive`.
//!
//! The poison is a real failure, not a stub: the first dispatchers run
//! with an input limit below the size of a `catalog.imported` payload, so
//! the store refuses to write the run that event starts. The "fix" is a
//! dispatcher with the limit raised, as an operator would redeploy; only
//! then are the dead letters redriven.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::ports::EventStore;
use flowstate_core::{EventDispatchBackoff, EventFilter, InputLimits};
use flowstate_events::{Dispatcher, DispatcherHandle};
use flowstate_store_diesel::{DieselStore, StoreConfig};

use super::definitions::APP;

/// The dispatchers' first input limit: 32 KiB, below a poison payload.
pub const CAPPED_VALUE_BYTES: usize = 32 * 1024;

/// The backoff of the demo's dispatchers: short, so the poison is
/// dead-lettered within a second (the default backs off for minutes).
pub const BACKOFF: EventDispatchBackoff = EventDispatchBackoff {
    base: Duration::from_millis(100),
    max_delay: Duration::from_millis(400),
    max_attempts: 4,
};

/// A store config whose input limit is below a poison payload.
pub fn capped(config: StoreConfig) -> StoreConfig {
    config.limits(InputLimits {
        max_value_bytes: CAPPED_VALUE_BYTES,
        ..InputLimits::default()
    })
}

/// Starts one queued dispatcher per store.
pub fn spawn(stores: Vec<DieselStore>) -> Vec<DispatcherHandle> {
    stores
        .into_iter()
        .map(|store| {
            Dispatcher::new(Arc::new(store))
                .queued()
                .with_interval(Duration::from_millis(100))
                .with_batch(50)
                .with_backoff(BACKOFF)
                .spawn()
        })
        .collect()
}

/// What the dispatchers did, summed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dispatched {
    /// Events dispatched.
    pub events: u64,
    /// Dispatch attempts that failed.
    pub failed: u64,
    /// Events dead-lettered.
    pub dead_lettered: u64,
}

/// Stops `handles` and sums what they did.
pub async fn shutdown(handles: Vec<DispatcherHandle>) -> Dispatched {
    let mut sum = Dispatched::default();
    for handle in handles {
        let report = handle.shutdown().await;
        sum.events += report.dispatched;
        sum.failed += report.failed;
        sum.dead_lettered += report.dead_lettered;
    }
    sum
}

/// The session's dead letters, listed as an operator would, then redriven:
/// answers (listed, redriven).
pub async fn redrive_dead_letters(store: &DieselStore, scope: &str) -> Result<(u64, u64)> {
    let filter = EventFilter {
        app_id: Some(APP.to_owned()),
        scope_id: Some(scope.to_owned()),
    };
    let (mut listed, mut redriven, mut offset) = (0, 0, 0);
    loop {
        let page = store
            .list_undispatched(&filter, 500, offset)
            .await
            .context("listing undispatched events")?;
        let full = page.len() == 500;
        for event in page.iter().filter(|e| e.dead_lettered_at.is_some()) {
            listed += 1;
            tracing::info!(event = %event.id, kind = %event.event_type, error = ?event.last_error, "dead letter");
            if store.redrive(event.id).await.context("redriving")? {
                redriven += 1;
            }
        }
        if !full {
            break;
        }
        offset += 500;
    }
    Ok((listed, redriven))
}
