//! The event statements that differ per dialect: the dispatch's lock and
//! what the event's insert can tell.
//! PostgreSQL take it with `FOR UPDATE SKIP LOCKED`, so a dispatcher
//! passes over an event another one holds instead of waiting for it.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::rows_events::EventRow;
use crate::schema::flowstate_events as events;
use crate::store::events::{InsertEvent, LockPending, pending};

impl LockPending for AsyncPgConnection {
    async fn lock_pending(&mut self, id: &str, now: i64) -> QueryResult<Option<EventRow>> {
        pending!(now)
            .filter(events::id.eq(id))
            .select(EventRow::as_select())
            .for_update()
            .skip_locked()
            .first(self)
            .await
            .optional()
    }
}

impl InsertEvent for AsyncPgConnection {
    async fn insert_event(&mut self, row: &EventRow) -> QueryResult<Option<bool>> {
        diesel::insert_into(events::table)
            .values(row)
            .on_conflict_do_nothing()
            .execute(self)
            .await
            .map(|n| Some(n == 1))
    }
}
