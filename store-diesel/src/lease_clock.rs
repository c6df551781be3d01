//! The lease clock: every lease expiry is measured on the database's own
//! clock, never on the clock of the process that sends the statement.
//!
//! Workers on many machines share one database, not one clock. If each
//! stamped expiries from its own clock, a worker whose clock runs ten
//! minutes fast would see every lease as ten minutes older than it is and
//! take runs their holders still hold. So the statements that claim, renew
//! and check a lease read the time in SQL:
//!
//! | dialect | the lease clock |
//! | --- | --- |
//! | PostgreSQL | `statement_timestamp()` of the server |
//! | MySQL / MariaDB | `UTC_TIMESTAMP(6)` of the server (time-zone free) |
//! | SQLite | `julianday('now')`: SQLite is embedded, so the database's clock is the clock of the process (or processes) that open the file, to the millisecond |
//!
//! [`StoreConfig::clock`](crate::StoreConfig::clock) still stamps
//! `created_at` and `updated_at`; it never decides a lease.
//!
//! [`LeaseClockOffset`] is added to the database's time in every lease
//! statement. It is zero unless set; tests share one offset between every
//! store on a database and move it to make leases run out without
//! waiting. Production code leaves it alone (or, to be exact, gives every
//! store on a database the same one).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Microseconds added to the database's clock in lease statements; cloned
/// handles share one value.
#[derive(Clone, Debug, Default)]
pub struct LeaseClockOffset(Arc<AtomicI64>);

impl LeaseClockOffset {
    /// Moves the lease clock `by` later for every store sharing this offset.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            })
            .ok();
    }

    /// The offset in microseconds.
    pub fn micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The SQL for "now on the database's clock, in microseconds since the
/// epoch" in each dialect; a lease statement adds a bound offset to it.
pub(crate) trait DbClock {
    /// The expression, as SQL text with no binds.
    const NOW_US: &'static str;
}

/// PostgreSQL: `EXTRACT` answers `numeric`, exact to the microsecond.
#[cfg(feature = "postgres")]
impl DbClock for diesel_async::AsyncPgConnection {
    const NOW_US: &'static str = "(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::BIGINT";
}

/// MySQL: the difference from the epoch of two `DATETIME`s, which no time
/// zone setting touches.
#[cfg(feature = "mysql")]
impl DbClock for diesel_async::AsyncMysqlConnection {
    const NOW_US: &'static str =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
}

/// SQLite: the Julian day of the epoch is 2440587.5; `'now'` is one value
/// for the whole statement.
#[cfg(feature = "sqlite")]
impl DbClock for crate::sqlite::SqliteConn {
    const NOW_US: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)";
}

#[cfg(feature = "sqlite")]
impl DbClock for diesel::SqliteConnection {
    const NOW_US: &'static str = <crate::sqlite::SqliteConn as DbClock>::NOW_US;
}

/// The dialect's clock expression for a connection of type `C`.
pub(crate) fn now_sql<C: DbClock>(_conn: &C) -> &'static str {
    C::NOW_US
}
