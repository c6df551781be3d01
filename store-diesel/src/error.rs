//! Errors of the database: the mapping of diesel's errors into the ports'
//! [`flowstate_core::Error`], and the one table (`ERRORS`) that decides
//! which of them are worth retrying ([`is_retryable`], public for code
//! that sends its own diesel statements beside a store). What opening and
//! migrating a store can raise is [`crate::Error`].
//!
//! diesel-async does not hand us the servers' error codes, only what it
//! keeps of them, so the table is keyed by that: a [`DatabaseErrorKind`]
//! (the few codes diesel-async sorts into a kind, such as a unique
//! violation or PostgreSQL's serialization failure) and otherwise the
//! start of the message text.
//!
//! - PostgreSQL: an error with a SQLSTATE keeps the server's message (its
//!   code is not reachable through diesel's `DatabaseErrorInformation`);
//!   one without (the connection closed, an I/O error, a protocol error)
//!   is `UnableToSendCommand` with tokio-postgres's text.
//! - MySQL/MariaDB: a server error keeps its message; a client error (I/O,
//!   the driver's "connection closed") is `Unknown` with mysql_async's
//!   text, which stands for libmysqlclient's 2006 and 2013 (mysql_async
//!   raises neither code).
//! - SQLite: `Unknown` with `sqlite3_errmsg`'s text, except the
//!   constraint violations diesel sorts into kinds.
//!
//! Each row names the code it stands for; the tests build every row's
//! error as diesel-async does and check its answer, and the dialects'
//! `healing.rs` tests raise the rows a shared server can raise for real.
//! What a retryable error means for the pool (a lost connection makes it
//! check the connections it holds) is the pool's (`health.rs`).

use std::time::Duration;

use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// Maps a diesel error raised during `operation` into the ports' error,
/// deciding whether it is worth retrying by [`ERRORS`]: a unique,
/// foreign-key, not-null or check violation is not (the same call fails
/// the same way); a lost connection, a session the server ended, a
/// serialization failure, a deadlock victim, a lock wait that timed out,
/// a full or read-only server are.
pub(crate) fn backend(operation: &'static str, err: DieselError) -> flowstate_core::Error {
    let retryable = is_retryable(&err);
    flowstate_core::Error::backend(operation, retryable, err)
}

/// Maps a diesel error raised during `operation` on a row that references
/// run `parent` by foreign key (its steps, state, effects, signals,
/// children): a foreign-key violation is that run missing
/// ([`flowstate_core::Error::RunNotFound`]); anything else, or no parent, is
/// [`backend`].
pub(crate) fn or_missing_run(
    operation: &'static str,
    parent: impl Into<Option<flowstate_core::RunId>>,
    err: DieselError,
) -> flowstate_core::Error {
    match parent.into() {
        Some(run) if is_foreign_key_violation(&err) => flowstate_core::Error::RunNotFound(run),
        _ => backend(operation, err),
    }
}

/// Whether an error diesel answered for a statement is worth retrying, by
/// this module's one table of errors: for code that sends its own diesel
/// statements beside a store (the store's own errors carry the answer in
/// [`flowstate_core::Error::is_retryable`]).
pub fn is_retryable(err: &DieselError) -> bool {
    retry_of(err) != Retry::Never
}

/// What retrying an error can achieve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Nothing: the same call fails the same way.
    Never,
    /// The transaction lost a lock conflict and was rolled back whole (a
    /// deadlock victim, a serialization failure, a lock wait that timed
    /// out): the same work may run again at once.
    Conflict,
    /// The server cannot take the work now (too many connections, starting
    /// up, a Galera node not synced, SQLite's lock held past the busy
    /// timeout): try again a little later.
    Later,
    /// The connection is lost, or reaches a server that will not write
    /// (the session killed, the server shut down, a read-only server):
    /// try again on another connection. The pool drops the connection and
    /// checks the ones idle since before it hands them out
    /// ([`crate::health`]).
    Reconnect,
}

/// How a row of [`ERRORS`] recognises the message.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Text {
    /// Any message of the row's kind.
    Any,
    /// A message that starts with this text, exactly as the server or the
    /// driver writes it.
    Starts(&'static str),
}

/// One row of [`ERRORS`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    /// The code the row stands for, by dialect, as the servers document it.
    pub(crate) code: &'static str,
    /// The kind diesel-async gives the error.
    pub(crate) kind: DatabaseErrorKind,
    /// The message, when the kind alone does not tell.
    pub(crate) text: Text,
    /// What retrying achieves.
    pub(crate) retry: Retry,
}

