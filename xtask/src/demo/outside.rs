//! The world around the engine: the carrier, which signals an order once
//! its parcel is picked up, and the customers, a few of whom cancel their
//! order mid-flight.
//!
//! The carrier leans on `RunWaitStore::signal` (stored as a row of its own,
//! so a signal that arrives before the run waits is not lost; a settled run
//! refuses it with `RunSettled`, which the carrier takes as "too late").
//! The customer leans on `RunLeaseStore::request_cancel` (the next claim
//! that finds the run runnable settles it as cancelled instead of handing
//! it out) and on the events ports: the cancel is an `order.cancelled`
//! event, deduplicated per order, whose activation starts the refund.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowstate_core::ports::{EventStore, RunLeaseStore, RunWaitStore};
use flowstate_core::{Dispatch, Error, NewEvent, RunId};
use flowstate_store_diesel::DieselStore;
use rand::Rng;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::definitions::{APP, ORDER_CANCELLED, PICKED_UP};
use super::engine::Shared;

/// How long after an order is ready the carrier picks it up.
pub const PICKUP_DELAY: Duration = Duration::from_millis(300);

/// What the world did.
#[derive(Debug, Default)]
pub struct Outside {
    /// Pickup signals sent.
    pub signals: AtomicU64,
    /// Pickups that came after the run settled (a cancelled order).
    pub signals_too_late: AtomicU64,
    /// Cancels requested.
    pub cancels: AtomicU64,
}

/// The carrier: signals each run it is told of, `PICKUP_DELAY` later.
pub async fn carrier(
    store: DieselStore,
    mut ready: mpsc::UnboundedReceiver<(RunId, Instant)>,
    outside: Arc<Outside>,
    shared: Arc<Shared>,
) {
    // Told in order, each picked up the same delay after it was told: one
    // timer at a time is enough.
    while let Some((run, told)) = ready.recv().await {
        tokio::time::sleep_until(told + PICKUP_DELAY).await;
        let payload = json!({ "carrier": "demo-post", "parcel": run.to_string() });
        match store.signal(run, PICKED_UP, &payload).await {
            Ok(()) => {
                outside.signals.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::RunSettled { .. }) => {
                outside.signals_too_late.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => shared.error(format!("carrier: signal to run {run}: {err}")),
        }
    }
}

/// The customers: each order handed over is cancelled a moment later and
/// an `order.cancelled` event emitted for it.
pub async fn customers(
    store: DieselStore,
    scope: String,
    mut cancels: mpsc::UnboundedReceiver<(RunId, u64)>,
    outside: Arc<Outside>,
    shared: Arc<Shared>,
) {
    while let Some((run, order)) = cancels.recv().await {
        let pause = rand::rng().random_range(0..40);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if let Err(err) = cancel(&store, &scope, run, order).await {
            shared.error(format!("customer of order {order}: {err}"));
        } else {
            outside.cancels.fetch_add(1, Ordering::Relaxed);
        }
        shared.cancels_in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn cancel(
    store: &DieselStore,
    scope: &str,
    run: RunId,
    order: u64,
) -> flowstate_core::Result<()> {
    store.request_cancel(run).await?;
    let event = NewEvent::new(
        APP,
        scope,
        ORDER_CANCELLED,
        json!({ "order": order, "run": run.to_string() }),
    )
    .with_dedupe_key(format!("cancel:{order}"));
    store.emit(event, Dispatch::Deferred).await?;
    Ok(())
}
