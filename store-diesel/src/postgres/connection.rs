//! What PostgreSQL's connection spells its own way inside the shared typed
//! queries ([`crate::dialect::Connection`]).

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::dialect::{Connection, RUNS_PER_INSERT};
use crate::health::Watched;
use crate::rows::RunRow;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::schema::{
    flowstate_event_deliveries as deliveries, flowstate_events as events, flowstate_runs as runs,
};
use crate::sql::Upsert;
use crate::sql::typed::{DUE_ORDER, pending};

impl Connection for AsyncPgConnection {
    /// `EXTRACT` answers `numeric`, exact to the microsecond.
    const NOW_US: &'static str = "(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::BIGINT";

    const UPSERT: Upsert = Upsert::OnConflict;

    const INSERTS_TELL_SKIPS: bool = true;

    const CLAIMABLE_COLUMN: bool = true;

    /// Two disjoint ranges, so the claim keeps its sleeping index.
    const WAKE_SWEEP: crate::sql::waits::WakeSweep = crate::sql::waits::WakeSweep::Split;

    /// `FOR UPDATE SKIP LOCKED`: a dispatcher passes over an event another
    /// one holds instead of waiting for it.
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

    /// `LIMIT n FOR UPDATE SKIP LOCKED`: concurrent dispatchers each lock
    /// a different set and none waits on another's.
    async fn lock_next_pending(&mut self, now: i64, limit: i64) -> QueryResult<Vec<EventRow>> {
        pending(now)
            .order(DUE_ORDER)
            .select(EventRow::as_select())
            .limit(limit)
            .for_update()
            .skip_locked()
            .load(self)
            .await
    }

    /// One multi-row `ON CONFLICT DO NOTHING`.
    async fn insert_events(&mut self, rows: &[EventRow]) -> QueryResult<usize> {
        diesel::insert_into(events::table)
            .values(rows)
            .on_conflict_do_nothing()
            .execute(self)
            .await
    }

    /// One multi-row `INSERT`.
    async fn insert_deliveries(&mut self, rows: &[DeliveryRow]) -> QueryResult<usize> {
        diesel::insert_into(deliveries::table)
            .values(rows)
            .execute(self)
            .await
    }

    /// One multi-row `INSERT ... ON CONFLICT (idempotency_key) DO NOTHING`
    /// per [`RUNS_PER_INSERT`] rows: a dispatch batch's runs in one
    /// statement, not one a run.
    async fn insert_keyed_runs(&mut self, rows: Vec<RunRow>) -> QueryResult<()> {
        for chunk in rows.chunks(RUNS_PER_INSERT) {
            diesel::insert_into(runs::table)
                .values(chunk)
                .on_conflict(runs::idempotency_key)
                .do_nothing()
                .execute(self)
                .await?;
        }
        Ok(())
    }

    crate::sql::returning::returning_writes!();
}

/// A server connection can be lost: the pool watches it. Its check after
/// a loss also refuses a server that takes no writes ([`CHECK`]).
impl Watched for AsyncPgConnection {
    const WATCHED: bool = true;
    const CHECK: &'static str = CHECK;
}

/// The check of a pooled PostgreSQL connection after a loss (see
/// `health.rs`): one round trip, as `SELECT 1` was, that fails with 25006
/// (`read_only_sql_transaction`, a [`Retry::Reconnect`](crate::error::Retry)
/// row of the error table) on a server in recovery (a demoted primary,
/// now a standby, still reached by an old connection or through a pooler
/// not yet pointed at the new primary) or whose sessions are read-only.
/// `DO` runs on a standby and in a read-only transaction.
pub(crate) const CHECK: &str = "DO $$BEGIN IF pg_is_in_recovery() \
     OR current_setting('transaction_read_only') = 'on' THEN RAISE EXCEPTION \
     'the server takes no writes (in recovery or read-only)' \
     USING ERRCODE = 'read_only_sql_transaction'; END IF; END$$";
