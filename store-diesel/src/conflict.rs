//! Lock conflicts and running a unit of work again after one.
//!
//! InnoDB may abort a transaction (or a single statement) as a deadlock
//! victim (1213) or give up on a lock wait (1205), and PostgreSQL may pick
//! a deadlock victim too; the whole unit of work was rolled back and is
//! safe to run again, which [`retry_conflicts!`] does. On a Galera cluster
//! the same 1213 is a certification failure or a brute-force abort by
//! another node's commit (even of a `COMMIT`), far more common than a
//! deadlock on one server, and a node that is not ready answers 1047
//! until it is: so the retries back off, growing and jittered
//! ([`back_off`]), within a budget sized for a cluster
//! ([`MAX_CONFLICT_RETRIES`], [`MAX_CONFLICT_SLEEP`]), and every retry is
//! counted ([`retries`]) and traced. A guarded write that found its rows
//! taken by another writer between its statements ([`lost_race`]) is a
//! conflict too. Past the budget the error is let through (mapped to a
//! retryable [`flowstate_core::Error::Backend`]).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// How many times a unit of work is run again after a conflict at most.
pub(crate) const MAX_CONFLICT_RETRIES: u32 = 24;

/// The most a unit of work sleeps in all between its conflict retries: past
/// it the conflict is let through even with retries left.
pub(crate) const MAX_CONFLICT_SLEEP: Duration = Duration::from_secs(5);

/// The longest single sleep between two retries.
const MAX_BACK_OFF: Duration = Duration::from_millis(250);

/// Conflict retries in this process so far.
static RETRIES: AtomicU64 = AtomicU64::new(0);
/// Conflicts let through in this process so far (the budget spent).
static SURFACED: AtomicU64 = AtomicU64::new(0);
/// Of the retries, those run again on another connection because a
/// Galera node was not ready (1047).
static NOT_READY: AtomicU64 = AtomicU64::new(0);

/// Conflict retries in this process so far, and conflicts that reached a
/// caller because the budget was spent: for tests and benches that report
/// them.
#[cfg(feature = "test-support")]
pub fn retries() -> (u64, u64) {
    (
        RETRIES.load(Ordering::Relaxed),
        SURFACED.load(Ordering::Relaxed),
    )
}

/// Of the conflict retries in this process so far, those that ran again
/// on another connection because a Galera node answered 1047 (not ready,
/// or drained by `wsrep_reject_queries`): for the fault tests that take a
/// node away.
#[cfg(feature = "test-support")]
pub fn not_ready_retries() -> u64 {
    NOT_READY.load(Ordering::Relaxed)
}

/// Counts one retry.
pub(crate) fn count_retry() {
    RETRIES.fetch_add(1, Ordering::Relaxed);
}

/// Counts one retry on another connection after a node was not ready.
pub(crate) fn count_not_ready() {
    NOT_READY.fetch_add(1, Ordering::Relaxed);
}

/// Counts one conflict let through.
pub(crate) fn count_surfaced() {
    SURFACED.fetch_add(1, Ordering::Relaxed);
}

/// What a lost race says: a multi-statement write whose guarded `UPDATE`
/// matched fewer rows than its pick took, or whose read-back does not show
/// its own write, because another writer took them between its statements
/// (on Galera a row lock is local to its node, and a transaction can be
/// aborted between two statements). A serialization failure: the
/// transaction is rolled back and [`retry_conflicts!`] runs it again.
#[cfg_attr(not(feature = "mysql"), allow(dead_code))] // only MySQL's claims lose races
pub(crate) fn lost_race(op: &str) -> DieselError {
    DieselError::DatabaseError(
        DatabaseErrorKind::SerializationFailure,
        Box::new(format!(
            "{op}: its rows were taken by another writer between its statements"
        )),
    )
}

/// Whether `err` means the transaction lost a lock conflict and was (or may
/// safely be) rolled back whole: a deadlock victim (or Galera certification
/// failure), a lock wait timeout, a serialization failure (and a
/// [`lost_race`]), or a Galera node not ready yet (1047, which clears once
/// the node has synced). A dropped connection is not: running again on the
/// same connection cannot help.
pub(crate) fn is_conflict(err: &DieselError) -> bool {
    match err {
        DieselError::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => true,
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, info) => {
            // diesel-async keeps the server's message, not its code: 1213 is
            // "Deadlock found when trying to get lock; try restarting
            // transaction", 1205 "Lock wait timeout exceeded; try restarting
            // transaction", 1047 "WSREP has not yet prepared node for
            // application use".
            let message = info.message().to_ascii_lowercase();
            message.contains("deadlock")
                || message.contains("lock wait timeout")
                || message.starts_with("wsrep has not yet prepared node")
        }
        _ => false,
    }
}