/// A row of [`ERRORS`].
const fn row(code: &'static str, kind: DatabaseErrorKind, text: Text, retry: Retry) -> Row {
    Row {
        code,
        kind,
        text,
        retry,
    }
}

/// Every database error this crate has an answer for, first match wins;
/// an error no row matches is not worth retrying. A message row matches
/// the start of the message, where servers write their fixed text (values
/// a user wrote, if any, come later), so a value can never make an error
/// look retryable.
#[rustfmt::skip]
pub(crate) static ERRORS: &[Row] = {
    use DatabaseErrorKind as K;
    use Retry::{Conflict, Later, Never, Reconnect};
    use Text::{Any, Starts};
    &[
        // Constraint violations, by the kind diesel-async sorts them into.
        row("PostgreSQL 23505, MySQL 1062/1586/1859, SQLite CONSTRAINT_UNIQUE/_PRIMARYKEY: unique violation", K::UniqueViolation, Any, Never),
        row("PostgreSQL 23503, MySQL 1216/1217/1451/1452/1830/1834, SQLite CONSTRAINT_FOREIGNKEY: foreign-key violation", K::ForeignKeyViolation, Any, Never),
        row("PostgreSQL 23502, MySQL 1048/1364, SQLite CONSTRAINT_NOTNULL: not-null violation", K::NotNullViolation, Any, Never),
        row("PostgreSQL 23514, MySQL 3819, SQLite CONSTRAINT_CHECK: check violation", K::CheckViolation, Any, Never),
        row("PostgreSQL 23001: restrict violation", K::RestrictViolation, Any, Never),
        row("PostgreSQL 23P01: exclusion violation", K::ExclusionViolation, Any, Never),
        // Kinds that decide alone.
        row("PostgreSQL 40001 serialization_failure, FATAL on a hot standby: the session ended by a recovery conflict", K::SerializationFailure, Starts("terminating connection "), Reconnect),
        row("PostgreSQL 40001 serialization_failure", K::SerializationFailure, Any, Conflict),
        row("PostgreSQL 25006 read_only_sql_transaction, MySQL 1792: a read-only transaction (a demoted primary; a new connection may reach the new one)", K::ReadOnlyTransaction, Any, Reconnect),
        row("diesel's closed connection (diesel-async raises none today)", K::ClosedConnection, Any, Reconnect),
        // PostgreSQL, a server error with a SQLSTATE: the message.
        row("PostgreSQL 40P01 deadlock_detected", K::Unknown, Starts("deadlock detected"), Conflict),
        row("PostgreSQL 55P03 lock_not_available (lock_timeout)", K::Unknown, Starts("canceling statement due to lock timeout"), Conflict),
        row("PostgreSQL 55P03 lock_not_available (NOWAIT)", K::Unknown, Starts("could not obtain lock on "), Conflict),
        row("PostgreSQL 57P01 admin_shutdown", K::Unknown, Starts("terminating connection due to administrator command"), Reconnect),
        row("PostgreSQL 57P02 crash_shutdown", K::Unknown, Starts("terminating connection because of crash of another server process"), Reconnect),
        row("PostgreSQL 08P01 protocol_violation, 25P03, 57P05 and every other FATAL ending the session", K::Unknown, Starts("terminating connection "), Reconnect),
        row("PostgreSQL 57P03 cannot_connect_now (starting up, shutting down, in recovery, not accepting connections: a server a failover left or has not finished; a new connection may reach the primary)", K::Unknown, Starts("the database system is "), Reconnect),
        row("PostgreSQL 53300 too_many_connections", K::Unknown, Starts("sorry, too many clients already"), Later),
        row("PostgreSQL 53300 too_many_connections (reserved slots)", K::Unknown, Starts("remaining connection slots are reserved for "), Later),
        row("PostgreSQL 53300 too_many_connections (per role or database)", K::Unknown, Starts("too many connections for "), Later),
        // PgBouncer's own errors (SQLSTATE 08P01, the client's connection
        // ended, but for the waits that answer 57P01 or 08P01 and keep it).
        row("PgBouncer 08P01: its server connection died mid-transaction", K::Unknown, Starts("server conn crashed?"), Reconnect),
        row("PgBouncer 08P01: it cannot reach its server (a failover in progress)", K::Unknown, Starts("pgbouncer cannot connect to server"), Reconnect),
        row("PgBouncer 08P01: server_login_retry (its server refused logins)", K::Unknown, Starts("server login has been failing"), Reconnect),
        row("PgBouncer 08P01: its SET of the client's parameters failed on a fresh server connection (a server dying or just promoted: the client's statement never ran)", K::Unknown, Starts("invalid server parameter"), Reconnect),
        row("PgBouncer 08P01: query_wait_timeout (no server connection came free)", K::Unknown, Starts("query_wait_timeout"), Later),
        row("PgBouncer 57P01: shutting down (pgbouncer -R, SIGINT, SHUTDOWN)", K::Unknown, Starts("pgbouncer is shutting down"), Reconnect),
        row("PgBouncer 53300: max_client_conn", K::Unknown, Starts("no more connections allowed (max_client_conn)"), Later),
        // PostgreSQL, the 08 class of connection exceptions: tokio-postgres
        // raises them without a SQLSTATE.
        row("PostgreSQL 08006 connection_failure: the connection closed", K::UnableToSendCommand, Starts("connection closed"), Reconnect),
        row("PostgreSQL 08006 connection_failure: an I/O error", K::UnableToSendCommand, Starts("error communicating with the server"), Reconnect),
        row("PostgreSQL 08P01 protocol_violation: a reply that cannot be parsed", K::UnableToSendCommand, Starts("error parsing response from server"), Reconnect),
        row("PostgreSQL 08P01 protocol_violation: a reply out of turn", K::UnableToSendCommand, Starts("unexpected message from server"), Reconnect),
        row("PostgreSQL 08001 sqlclient_unable_to_establish_sqlconnection", K::UnableToSendCommand, Starts("error connecting to server"), Reconnect),
        row("PostgreSQL 08001 sqlclient_unable_to_establish_sqlconnection (timed out)", K::UnableToSendCommand, Starts("timeout waiting for server"), Reconnect),
        row("PostgreSQL 08001 sqlclient_unable_to_establish_sqlconnection (TLS)", K::UnableToSendCommand, Starts("error performing TLS handshake"), Reconnect),
        row("PostgreSQL 08006 connection_failure: diesel-async's connection task ended", K::UnableToSendCommand, Starts("channel closed"), Reconnect),
        // MySQL/MariaDB, a server error: the message.
        row("MySQL 1213 ER_LOCK_DEADLOCK (Galera's certification failures too)", K::Unknown, Starts("Deadlock found when trying to get lock"), Conflict),
        row("MySQL 1205 ER_LOCK_WAIT_TIMEOUT", K::Unknown, Starts("Lock wait timeout exceeded"), Conflict),
        row("MariaDB 1927 ER_CONNECTION_KILLED", K::Unknown, Starts("Connection was killed"), Reconnect),
        row("MySQL 1053 ER_SERVER_SHUTDOWN", K::Unknown, Starts("Server shutdown in progress"), Reconnect),
        row("MySQL 1040 ER_CON_COUNT_ERROR", K::Unknown, Starts("Too many connections"), Later),
        row("Galera 1047 WSREP not ready (a node not synced, or cut off from the primary component: the statement did not run; the node is skipped and the work runs again on another connection)", K::Unknown, Starts("WSREP has not yet prepared node for application use"), Reconnect),
        row("MariaDB 1290 ER_OPTION_PREVENTS_STATEMENT (--read-only)", K::Unknown, Starts("The MariaDB server is running with the --read-only option"), Reconnect),
        row("MySQL 1290 ER_OPTION_PREVENTS_STATEMENT (--read-only)", K::Unknown, Starts("The MySQL server is running with the --read-only option"), Reconnect),
        row("MySQL 1290 ER_OPTION_PREVENTS_STATEMENT (--super-read-only)", K::Unknown, Starts("The MySQL server is running with the --super-read-only option"), Reconnect),
        row("MySQL 1836 ER_READ_ONLY_MODE", K::Unknown, Starts("Running in read-only mode"), Reconnect),
        // MySQL/MariaDB, a client error: mysql_async's text.
        row("MySQL 2006 CR_SERVER_GONE_ERROR, 2013 CR_SERVER_LOST: mysql_async's I/O error", K::Unknown, Starts("Input/output error: "), Reconnect),
        row("MySQL 2006 CR_SERVER_GONE_ERROR: mysql_async's closed connection", K::Unknown, Starts("Driver error: `Connection to the server is closed.'"), Reconnect),
        row("MySQL 2027 CR_MALFORMED_PACKET: mysql_async out of step with the server", K::Unknown, Starts("Driver error: `Packet out of order.'"), Reconnect),
        // SQLite.
        row("SQLite BUSY: the write lock held past the busy timeout", K::Unknown, Starts("database is locked"), Later),
        row("SQLite LOCKED: a table locked on this connection", K::Unknown, Starts("database table is locked"), Later),
        row("SQLite LOCKED: the schema locked", K::Unknown, Starts("database schema is locked"), Later),
    ]
};

