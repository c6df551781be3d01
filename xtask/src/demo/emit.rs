//! The event sources: emitter tasks recording `order.placed` events, some
//! of them twice (a retrying producer), a few `order.viewed` events nobody
//! listens to, a share dispatched in the emit itself and the rest deferred
//! to the dispatchers, and the poison `catalog.imported` events.
//!
//! Leans on `EventStore::emit`: one transaction records the event once per
//! (app, scope, type, dedupe key), however many emits race (a second answers
//! `duplicate: true` and records nothing), pins its deliveries, and with
//! `Dispatch::Now` creates their runs in the same transaction; an event
//! that matches nothing is recorded and marked dispatched at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::ports::EventStore;
use flowstate_core::{Dispatch, Emission, NewEvent};
use flowstate_store_diesel::DieselStore;
use serde_json::json;

use super::definitions::{APP, CATALOG_IMPORTED, ORDER_PLACED, ORDER_VIEWED};
use super::workflows::fnv;

/// One `order.viewed` event (no listener) per this many orders.
pub const VIEWED_EVERY: usize = 200;

/// The size of a poison event's payload: over the dispatchers' first
/// input limit ([`super::dispatch::CAPPED_VALUE_BYTES`]).
pub const POISON_BYTES: usize = 48 * 1024;

/// What one emitter recorded.
#[derive(Clone, Copy, Debug, Default)]
pub struct Emitted {
    /// Events recorded (first emits of a key, and keyless events).
    pub recorded: u64,
    /// Re-emits answered `duplicate: true`.
    pub duplicates: u64,
    /// Events recorded that matched nothing.
    pub unmatched: u64,
    /// Events whose runs the emit itself started (`Dispatch::Now`).
    pub dispatched_now: u64,
}

impl Emitted {
    /// Adds another emitter's tally.
    pub fn add(&mut self, other: Self) {
        self.recorded += other.recorded;
        self.duplicates += other.duplicates;
        self.unmatched += other.unmatched;
        self.dispatched_now += other.dispatched_now;
    }
}

/// Whether order `order` is emitted a second time with the same key.
pub fn re_emitted(order: u64, percent: u32) -> bool {
    fnv(&format!("again/{order}")) % 100 < u64::from(percent)
}

/// Whether order `order`'s runs start in the emit itself.
fn dispatched_now(order: u64) -> bool {
    fnv(&format!("now/{order}")) % 10 == 0
}

/// Admission: how many orders may be emitted so far. The demo raises
/// `allowed` as orders settle, so the orders in flight stay within a
/// window, as an engine's intake would (every waiting run is one more row
/// a run claim walks past).
#[derive(Debug, Default)]
pub struct Admission {
    /// Orders emitted so far, by all emitters.
    pub emitted: AtomicU64,
    /// Orders that may be emitted so far.
    pub allowed: AtomicU64,
}

impl Admission {
    /// Waits for room for one more order, and takes it.
    async fn admit(&self) {
        loop {
            let emitted = self.emitted.load(Ordering::SeqCst);
            if emitted < self.allowed.load(Ordering::SeqCst)
                && self
                    .emitted
                    .compare_exchange(emitted, emitted + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Emits orders `task`, `task + tasks`, ... below `orders`, each when
/// `admission` has room.
pub async fn orders(
    store: DieselStore,
    scope: String,
    (task, tasks): (usize, usize),
    orders: usize,
    duplicate_percent: u32,
    admission: Arc<Admission>,
) -> Result<Emitted> {
    let mut tally = Emitted::default();
    for order in (task..orders).step_by(tasks) {
        admission.admit().await;
        let number = order as u64;
        let event = NewEvent::new(APP, &scope, ORDER_PLACED, json!({ "order": number }))
            .with_dedupe_key(format!("order:{number}"));
        let dispatch = if dispatched_now(number) {
            Dispatch::Now
        } else {
            Dispatch::Deferred
        };
        let first = emit(&store, event.clone(), dispatch).await?;
        count(&mut tally, &first, dispatch);
        if re_emitted(number, duplicate_percent) {
            let again = emit(&store, event, Dispatch::Deferred).await?;
            count(&mut tally, &again, Dispatch::Deferred);
        }
        if order % VIEWED_EVERY == 0 {
            let viewed = NewEvent::new(APP, &scope, ORDER_VIEWED, json!({ "order": number }));
            let seen = emit(&store, viewed, Dispatch::Deferred).await?;
            count(&mut tally, &seen, Dispatch::Deferred);
            tally.unmatched += 1;
        }
    }
    Ok(tally)
}

/// Emits `n` poison events: their payload is over the dispatchers' limit.
pub async fn poison(store: &DieselStore, scope: &str, n: usize) -> Result<Emitted> {
    let mut tally = Emitted::default();
    for k in 0..n {
        let rows = "x".repeat(POISON_BYTES);
        let event = NewEvent::new(
            APP,
            scope,
            CATALOG_IMPORTED,
            json!({ "batch": k, "rows": rows }),
        )
        .with_dedupe_key(format!("import:{k}"));
        let emitted = emit(store, event, Dispatch::Deferred).await?;
        count(&mut tally, &emitted, Dispatch::Deferred);
    }
    Ok(tally)
}

fn count(tally: &mut Emitted, emission: &Emission, dispatch: Dispatch) {
    if emission.duplicate {
        tally.duplicates += 1;
    } else {
        tally.recorded += 1;
        if dispatch == Dispatch::Now && !emission.runs.is_empty() {
            tally.dispatched_now += 1;
        }
    }
}

/// One emit, sent again while the error says that may help (a busy
/// database): a resend of an emit that did land answers `duplicate`, so
/// nothing is recorded twice.
async fn emit(store: &DieselStore, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
    let mut tries = 0;
    loop {
        match store.emit(event.clone(), dispatch).await {
            Err(err) if err.is_retryable() && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20 * tries)).await;
            }
            done => return done.with_context(|| format!("emitting {}", event.event_type)),
        }
    }
}