/// Whether `err` is a conflict that must run again on another connection:
/// Galera's 1047, a node not ready (not synced, or cut off from the
/// primary component) that ran nothing and will refuse every statement
/// until it is ready. The pool drops the connection (it is a
/// [`Retry::Reconnect`](crate::error::Retry::Reconnect) error) and
/// places the next one on a node that is ready.
pub(crate) fn needs_new_connection(err: &DieselError) -> bool {
    is_conflict(err) && crate::error::retry_of(err) == crate::error::Retry::Reconnect
}

/// An error that may be a lost lock conflict ([`is_conflict`]): what
/// [`retry_conflicts!`] retries on.
pub(crate) trait MaybeConflict: std::fmt::Display {
    /// Whether the unit of work lost a lock conflict and may run again.
    fn is_conflict(&self) -> bool;

    /// Whether it must run again on another connection
    /// ([`needs_new_connection`], or a broken transaction manager).
    fn needs_new_connection(&self) -> bool;

    /// Whether it failed because its node was not ready
    /// ([`needs_new_connection`] itself: Galera's 1047).
    fn node_not_ready(&self) -> bool;
}

/// Whether a unit of work that failed with `err` may run again, on a new
/// connection: a conflict ([`is_conflict`]), or a connection whose
/// transaction manager a conflict left broken. On Galera a transaction
/// that lost a race between its statements may be brute-force aborted
/// before its `ROLLBACK`, which then fails with the abort's 1213: diesel
/// marks the connection's transaction manager broken, the work (rolled
/// back by the server) is retried as a conflict, and its next `BEGIN` on
/// that connection answers `BrokenTransactionManager`. Nothing of the
/// work ran (a failed `ROLLBACK` never commits), so it runs again on a
/// new connection; the pool drops the broken one (`is_broken`).
fn may_run_again(err: &DieselError) -> bool {
    is_conflict(err) || matches!(err, DieselError::BrokenTransactionManager)
}

/// Whether `err` ([`may_run_again`]) must run again on another connection.
fn wants_new_connection(err: &DieselError) -> bool {
    needs_new_connection(err) || matches!(err, DieselError::BrokenTransactionManager)
}

impl MaybeConflict for DieselError {
    fn is_conflict(&self) -> bool {
        may_run_again(self)
    }

    fn needs_new_connection(&self) -> bool {
        wants_new_connection(self)
    }

    fn node_not_ready(&self) -> bool {
        needs_new_connection(self)
    }
}

impl MaybeConflict for crate::error::TxError {
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Db(err) if may_run_again(err))
    }

    fn needs_new_connection(&self) -> bool {
        matches!(self, Self::Db(err) if wants_new_connection(err))
    }

    fn node_not_ready(&self) -> bool {
        matches!(self, Self::Db(err) if needs_new_connection(err))
    }
}

/// Sleeps before conflict retry number `attempt` (1-based) and answers
/// how long: "full jitter" over a ceiling that doubles from 2 ms with each
/// retry up to [`MAX_BACK_OFF`], plus a floor of a quarter of it, so the
/// transactions that collided spread out instead of colliding again in
/// step, and a cluster's conflicts get room to clear. The first retries
/// stay as short as a single server's deadlock wants.
pub(crate) async fn back_off(attempt: u32) -> Duration {
    let sleep = back_off_for(attempt, random());
    tokio::time::sleep(sleep).await;
    sleep
}

/// The sleep before retry `attempt` for a random `draw`.
fn back_off_for(attempt: u32, draw: u64) -> Duration {
    let ceiling =
        (2_000_u64 << attempt.saturating_sub(1).min(16)).min(MAX_BACK_OFF.as_micros() as u64);
    let floor = ceiling / 4;
    Duration::from_micros(floor + draw % (ceiling - floor + 1))
}

