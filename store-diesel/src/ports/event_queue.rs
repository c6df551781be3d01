//! [`EventQueueStore`] for [`DieselStore`]: the next free pending events
//! locked and dispatched in one transaction, one event or a batch, written
//! once over the dialects.
//!
//! The pick is the lock: `SELECT ... ORDER BY` the due order `LIMIT n FOR
//! UPDATE SKIP LOCKED` on PostgreSQL and MySQL, so concurrent dispatchers
//! each lock a different set and none waits on another's; on SQLite the
//! dispatch's `BEGIN IMMEDIATE` makes it the only writer, and the pick is a
//! plain read of the oldest pending events
//! ([`Connection::lock_next_pending`]). One event is then
//! [`EventStore::dispatch_event`](flowstate_core::ports::EventStore::dispatch_event)'s
//! transaction ([`dispatch_locked!`]); a batch reads the deliveries of all
//! its events in one `SELECT` and marks them all dispatched in one
//! `UPDATE`, and its runs in one multi-row insert for the whole batch
//! ([`dispatch_locked_batch!`], [`Connection::insert_keyed_runs`]; on
//! SQLite sent from one blocking hop), so a batch of up to 1,000 runs
//! sends six statements. A batch whose
//! transaction fails is taken again one event at a time
//! ([`DieselStore::dispatch_each`]), so a bad event fails alone.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::events::check_dispatch_batch;
use flowstate_core::ports::EventQueueStore;
use flowstate_core::{Error, Event, NextDispatch, PendingEvent, Result, Timestamp};

use super::events::{dispatch_locked, materialise, pinned_runs};
use crate::backend::in_transaction;
use crate::dialect::Connection;
use crate::error::TxError;
use crate::rows::events::DeliveryRow;
use crate::schema::{flowstate_event_deliveries as deliveries, flowstate_events as events};
use crate::store::DieselStore;

/// Dispatches `$events`, which the caller's transaction on `$conn` has
/// locked pending: reads the pinned deliveries of them all in one
/// `SELECT`, creates the run of each delivery, and marks them all
/// dispatched (attempts + 1, error cleared) in one `UPDATE`. Evaluates to
/// `Result<Vec<(EventId, Vec<RunId>)>, TxError>`: each event with its runs
/// in delivery order, in the order of `$events`.
macro_rules! dispatch_locked_batch {
    ($conn:expr, $limits:expr, $events:expr, $now:expr) => {{
        let locked: &[Event] = $events;
        let ids: Vec<String> = locked.iter().map(|e| e.id.to_string()).collect();
        let pinned: Vec<DeliveryRow> = deliveries::table
            .filter(deliveries::event_id.eq_any(&ids))
            .order((deliveries::event_id, deliveries::activation_id))
            .select(DeliveryRow::as_select())
            .load($conn)
            .await?;
        let mut by_event: HashMap<&str, Vec<&DeliveryRow>> = HashMap::new();
        for row in &pinned {
            by_event.entry(row.event_id.as_str()).or_default().push(row);
        }
        let at = Timestamp::from_micros($now);
        let mut done = Vec::with_capacity(locked.len());
        let mut rows = Vec::with_capacity(pinned.len());
        for (event, id) in locked.iter().zip(&ids) {
            let mine = by_event.remove(id.as_str()).unwrap_or_default();
            let runs = pinned_runs($limits, mine, event, at, &mut rows)?;
            done.push((event.id, runs));
        }
        // Every event's runs in one insert, in the events' order.
        $conn.insert_keyed_runs(rows).await?;
        diesel::update(events::table.filter(events::id.eq_any(&ids)))
            .set((
                events::dispatched_at.eq(Some($now)),
                events::attempts.eq(events::attempts + 1_i64),
                events::last_error.eq(None::<String>),
            ))
            .execute($conn)
            .await?;
        Ok::<_, TxError>(done)
    }};
}

