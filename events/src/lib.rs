//! flowstate-events: the dispatch of deferred events, with backoff and
//! dead-lettering, generic over core's [`EventStore`] port.
//!
//! Recording an event, pinning its deliveries and materialising them into
//! runs are the store's atomic units of work ([`EventStore::emit`],
//! [`EventStore::dispatch_event`]); what to do with a failure is decided
//! here, by core's [`EventDispatchBackoff`]. This crate never knows which
//! database is behind the port, and starts no timer unless asked to: an
//! engine that schedules its own work calls [`dispatch_pending`] (or, over
//! [`EventQueueStore`], [`dispatch_queued`], which many dispatchers share
//! without colliding) when it likes; one that wants a loop spawns a
//! [`Dispatcher`].
//!
//! An event whose runs cannot be materialised never takes the others down
//! with it: [`dispatch_pending`] dispatches each event in its own
//! transaction, and [`dispatch_queued`]'s batches (many events in one
//! transaction) are taken again one event at a time by the store when
//! their transaction fails. Its failure is recorded on the event
//! (attempts, last error, next due time), never rolled back with it: an
//! event that failed and said nothing is how schedules silently stop
//! firing.

mod dispatcher;

pub use dispatcher::{Dispatcher, DispatcherHandle, DispatcherReport};

use flowstate_core::backoff::{EventDispatchBackoff, EventDispatchOutcome};
use flowstate_core::ports::{EventQueueStore, EventStore};
use flowstate_core::{Error, NextDispatch, PendingEvent, Result};

/// What one [`dispatch_pending`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Events whose runs were materialised.
    pub dispatched: u32,
    /// Events whose dispatch failed (dead-lettered ones included).
    pub failed: u32,
    /// Of the failed, those whose failure dead-lettered them.
    pub dead_lettered: u32,
    /// Events another dispatcher took first, or that stopped being pending.
    pub skipped: u32,
}

/// Dispatches up to `limit` pending events, each in its own transaction.
///
/// A failed dispatch is recorded with [`EventStore::record_dispatch_failure`]
/// against the attempts the event had when it was listed, with the outcome
/// `backoff` gives the failed attempt: due again after its delay, or
/// dead-lettered at its limit. Only a failure to list or to record is
/// returned as an error.
///
/// Dispatchers that call this at once list the same oldest events and each
/// tries all of them, the losers skipping what another holds or has done:
/// for more than one dispatcher over a backend with [`EventQueueStore`],
/// [`dispatch_queued`] takes disjoint events instead.
#[tracing::instrument(level = "debug", skip(store, backoff))]
pub async fn dispatch_pending<S: EventStore>(
    store: &S,
    backoff: EventDispatchBackoff,
    limit: u32,
) -> Result<DispatchReport> {
    let mut report = DispatchReport::default();
    for pending in store.pending_events(limit).await? {
        match store.dispatch_event(pending.id).await {
            Ok(Some(runs)) => {
                report.dispatched += 1;
                tracing::debug!(event = %pending.id, runs = runs.len(), "event dispatched");
            }
            Ok(None) => report.skipped += 1,
            Err(err) => record_failure(store, backoff, pending, &err, &mut report).await?,
        }
    }
    Ok(report)
}

/// The most events [`dispatch_queued`] takes in one
/// [`EventQueueStore::dispatch_next_batch`]: a batch's transaction, pick,
/// read of deliveries and mark are paid once for this many events, while
/// its locks are held no longer than this many events' runs take to write,
/// and a dispatcher never holds far more of the queue than it is about to
/// finish.
pub const QUEUED_BATCH: u32 = 64;

/// Dispatches up to `limit` pending events through
/// [`EventQueueStore::dispatch_next_batch`], in batches of up to
/// [`QUEUED_BATCH`]: each batch takes events no other dispatcher holds, so
/// any number of dispatchers share the queue without trying one another's
/// events. Stops early when a batch comes back short (the queue had no
/// more free).
///
/// Failures are recorded as [`dispatch_pending`] records them; nothing is
/// ever skipped. Only a failure to take events at all (no connection, say)
/// or to record one is returned as an error.
#[tracing::instrument(level = "debug", skip(store, backoff))]
pub async fn dispatch_queued<S: EventQueueStore>(
    store: &S,
    backoff: EventDispatchBackoff,
    limit: u32,
) -> Result<DispatchReport> {
    let mut report = DispatchReport::default();
    let mut left = limit;
    while left > 0 {
        let asked = left.min(QUEUED_BATCH);
        let answers = store.dispatch_next_batch(asked).await?;
        let taken = u32::try_from(answers.len()).unwrap_or(u32::MAX);
        for answer in answers {
            match answer {
                // Not an answer of a batch; counted as nothing.
                NextDispatch::Idle => {}
                NextDispatch::Dispatched { event, runs } => {
                    report.dispatched += 1;
                    tracing::debug!(%event, runs = runs.len(), "event dispatched");
                }
                NextDispatch::Failed { event, error } => {
                    record_failure(store, backoff, event, &error, &mut report).await?;
                }
            }
        }
        if taken < asked {
            break;
        }
        left -= asked;
    }
    Ok(report)
}

/// Records the failed dispatch of `pending` with the outcome `backoff`
/// gives its next attempt, and counts it in `report`.
async fn record_failure<S: EventStore>(
    store: &S,
    backoff: EventDispatchBackoff,
    pending: PendingEvent,
    err: &Error,
    report: &mut DispatchReport,
) -> Result<()> {
    report.failed += 1;
    let outcome = backoff.after_failure(pending.attempts + 1);
    tracing::warn!(event = %pending.id, attempt = pending.attempts + 1, ?outcome, %err, "event dispatch failed");
    let recorded = store
        .record_dispatch_failure(pending.id, pending.attempts, &err.to_string(), outcome)
        .await?;
    if recorded && outcome == EventDispatchOutcome::DeadLetter {
        report.dead_lettered += 1;
    }
    Ok(())
}