/// What retrying `err` achieves: its row of [`ERRORS`]; a broken
/// transaction manager (a rollback that failed, so the connection's
/// state is unknown: the pool drops it) is worth a new connection; any
/// other error is not worth retrying.
pub(crate) fn retry_of(err: &DieselError) -> Retry {
    match err {
        DieselError::BrokenTransactionManager => Retry::Reconnect,
        _ => row_for(err).map_or(Retry::Never, |row| row.retry),
    }
}

/// The row of [`ERRORS`] for `err`, if it is a database error one has.
pub(crate) fn row_for(err: &DieselError) -> Option<&'static Row> {
    match err {
        DieselError::DatabaseError(kind, info) => row_of(*kind, info.message()),
        _ => None,
    }
}

/// The first row of [`ERRORS`] matching a database error of `kind` with
/// `message`.
fn row_of(kind: DatabaseErrorKind, message: &str) -> Option<&'static Row> {
    ERRORS.iter().find(|row| {
        row.kind == kind
            && match row.text {
                Text::Any => true,
                Text::Starts(start) => message.starts_with(start),
            }
    })
}

/// Whether a diesel error is a foreign-key violation.
pub(crate) fn is_foreign_key_violation(err: &DieselError) -> bool {
    matches!(
        err,
        DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)
    )
}

