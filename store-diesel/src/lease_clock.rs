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
//! `LeaseClockOffset` (feature `test-support`) is added to the database's
//! time in every lease statement. It is zero unless set; tests share one
//! offset between every store on a database and move it to make leases run
//! out without waiting. Production code leaves it alone (or, to be exact, gives every
//! store on a database the same one).

#[cfg(feature = "test-support")]
use std::sync::Arc;
#[cfg(feature = "test-support")]
use std::sync::atomic::{AtomicI64, Ordering};
#[cfg(feature = "test-support")]
use std::time::Duration;

#[cfg(feature = "test-support")]
use flowstate_core::{Clock, SystemClock};

/// Microseconds added to the database's clock in lease statements; cloned
/// handles share one value.
///
/// A plain offset ([`LeaseClockOffset::default`], then
/// [`advance`](Self::advance)) moves the database's clock by a fixed
/// amount. An offset [`following`](Self::following) a clock moves it to
/// read what that clock reads, plus the real time passed since the offset
/// was made (to within how far this machine's clock and the database's
/// disagree, microseconds on one machine): a test harness whose rows are
/// stamped from a hand-moved clock then measures leases, claim deadlines
/// and idleness on that clock too, as one clock would, while real time
/// still passes between two statements.
#[cfg(feature = "test-support")]
#[derive(Clone, Debug, Default)]
pub struct LeaseClockOffset {
    advanced: Arc<AtomicI64>,
    follows: Option<Following>,
}

/// The clock an offset follows, and this machine's time when it began to.
#[cfg(feature = "test-support")]
#[derive(Clone, Debug)]
struct Following {
    clock: Arc<dyn Clock>,
    machine_at_start: i64,
}

#[cfg(feature = "test-support")]
impl LeaseClockOffset {
    /// An offset that makes the database's clock read what `clock` reads
    /// plus the real time passed since now: `clock`'s time minus this
    /// machine's time now, added to the database's (plus whatever
    /// [`advance`](Self::advance) adds). For tests; production leaves the
    /// offset at zero.
    pub fn following(clock: Arc<dyn Clock>) -> Self {
        Self {
            advanced: Arc::default(),
            follows: Some(Following {
                clock,
                machine_at_start: SystemClock.now().as_micros(),
            }),
        }
    }

    /// Moves the lease clock `by` later for every store sharing this offset.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.advanced
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            })
            .ok();
    }

    /// The offset in microseconds, as a statement binds it now.
    pub fn micros(&self) -> i64 {
        let advanced = self.advanced.load(Ordering::SeqCst);
        match &self.follows {
            None => advanced,
            Some(following) => following
                .clock
                .now()
                .as_micros()
                .saturating_sub(following.machine_at_start)
                .saturating_add(advanced),
        }
    }
}
