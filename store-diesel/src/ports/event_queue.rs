//! [`EventQueueStore`] for [`DieselStore`]: the next free pending event
//! locked and dispatched in one transaction, written once over the
//! dialects.
//!
//! The pick is the lock: `SELECT ... ORDER BY` the due order `LIMIT 1 FOR
//! UPDATE SKIP LOCKED` on PostgreSQL and MySQL, so concurrent dispatchers
//! each lock a different event and none waits on another's; on SQLite the
//! dispatch's `BEGIN IMMEDIATE` makes it the only writer, and the pick is a
//! plain read of the oldest pending event. The rest is
//! [`EventStore::dispatch_event`](flowstate_core::ports::EventStore::dispatch_event)'s
//! transaction ([`dispatch_locked!`]).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::ports::EventQueueStore;
use flowstate_core::{Event, NextDispatch, PendingEvent, Result, Timestamp};

use super::events::{dispatch_locked, materialise, run_row};
use crate::backend::in_transaction;
use crate::dialect::Connection;
use crate::error::TxError;
use crate::rows::events::DeliveryRow;
use crate::rows::parse_id;
use crate::schema::{flowstate_event_deliveries as deliveries, flowstate_events as events};
use crate::store::DieselStore;

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
            let Some(row) = conn.lock_next_pending(now).await? else {
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
}