/// Maps a pool error: a timeout is [`flowstate_core::Error::PoolTimeout`],
/// anything else a retryable backend error (the database went away).
pub(crate) fn pool(
    operation: &'static str,
    waited: Duration,
    err: diesel_async::pooled_connection::deadpool::PoolError,
) -> flowstate_core::Error {
    use deadpool::managed::PoolError;
    match err {
        PoolError::Timeout(_) => flowstate_core::Error::PoolTimeout {
            waited_ms: waited.as_millis() as u64,
        },
        other => flowstate_core::Error::backend(operation, true, other),
    }
}

/// Why a unit of work run by [`in_transaction!`] failed: the database
/// (mapped by [`crate::error::backend`], a lock conflict running the work
/// again), or an answer of the port (a typed not-found, a corrupt row) that
/// also rolls the transaction back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TxError {
    /// A diesel error.
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    /// The port's own answer.
    #[error(transparent)]
    Port(#[from] flowstate_core::Error),
}

#[cfg(test)]
mod tests {
    use diesel::result::DatabaseErrorKind as K;

    use super::*;

    /// A PostgreSQL error with a SQLSTATE, as diesel-async's
    /// `from_tokio_postgres_error` builds it: the kind it gives the code,
    /// and the server's message (its wrapper of the server's `DbError`
    /// answers `message()` with that text, as a `String` does).
    fn postgres(sqlstate: &str, message: &str) -> DieselError {
        let kind = match sqlstate {
            "23505" => K::UniqueViolation,
            "23503" => K::ForeignKeyViolation,
            "23001" => K::RestrictViolation,
            "23P01" => K::ExclusionViolation,
            "40001" => K::SerializationFailure,
            "25006" => K::ReadOnlyTransaction,
            "23502" => K::NotNullViolation,
            "23514" => K::CheckViolation,
            _ => K::Unknown,
        };
        DieselError::DatabaseError(kind, Box::new(message.to_owned()))
    }

    /// A PostgreSQL error without a SQLSTATE, as diesel-async builds it:
    /// `UnableToSendCommand` with tokio-postgres's text.
    fn postgres_client(text: &str) -> DieselError {
        DieselError::DatabaseError(K::UnableToSendCommand, Box::new(text.to_owned()))
    }

