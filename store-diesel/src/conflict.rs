//! Lock conflicts and running a unit of work again after one.
//!
//! InnoDB may abort a transaction (or a single statement) as a deadlock
//! victim (1213) or give up on a lock wait (1205), and PostgreSQL may pick
//! a deadlock victim too; the whole unit of work was rolled back and is
//! safe to run again, which [`retry_conflicts!`] does a bounded number of
//! times with a short jittered sleep before it lets the error through
//! (mapped to a retryable [`flowstate_core::Error::Backend`]).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// How many times a unit of work is run again after a conflict.
pub(crate) const MAX_CONFLICT_RETRIES: u32 = 8;

/// Whether `err` means the transaction lost a lock conflict and was (or may
/// safely be) rolled back whole: a deadlock victim, a lock wait timeout or a
/// serialization failure. A dropped connection is not: running again on the
/// same connection cannot help.
pub(crate) fn is_conflict(err: &DieselError) -> bool {
    match err {
        DieselError::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => true,
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, info) => {
            // diesel-async keeps the server's message, not its code: 1213 is
            // "Deadlock found when trying to get lock; try restarting
            // transaction", 1205 "Lock wait timeout exceeded; try restarting
            // transaction".
            let message = info.message().to_ascii_lowercase();
            message.contains("deadlock") || message.contains("lock wait timeout")
        }
        _ => false,
    }
}

/// An error that may be a lost lock conflict ([`is_conflict`]): what
/// [`retry_conflicts!`] retries on.
pub(crate) trait MaybeConflict: std::fmt::Display {
    /// Whether the unit of work lost a lock conflict and may run again.
    fn is_conflict(&self) -> bool;
}

impl MaybeConflict for DieselError {
    fn is_conflict(&self) -> bool {
        is_conflict(self)
    }
}

impl MaybeConflict for crate::error::TxError {
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Db(err) if is_conflict(err))
    }
}

/// Sleeps before conflict retry number `attempt` (1-based): a few
/// milliseconds growing with the attempt, with jitter so the transactions
/// that collided do not collide again in step.
pub(crate) async fn back_off(attempt: u32) {
    let jitter = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 1_000;
    let base = u64::from(attempt.min(6)) * 1_000;
    tokio::time::sleep(Duration::from_micros(base + jitter * u64::from(attempt))).await;
}

/// Runs `$work` (an expression ending in `.await` that yields a
/// `QueryResult` or a `Result<_, TxError>`) again while it fails with a
/// conflict ([`MaybeConflict`]),
/// at most [`MAX_CONFLICT_RETRIES`] more times; yields its last result.
macro_rules! retry_conflicts {
    ($op:expr, $work:expr) => {{
        let mut conflicts = 0_u32;
        loop {
            match $work {
                Err(err)
                    if conflicts < $crate::conflict::MAX_CONFLICT_RETRIES
                        && $crate::conflict::MaybeConflict::is_conflict(&err) =>
                {
                    conflicts += 1;
                    tracing::debug!(operation = $op, conflicts, %err, "conflict, running again");
                    $crate::conflict::back_off(conflicts).await;
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use retry_conflicts;

/// One arm of [`by_returning!`]: take a pooled connection, run the body
/// on it (again after a conflict).
macro_rules! leased {
    ($pool:expr, $op:expr, |$conn:ident| $body:expr) => {{
        let mut conn = $pool.get($op).await?;
        let $conn = &mut *conn;
        $crate::conflict::retry_conflicts!($op, async { $body }.await)
    }};
}
pub(crate) use leased;

/// One arm of [`in_transaction!`]: a pooled connection, the transaction
/// run again after a lock conflict, its error mapped.
macro_rules! transacted {
    ($pool:expr, $op:expr, |$c:ident| $work:expr) => {{
        let mut conn = $pool.get($op).await?;
        let $c = &mut *conn;
        let out: Result<_, $crate::error::TxError> = $crate::conflict::retry_conflicts!($op, $work);
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
    }
}