/// A random number (no `rand` dependency: a fresh `RandomState`'s hash).
pub(crate) fn random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Runs `$work` (an expression ending in `.await` that yields a
/// `QueryResult` or a `Result<_, TxError>`) again while it fails with a
/// conflict ([`MaybeConflict`]), at most [`MAX_CONFLICT_RETRIES`] more
/// times and [`MAX_CONFLICT_SLEEP`] of sleep in all; yields its last
/// result. With `renew: $conn = $pool`, a conflict that needs another
/// connection ([`needs_new_connection`]: a Galera node not ready) runs
/// again on a new connection from the pool, put in `$conn` (the old one
/// goes back to the pool, which drops it); a pool timeout returns from the
/// enclosing function.
macro_rules! retry_conflicts {
    ($op:expr, $work:expr) => {
        $crate::conflict::retry_conflicts!($op, $work, renew: {})
    };
    ($op:expr, $work:expr, renew: $conn:ident = $pool:expr) => {
        $crate::conflict::retry_conflicts!($op, $work, renew: {
            $conn = $pool.get($op).await?;
        })
    };
    ($op:expr, $work:expr, renew: $renew:block) => {{
        let mut conflicts = 0_u32;
        let mut slept = std::time::Duration::ZERO;
        loop {
            match $work {
                Err(err) if $crate::conflict::MaybeConflict::is_conflict(&err) => {
                    if conflicts >= $crate::conflict::MAX_CONFLICT_RETRIES
                        || slept >= $crate::conflict::MAX_CONFLICT_SLEEP
                    {
                        $crate::conflict::count_surfaced();
                        tracing::warn!(
                            operation = $op,
                            conflicts,
                            slept_ms = slept.as_millis() as u64,
                            %err,
                            "conflict retries spent, letting the conflict through"
                        );
                        break Err(err);
                    }
                    conflicts += 1;
                    $crate::conflict::count_retry();
                    tracing::debug!(operation = $op, conflicts, %err, "conflict, running again");
                    slept += $crate::conflict::back_off(conflicts).await;
                    if $crate::conflict::MaybeConflict::needs_new_connection(&err) {
                        if $crate::conflict::MaybeConflict::node_not_ready(&err) {
                            $crate::conflict::count_not_ready();
                        }
                        $renew
                    }
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use retry_conflicts;

/// One arm of `on_connection!` (`crate::backend`): take a pooled
/// connection, run the body on it (again after a conflict).
macro_rules! leased {
    ($pool:expr, $op:expr, |$conn:ident| $body:expr) => {{
        let mut conn = $pool.get($op).await?;
        $crate::conflict::retry_conflicts!(
            $op,
            async {
                let $conn = &mut *conn;
                $body
            }
            .await,
            renew: conn = $pool
        )
    }};
}
pub(crate) use leased;

/// One arm of [`in_transaction!`]: a pooled connection, the transaction
/// run again after a lock conflict, its error mapped.
macro_rules! transacted {
    ($pool:expr, $op:expr, |$c:ident| $work:expr) => {{
        let mut conn = $pool.get($op).await?;
        let out: Result<_, $crate::error::TxError> = $crate::conflict::retry_conflicts!(
            $op,
            async {
                let $c = &mut *conn;
                $work
            }
            .await,
            renew: conn = $pool
        );
        match out {
            Ok(value) => Ok(value),
            Err($crate::error::TxError::Db(err)) => Err($crate::error::backend($op, err)),
            Err($crate::error::TxError::Port(err)) => Err(err),
        }
    }};
}
pub(crate) use transacted;

#[cfg(test)]
mod tests {
    use super::*;

    fn db_error(kind: DatabaseErrorKind, message: &str) -> DieselError {
        DieselError::DatabaseError(kind, Box::new(message.to_owned()))
    }

    #[test]
    fn conflicts_are_deadlocks_lock_timeouts_and_serialization_failures() {
        let rows = [
            (
                DatabaseErrorKind::Unknown,
                "Deadlock found when trying to get lock; try restarting transaction",
                true,
            ),
            (
                DatabaseErrorKind::Unknown,
                "Lock wait timeout exceeded; try restarting transaction",
                true,
            ),
            (DatabaseErrorKind::SerializationFailure, "whatever", true),
            (DatabaseErrorKind::UniqueViolation, "Duplicate entry", false),
            (
                DatabaseErrorKind::ForeignKeyViolation,
                "Cannot add or update a child row",
                false,
            ),
            (DatabaseErrorKind::ClosedConnection, "gone", false),
            (DatabaseErrorKind::Unknown, "Table 'x' doesn't exist", false),
        ];
        for (kind, message, conflict) in rows {
            assert_eq!(is_conflict(&db_error(kind, message)), conflict, "{message}");
        }
        assert!(!is_conflict(&DieselError::NotFound));
        assert!(is_conflict(&db_error(
            DatabaseErrorKind::Unknown,
            "WSREP has not yet prepared node for application use"
        )));
        assert!(is_conflict(&lost_race("claim_run")));
        let broken = DieselError::BrokenTransactionManager;
        assert!(!is_conflict(&broken), "not a conflict itself");
        assert!(
            MaybeConflict::is_conflict(&broken) && MaybeConflict::needs_new_connection(&broken),
            "but the work runs again, on a new connection"
        );
        let deadlock = db_error(
            DatabaseErrorKind::Unknown,
            "Deadlock found when trying to get lock; try restarting transaction",
        );
        assert!(!MaybeConflict::needs_new_connection(&deadlock));
    }

    #[test]
    fn back_off_grows_with_jitter_up_to_its_ceiling() {
        let first = (back_off_for(1, 0), back_off_for(1, u64::MAX));
        assert_eq!(first.0, Duration::from_micros(500));
        assert!(first.1 <= Duration::from_millis(2), "{first:?}");
        assert!(back_off_for(4, 0) > back_off_for(2, 0));
        for attempt in 1..=MAX_CONFLICT_RETRIES {
            for draw in [0, 7, 12_345, u64::MAX] {
                assert!(back_off_for(attempt, draw) <= MAX_BACK_OFF);
            }
        }
        // The budget's worst case: every sleep at its ceiling.
        let worst: Duration = (1..=MAX_CONFLICT_RETRIES)
            .map(|a| back_off_for(a, u64::MAX))
            .sum();
        assert!(worst <= MAX_CONFLICT_SLEEP + MAX_BACK_OFF, "{worst:?}");
    }
}