    /// A MySQL server error, as diesel-async's `ErrorHelper` builds it: the
    /// kind it gives the code, and the server's message.
    fn mysql(code: u16, message: &str) -> DieselError {
        let kind = match code {
            1062 | 1586 | 1859 => K::UniqueViolation,
            1216 | 1217 | 1451 | 1452 | 1830 | 1834 => K::ForeignKeyViolation,
            1792 => K::ReadOnlyTransaction,
            1048 | 1364 => K::NotNullViolation,
            3819 => K::CheckViolation,
            _ => K::Unknown,
        };
        DieselError::DatabaseError(kind, Box::new(message.to_owned()))
    }

    /// A mysql_async client error (I/O, driver), as diesel-async builds it:
    /// `Unknown` with the error's text.
    fn mysql_client(text: &str) -> DieselError {
        DieselError::DatabaseError(K::Unknown, Box::new(text.to_owned()))
    }

    /// A SQLite error with extended result code `code`, as diesel builds
    /// it: the kind it gives the code, and `sqlite3_errmsg`'s text.
    fn sqlite(code: i32, message: &str) -> DieselError {
        let kind = match code {
            2067 | 1555 => K::UniqueViolation,
            787 => K::ForeignKeyViolation,
            1299 => K::NotNullViolation,
            275 => K::CheckViolation,
            _ => K::Unknown,
        };
        DieselError::DatabaseError(kind, Box::new(message.to_owned()))
    }

