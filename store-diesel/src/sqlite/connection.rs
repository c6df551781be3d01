//! What SQLite's connection spells its own way inside the shared typed
//! queries ([`crate::dialect::Connection`]).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::SqliteConn;
use crate::dialect::{Connection, RUNS_PER_INSERT, TxWork};
use crate::health::Watched;
use crate::rows::RunRow;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::schema::{
    flowstate_event_deliveries as deliveries, flowstate_events as events, flowstate_runs as runs,
};
use crate::sql::Upsert;
use crate::sql::typed::{DUE_ORDER, LeaseClock, pending};

impl Connection for SqliteConn {
    /// The Julian day of the epoch is 2440587.5; `'now'` is one value for
    /// the whole statement.
    const NOW_US: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)";

    const UPSERT: Upsert = Upsert::OnConflict;

    const INSERTS_TELL_SKIPS: bool = true;

    const CLAIMABLE_COLUMN: bool = false;

    /// The index named: the planner has no statistics to choose it by.
    const WAKE_SWEEP: crate::sql::waits::WakeSweep = crate::sql::waits::WakeSweep::Indexed;

    /// No row locks, and none needed: a dispatch runs in a `BEGIN
    /// IMMEDIATE` transaction, so it is the only writer until it commits,
    /// and a second dispatcher of the same event reads it dispatched.
    async fn lock_pending(&mut self, id: &str, now: i64) -> QueryResult<Option<EventRow>> {
        pending(now)
            .filter(events::id.eq(id))
            .select(EventRow::as_select())
            .first(self)
            .await
            .optional()
    }

    /// No row locks, as [`Self::lock_pending`]: the dispatch's `BEGIN
    /// IMMEDIATE` makes it the only writer, so the oldest `limit` pending
    /// events are its own until it commits.
    async fn lock_next_pending(&mut self, now: i64, limit: i64) -> QueryResult<Vec<EventRow>> {
        pending(now)
            .order(DUE_ORDER)
            .select(EventRow::as_select())
            .limit(limit)
            .load(self)
            .await
    }

    /// One multi-row `INSERT ... ON CONFLICT DO NOTHING`, sent from the
    /// blocking hop: diesel writes a multi-row insert on SQLite only
    /// through the plain connection (the async wrapper has no batch
    /// insert), and as one statement since no value is `DEFAULT`
    /// ([`EventRow`]). Inside the caller's `BEGIN IMMEDIATE`
    /// transaction, on the same connection.
    async fn insert_events(&mut self, rows: &[EventRow]) -> QueryResult<usize> {
        let rows = rows.to_vec();
        self.spawn_blocking(move |conn| {
            let insert = diesel::insert_into(events::table)
                .values(&rows)
                .on_conflict_do_nothing();
            diesel::RunQueryDsl::execute(insert, conn)
        })
        .await
    }

    /// One multi-row `INSERT`, from the blocking hop as
    /// [`Self::insert_events`].
    async fn insert_deliveries(&mut self, rows: &[DeliveryRow]) -> QueryResult<usize> {
        let rows = rows.to_vec();
        self.spawn_blocking(move |conn| {
            let insert = diesel::insert_into(deliveries::table).values(&rows);
            diesel::RunQueryDsl::execute(insert, conn)
        })
        .await
    }

    /// One multi-row `INSERT ... ON CONFLICT (idempotency_key) DO
    /// NOTHING` per [`RUNS_PER_INSERT`] rows, from the blocking hop as
    /// [`Self::insert_events`] (one statement a chunk, since [`RunRow`]
    /// binds NULL rather than `DEFAULT`). The runs a dispatch batch
    /// materialises then cost its write lock one hop, not one a run.
    async fn insert_keyed_runs(&mut self, rows: Vec<RunRow>) -> QueryResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.spawn_blocking(move |conn| {
            for chunk in rows.chunks(RUNS_PER_INSERT) {
                let insert = diesel::insert_into(runs::table)
                    .values(chunk)
                    .on_conflict(runs::idempotency_key)
                    .do_nothing();
                diesel::RunQueryDsl::execute(insert, conn)?;
            }
            Ok(())
        })
        .await
    }

    /// `BEGIN IMMEDIATE`: the writer takes the write lock up front and
    /// queues on the busy timeout instead of failing a read-to-write
    /// upgrade.
    fn write_transaction<'a, 'conn, R, E, F>(
        &'conn mut self,
        work: F,
    ) -> impl std::future::Future<Output = Result<R, E>> + Send + 'conn
    where
        for<'r> F: AsyncFnOnce(&'r mut Self) -> Result<R, E>
            + TxWork<&'r mut Self, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a,
        'a: 'conn,
    {
        self.immediate_transaction(work)
    }

    crate::sql::returning::returning_writes!();
}

/// Embedded: there is no server to lose, so the pool does not watch.
impl Watched for SqliteConn {
    const WATCHED: bool = false;
}

/// SQLite's plain connection, inside a hot write's blocking hop, reads the
/// same clock.
impl LeaseClock for diesel::SqliteConnection {
    const NOW_US: &'static str = <SqliteConn as Connection>::NOW_US;
}
