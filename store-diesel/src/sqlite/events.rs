//! The event statements that differ per dialect: the dispatch's lock and
//! what the event's insert can tell. SQLite has no row locks and needs none: a dispatch runs in a
//! `BEGIN IMMEDIATE` transaction, so it is the only writer until it
//! commits, and a second dispatcher of the same event reads it dispatched.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::SqliteConn;
use crate::rows_events::EventRow;
use crate::schema::flowstate_events as events;
use crate::store::events::{InsertEvent, LockPending, pending};

impl LockPending for SqliteConn {
    async fn lock_pending(&mut self, id: &str, now: i64) -> QueryResult<Option<EventRow>> {
        pending!(now)
            .filter(events::id.eq(id))
            .select(EventRow::as_select())
            .first(self)
            .await
            .optional()
    }
}

impl InsertEvent for SqliteConn {
    async fn insert_event(&mut self, row: &EventRow) -> QueryResult<Option<bool>> {
        diesel::insert_into(events::table)
            .values(row)
            .on_conflict_do_nothing()
            .execute(self)
            .await
            .map(|n| Some(n == 1))
    }
}