    /// Every case: the code whose row must answer (none: no row does), the
    /// error as the driver hands it over, with the text the server or the
    /// driver writes, and the answer.
    #[rustfmt::skip]
    fn cases() -> Vec<(Option<&'static str>, DieselError, Retry)> {
        use Retry::{Conflict, Later, Never, Reconnect};
        vec![
            // PostgreSQL, server errors.
            (Some("23505"), postgres("23505", "duplicate key value violates unique constraint \"flowstate_runs_pkey\""), Never),
            (Some("23503"), postgres("23503", "insert or update on table \"flowstate_steps\" violates foreign key constraint \"flowstate_steps_run_id_fkey\""), Never),
            (Some("23502"), postgres("23502", "null value in column \"name\" of relation \"flowstate_steps\" violates not-null constraint"), Never),
            (Some("23514"), postgres("23514", "new row for relation \"flowstate_steps\" violates check constraint \"flowstate_steps_attempt_check\""), Never),
            (Some("23001"), postgres("23001", "update or delete on table \"flowstate_runs\" violates RESTRICT setting of foreign key constraint \"fk\" on table \"t\""), Never),
            (Some("23P01"), postgres("23P01", "conflicting key value violates exclusion constraint \"no_overlap\""), Never),
            (Some("40001"), postgres("40001", "could not serialize access due to concurrent update"), Conflict),
            (Some("40001"), postgres("40001", "could not serialize access due to read/write dependencies among transactions"), Conflict),
            (Some("25006"), postgres("25006", "cannot execute INSERT in a read-only transaction"), Reconnect),
            (Some("40P01"), postgres("40P01", "deadlock detected"), Conflict),
            (Some("55P03"), postgres("55P03", "canceling statement due to lock timeout"), Conflict),
            (Some("55P03"), postgres("55P03", "could not obtain lock on row in relation \"flowstate_steps\""), Conflict),
            (Some("57P01"), postgres("57P01", "terminating connection due to administrator command"), Reconnect),
            (Some("57P02"), postgres("57P02", "terminating connection because of crash of another server process"), Reconnect),
            (Some("08P01"), postgres("08P01", "terminating connection because protocol synchronization was lost"), Reconnect),
            (Some("25P03"), postgres("25P03", "terminating connection due to idle-in-transaction timeout"), Reconnect),
            (Some("57P05"), postgres("57P05", "terminating connection due to idle-session timeout"), Reconnect),
            (Some("57P03"), postgres("57P03", "the database system is starting up"), Reconnect),
            (Some("57P03"), postgres("57P03", "the database system is shutting down"), Reconnect),
            (Some("57P03"), postgres("57P03", "the database system is in recovery mode"), Reconnect),
            (Some("57P03"), postgres("57P03", "the database system is not yet accepting connections"), Reconnect),
            (Some("25006"), postgres("25006", "cannot execute UPDATE in a read-only transaction"), Reconnect),
            (Some("recovery conflict"), DieselError::DatabaseError(K::SerializationFailure, Box::new(String::from("terminating connection due to conflict with recovery"))), Reconnect),
            // PgBouncer's own errors.
            (Some("server connection died"), postgres("08P01", "server conn crashed?"), Reconnect),
            (Some("cannot reach"), postgres("08P01", "pgbouncer cannot connect to server"), Reconnect),
            (Some("server_login_retry"), postgres("08P01", "server login has been failing, try again later (server_login_retry)"), Reconnect),
            (Some("SET of the client's parameters"), postgres("08P01", "invalid server parameter"), Reconnect),
            (Some("query_wait_timeout"), postgres("08P01", "query_wait_timeout"), Later),
            (Some("PgBouncer 57P01"), postgres("57P01", "pgbouncer is shutting down"), Reconnect),
            (Some("max_client_conn"), postgres("08P01", "no more connections allowed (max_client_conn)"), Later),
            (Some("53300"), postgres("53300", "sorry, too many clients already"), Later),
            (Some("53300"), postgres("53300", "remaining connection slots are reserved for non-replication superuser connections"), Later),
            (Some("53300"), postgres("53300", "too many connections for role \"flowstate\""), Later),
            (None, postgres("42601", "syntax error at or near \"SELEC\""), Never),
            (None, postgres("57014", "canceling statement due to statement timeout"), Never),
            // A value can't make an error look retryable: rows match
            // the start of the message.
            (None, postgres("22P02", "invalid input syntax for type integer: \"deadlock detected\""), Never),
            // PostgreSQL, connection exceptions tokio-postgres raises
            // without a SQLSTATE.
            (Some("08006"), postgres_client("connection closed"), Reconnect),
            (Some("08006"), postgres_client("error communicating with the server: Connection reset by peer (os error 104)"), Reconnect),
            (Some("08006"), postgres_client("error communicating with the server: Broken pipe (os error 32)"), Reconnect),
            (Some("08P01"), postgres_client("error parsing response from server: invalid message length"), Reconnect),
            (Some("08P01"), postgres_client("unexpected message from server"), Reconnect),
            (Some("08001"), postgres_client("error connecting to server: Connection refused (os error 111)"), Reconnect),
            (Some("08001"), postgres_client("timeout waiting for server"), Reconnect),
            (Some("08001"), postgres_client("error performing TLS handshake: unexpected EOF"), Reconnect),
            (Some("08006"), postgres_client("channel closed"), Reconnect),
            (None, postgres_client("expected 2 parameters but got 1"), Never),
            // MySQL/MariaDB, server errors.
            (Some("1062"), mysql(1062, "Duplicate entry 'a' for key 'PRIMARY'"), Never),
            (Some("1452"), mysql(1452, "Cannot add or update a child row: a foreign key constraint fails (`db`.`flowstate_steps`, CONSTRAINT `fk` FOREIGN KEY (`run_id`) REFERENCES `flowstate_runs` (`id`))"), Never),
            (Some("1048"), mysql(1048, "Column 'name' cannot be null"), Never),
            (Some("3819"), mysql(3819, "Check constraint 'attempt' is violated."), Never),
            (None, mysql(4025, "CONSTRAINT `flowstate_runs.input` failed for `db`.`flowstate_runs`"), Never),
            (Some("1792"), mysql(1792, "Cannot execute statement in a READ ONLY transaction"), Reconnect),
            (Some("1213"), mysql(1213, "Deadlock found when trying to get lock; try restarting transaction"), Conflict),
            (Some("1205"), mysql(1205, "Lock wait timeout exceeded; try restarting transaction"), Conflict),
            (Some("1927"), mysql(1927, "Connection was killed"), Reconnect),
            (Some("1053"), mysql(1053, "Server shutdown in progress"), Reconnect),
            (Some("1040"), mysql(1040, "Too many connections"), Later),
            (Some("1047"), mysql(1047, "WSREP has not yet prepared node for application use"), Reconnect),
            (None, mysql(1047, "Unknown command"), Never),
            (Some("1290"), mysql(1290, "The MariaDB server is running with the --read-only option so it cannot execute this statement"), Reconnect),
            (Some("1290"), mysql(1290, "The MySQL server is running with the --read-only option so it cannot execute this statement"), Reconnect),
            (Some("1290"), mysql(1290, "The MySQL server is running with the --super-read-only option so it cannot execute this statement"), Reconnect),
            (None, mysql(1290, "The MariaDB server is running with the --secure-file-priv option so it cannot execute this statement"), Never),
            (Some("1836"), mysql(1836, "Running in read-only mode"), Reconnect),
            (None, mysql(1366, "Incorrect integer value: 'Deadlock found when trying to get lock' for column `db`.`t`.`n` at row 1"), Never),
            // MySQL/MariaDB, mysql_async's client errors, as a killed
            // session answers them.
            (Some("2006"), mysql_client("Input/output error: Input/output error: Broken pipe (os error 32)"), Reconnect),
            (Some("2013"), mysql_client("Input/output error: Input/output error: Connection reset by peer (os error 104)"), Reconnect),
            (Some("2013"), mysql_client("Input/output error: Input/output error: Driver error: `Connection to the server is closed.'"), Reconnect),
            (Some("2013"), mysql_client("Input/output error: Input/output error: connection closed"), Reconnect),
            (Some("2006"), mysql_client("Driver error: `Connection to the server is closed.'"), Reconnect),
            (Some("2027"), mysql_client("Driver error: `Packet out of order.'"), Reconnect),
            (None, mysql_client("Driver error: `Statement takes 2 parameters but 1 was supplied.'"), Never),
            // SQLite.
            (Some("BUSY"), sqlite(5, "database is locked"), Later),
            (Some("BUSY"), sqlite(517, "database is locked"), Later),
            (Some("LOCKED: a table"), sqlite(6, "database table is locked"), Later),
            (Some("LOCKED: a table"), sqlite(262, "database table is locked: flowstate_runs"), Later),
            (Some("LOCKED: the schema"), sqlite(6, "database schema is locked: main"), Later),
            (Some("CONSTRAINT_UNIQUE"), sqlite(2067, "UNIQUE constraint failed: flowstate_runs.id"), Never),
            (Some("CONSTRAINT_UNIQUE"), sqlite(1555, "UNIQUE constraint failed: flowstate_runs.id"), Never),
            (Some("CONSTRAINT_FOREIGNKEY"), sqlite(787, "FOREIGN KEY constraint failed"), Never),
            (Some("CONSTRAINT_NOTNULL"), sqlite(1299, "NOT NULL constraint failed: flowstate_steps.name"), Never),
            (Some("CONSTRAINT_CHECK"), sqlite(275, "CHECK constraint failed: attempt >= 1"), Never),
            (None, sqlite(8, "attempt to write a readonly database"), Never),
            // diesel's own kind for a closed connection.
            (Some("closed connection"), DieselError::DatabaseError(K::ClosedConnection, Box::new(String::from("server closed the connection unexpectedly"))), Reconnect),
        ]
    }

