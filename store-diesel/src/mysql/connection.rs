//! What MySQL's connection spells its own way inside the shared typed
//! queries ([`crate::dialect::Connection`]).

use diesel::prelude::*;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use crate::dialect::Connection;
use crate::health::Watched;
use crate::rows::RunRow;
use crate::rows::events::EventRow;
use crate::schema::flowstate_events as events;
use crate::schema::flowstate_runs as runs;
use crate::sql::Upsert;
use crate::sql::typed::{DUE_ORDER, pending};

impl Connection for AsyncMysqlConnection {
    /// The difference from the epoch of two `DATETIME`s, which no time
    /// zone setting touches.
    const NOW_US: &'static str =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

    /// No `ON CONFLICT (target)`: `ON DUPLICATE KEY UPDATE`.
    const UPSERT: Upsert = Upsert::OnDuplicateKey;

    /// A skipped duplicate still counts as a row (`INSERT IGNORE`, or a
    /// matched row under `CLIENT_FOUND_ROWS`).
    const INSERTS_TELL_SKIPS: bool = false;

    /// `FOR UPDATE SKIP LOCKED` (MySQL 8, MariaDB 10.6+): a dispatcher
    /// passes over an event another one holds instead of waiting for it.
    async fn lock_pending(&mut self, id: &str, now: i64) -> QueryResult<Option<EventRow>> {
        pending(now)
            .filter(events::id.eq(id))
            .select(EventRow::as_select())
            .for_update()
            .skip_locked()
            .first(self)
            .await
            .optional()
    }

    async fn lock_next_pending(&mut self, now: i64) -> QueryResult<Option<EventRow>> {
        pending(now)
            .order(DUE_ORDER)
            .select(EventRow::as_select())
            .for_update()
            .skip_locked()
            .first(self)
            .await
            .optional()
    }

    /// `ON DUPLICATE KEY UPDATE id = id`: `INSERT IGNORE` would also turn
    /// a missing parent into a warning; this only skips the key. It cannot
    /// tell a skip from a write.
    async fn insert_keyed_run(&mut self, row: &RunRow) -> QueryResult<Option<bool>> {
        diesel::insert_into(runs::table)
            .values(row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(runs::id.eq(runs::id))
            .execute(self)
            .await
            .map(|_| None)
    }
}

/// A server connection can be lost: the pool watches it.
impl Watched for AsyncMysqlConnection {
    const WATCHED: bool = true;
}