impl EventQueueStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn dispatch_next(&self) -> Result<NextDispatch> {
        let limits = self.config.limits;
        let now = self.now();
        // The event this transaction took, kept past its rollback so a
        // failure can name it (a conflict that runs the work again takes
        // afresh).
        let mut taken: Option<PendingEvent> = None;
        let dispatched = in_transaction!(self, "dispatch_next", |conn| {
            taken = None;
            let Some(row) = conn.lock_next_pending(now, 1).await?.pop() else {
                return Ok(None);
            };
            let event = Event::try_from(row)?;
            taken = Some(PendingEvent {
                id: event.id,
                attempts: event.attempts,
            });
            dispatch_locked!(conn, limits, &event, now).map(|runs| Some((event.id, runs)))
        });
        match (dispatched, taken) {
            (Ok(Some((event, runs))), _) => {
                tracing::debug!(%event, runs = runs.len(), "event dispatched");
                Ok(NextDispatch::Dispatched { event, runs })
            }
            (Ok(None), _) => Ok(NextDispatch::Idle),
            (Err(error), Some(event)) => Ok(NextDispatch::Failed { event, error }),
            (Err(error), None) => Err(error),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(n))]
    async fn dispatch_next_batch(&self, n: u32) -> Result<Vec<NextDispatch>> {
        check_dispatch_batch(n)?;
        let limits = self.config.limits;
        let now = self.now();
        // The events this transaction took, in the taking order, kept past
        // its rollback so they can be taken again one at a time (a
        // conflict that runs the work again takes afresh).
        let mut taken: Vec<PendingEvent> = Vec::new();
        let dispatched = in_transaction!(self, "dispatch_next_batch", |conn| {
            taken.clear();
            let rows = conn.lock_next_pending(now, i64::from(n)).await?;
            let mut locked = Vec::with_capacity(rows.len());
            for row in rows {
                let event = Event::try_from(row)?;
                taken.push(PendingEvent {
                    id: event.id,
                    attempts: event.attempts,
                });
                locked.push(event);
            }
            if locked.is_empty() {
                return Ok(Vec::new());
            }
            dispatch_locked_batch!(conn, limits, &locked, now)
        });
        match dispatched {
            Ok(done) => {
                tracing::debug!(events = done.len(), "events dispatched");
                Ok(done
                    .into_iter()
                    .map(|(event, runs)| NextDispatch::Dispatched { event, runs })
                    .collect())
            }
            Err(error) if taken.is_empty() => Err(error),
            Err(error) => {
                tracing::warn!(events = taken.len(), %error, "event batch failed; dispatching its events one at a time");
                self.dispatch_each(&taken).await
            }
        }
    }
}

impl DieselStore {
    /// Takes each event of a failed batch again, in its own transaction,
    /// as [`EventStore::dispatch_event`](flowstate_core::ports::EventStore::dispatch_event)
    /// takes one (`SKIP LOCKED`, or the single writer): dispatched, or
    /// [`NextDispatch::Failed`] with the attempts it had if its dispatch
    /// failed after it was locked; left out if another dispatcher took it
    /// meanwhile or it is no longer pending. A failure before an event is
    /// locked (no connection, say) ends the pass: what was answered is
    /// answered, the rest stay pending untouched, and with nothing
    /// answered it is the `Err`.
    async fn dispatch_each(&self, taken: &[PendingEvent]) -> Result<Vec<NextDispatch>> {
        let limits = self.config.limits;
        let mut answers = Vec::with_capacity(taken.len());
        for pending in taken {
            let now = self.now();
            let id_text = pending.id.to_string();
            let mut locked: Option<PendingEvent> = None;
            let one = in_transaction!(self, "dispatch_next_batch", |conn| {
                locked = None;
                let Some(row) = conn.lock_pending(&id_text, now).await? else {
                    return Ok(None);
                };
                let event = Event::try_from(row)?;
                locked = Some(PendingEvent {
                    id: event.id,
                    attempts: event.attempts,
                });
                dispatch_locked!(conn, limits, &event, now).map(Some)
            });
            match (one, locked) {
                (Ok(Some(runs)), _) => answers.push(NextDispatch::Dispatched {
                    event: pending.id,
                    runs,
                }),
                (Ok(None), _) => {}
                (Err(error), Some(event)) => answers.push(NextDispatch::Failed { event, error }),
                (Err(error), None) => return ended(answers, error),
            }
        }
        Ok(answers)
    }
}

/// What a pass of [`DieselStore::dispatch_each`] that met `error` before
/// an event was locked answers: its answers so far, or the error if there
/// are none.
fn ended(answers: Vec<NextDispatch>, error: Error) -> Result<Vec<NextDispatch>> {
    if answers.is_empty() {
        return Err(error);
    }
    tracing::warn!(%error, "event batch: taking its events again stopped");
    Ok(answers)
}