    #[test]
    fn every_error_gets_the_answer_of_its_row() {
        for (code, err, retry) in cases() {
            let DieselError::DatabaseError(kind, info) = &err else {
                unreachable!("every case is a database error");
            };
            let row = row_of(*kind, info.message());
            match (code, row) {
                (Some(code), Some(row)) => {
                    assert!(row.code.contains(code), "{err}: row {row:?}, not {code}");
                }
                (None, None) => {}
                (code, row) => panic!("{err}: row {row:?}, expected the row of {code:?}"),
            }
            assert_eq!(retry_of(&err), retry, "{err}");
            assert_eq!(is_retryable(&err), retry != Retry::Never, "{err}");
        }
    }

    #[test]
    fn every_row_has_a_case() {
        let cases = cases();
        for row in ERRORS {
            let matched = cases.iter().any(|(_, err, _)| {
                let DieselError::DatabaseError(kind, info) = err else {
                    return false;
                };
                row_of(*kind, info.message()).is_some_and(|found| std::ptr::eq(found, row))
            });
            assert!(matched, "no case reaches row {row:?}");
        }
    }

    #[test]
    fn a_broken_transaction_manager_wants_a_new_connection_and_nothing_else_is_retried() {
        assert_eq!(
            retry_of(&DieselError::BrokenTransactionManager),
            Retry::Reconnect
        );
        for err in [
            DieselError::NotFound,
            DieselError::RollbackTransaction,
            DieselError::AlreadyInTransaction,
            DieselError::QueryBuilderError("bad".into()),
        ] {
            assert_eq!(retry_of(&err), Retry::Never, "{err}");
        }
    }

    #[test]
    fn backend_errors_carry_the_answer() {
        let lost = backend("get_run", postgres_client("connection closed"));
        assert!(lost.is_retryable(), "{lost}");
        let duplicate = backend(
            "create_run",
            mysql(1062, "Duplicate entry 'a' for key 'PRIMARY'"),
        );
        assert!(!duplicate.is_retryable(), "{duplicate}");
    }
}
