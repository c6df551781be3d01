//! Connections that heal: every server session of a store's pool killed
//! behind its back (`pg_terminate_backend`, `KILL CONNECTION`), then calls
//! that must answer again at once, with nothing written before lost.
//! Written once for PostgreSQL and MariaDB; each dialect's `healing.rs`
//! runs it, asserts what that dialect's pool does exactly, and adds the
//! real errors only that dialect produces.

use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::result::Error as DieselError;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewRun, NewStep, Run, StepStatus};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};
use serde_json::json;

use super::db::{TestDb, server_url};

/// The pool of the store whose sessions are killed: every connection open.
pub const POOL: usize = 4;

/// Runs written before the kill, read back after it.
const BEFORE: usize = 8;

/// Calls made after the kill, one at a time: a read first (so a failed
/// first call wrote nothing), then reads and writes in turn.
pub const CALLS: usize = 12;

/// How long any call after the first may take.
pub const CALL_BOUND: Duration = Duration::from_secs(1);

/// The statement the pool checks a connection with after a loss.
pub const CHECK: &str = "SELECT 1";

/// PostgreSQL's check (`store-diesel/src/postgres/connection.rs`): it
/// also fails, with 25006, on a server in recovery or read-only.
pub const PG_CHECK: &str = "DO $$BEGIN IF pg_is_in_recovery() \
     OR current_setting('transaction_read_only') = 'on' THEN RAISE EXCEPTION \
     'the server takes no writes (in recovery or read-only)' \
     USING ERRCODE = 'read_only_sql_transaction'; END IF; END$$";

/// A bound on the server dropping the killed sessions: a hang guard.
const GONE_GUARD: Duration = Duration::from_secs(10);

/// What the calls after the kill did.
#[derive(Debug)]
pub struct Healing {
    /// What the first call answered: a retryable error or nothing.
    pub first: Result<(), Error>,
    /// The statements each call sent (its check of a pooled connection
    /// and a new connection's setup included), in call order.
    pub statements: Vec<Vec<String>>,
    /// How long each call took, in call order.
    pub took: Vec<Duration>,
}

impl Healing {
    /// How many checks of a pooled connection the calls sent.
    pub fn checks(&self) -> usize {
        self.statements
            .iter()
            .flatten()
            .filter(|sql| sql.as_str() == CHECK || sql.as_str() == PG_CHECK)
            .count()
    }

    /// How many statements the calls sent that start with `start`.
    pub fn starting(&self, start: &str) -> usize {
        self.statements
            .iter()
            .flatten()
            .filter(|sql| sql.starts_with(start))
            .count()
    }

    /// How many calls failed (at most the first).
    pub fn failed(&self) -> usize {
        usize::from(self.first.is_err())
    }
}

/// Opens a store with a pool of [`POOL`] connections on a fresh `dialect`
/// database, warms every connection, writes [`BEFORE`] runs, kills every
/// session of that database from an admin connection, then makes
/// [`CALLS`] calls: the first may fail, retryably; every later one must
/// succeed within [`CALL_BOUND`], with no store re-opened. Reads
/// everything back, so nothing written before or after is lost, and
/// answers what the calls did for the dialect's exact checks.
pub async fn killed_sessions_heal(dialect: Dialect) -> Healing {
    let db = TestDb::migrated(dialect).await;
    let log = StatementLog::new();
    let config = StoreConfig::default()
        .acquire_timeout(Duration::from_secs(2))
        .statement_log(Arc::clone(&log));
    let store = db.warm_store(config, POOL).await;
    let mut before = Vec::with_capacity(BEFORE);
    for n in 0..BEFORE {
        before.push(
            store
                .create_run(NewRun::new("wf", json!({ "before": n })))
                .await
                .unwrap()
                .record,
        );
    }
    wait_for_sessions(&db, POOL).await;

    assert_eq!(
        kill_sessions(&db).await,
        POOL,
        "every pooled session is killed"
    );
    wait_for_sessions(&db, 0).await;

    let mut healing = Healing {
        first: Ok(()),
        statements: Vec::with_capacity(CALLS),
        took: Vec::with_capacity(CALLS),
    };
    let started = Instant::now();
    for call in 0..CALLS {
        let at = Instant::now();
        let (outcome, sent) = log
            .capture(tokio::time::timeout(
                CALL_BOUND.max(Duration::from_secs(5)),
                one_call(&store, call, &before),
            ))
            .await;
        let took = at.elapsed();
        let outcome = outcome.unwrap_or_else(|_| panic!("call {call} hung"));
        healing.statements.push(sent);
        healing.took.push(took);
        match outcome {
            Ok(()) => {}
            Err(err) if call == 0 => {
                assert!(
                    err.is_retryable(),
                    "the first call after the kill failed, and must say it is worth retrying: {err}"
                );
                healing.first = Err(err);
            }
            Err(err) => panic!(
                "call {call} after the kill failed ({:?} after the kill): {err}",
                started.elapsed()
            ),
        }
        if call > 0 {
            assert!(
                took < CALL_BOUND,
                "call {call} after the kill took {took:?}, over {CALL_BOUND:?}"
            );
        }
    }
    eprintln!(
        "{dialect}: sessions killed: {POOL}; first call: {}; calls 2..{CALLS}: slowest {:?}; \
         all {CALLS} calls in {:?}",
        match &healing.first {
            Ok(()) => "answered".to_owned(),
            Err(err) => format!("failed retryably in {:?} ({err})", healing.took[0]),
        },
        healing.took[1..].iter().max().unwrap(),
        started.elapsed(),
    );

    // Nothing lost: every run written before is there as it was, and
    // every write after the first call is there too.
    for run in &before {
        assert_eq!(&store.get_run(run.id).await.unwrap(), run);
    }
    let written_after = CALLS.div_ceil(4);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM flowstate_runs").await,
        i64::try_from(BEFORE + written_after).unwrap()
    );
    let steps = store.list_steps(before[0].id).await.unwrap();
    assert_eq!(
        steps.len(),
        written_after,
        "every step inserted after the kill"
    );
    assert!(
        steps.iter().all(|step| step.status == StepStatus::Running),
        "every step inserted after the kill was claimed: {steps:?}"
    );

    drop(store);
    db.drop_database().await;
    healing
}

/// Call number `call` after the kill: a read of a run written before, a
/// new run, a new step in the first run, and the claim of that step, in
/// turn.
async fn one_call(store: &DieselStore, call: usize, before: &[Run]) -> Result<(), Error> {
    let run = &before[0];
    match call % 4 {
        0 => {
            let read = store.get_run(before[call % before.len()].id).await?;
            assert_eq!(read, before[call % before.len()]);
        }
        1 => {
            store
                .create_run(NewRun::new("wf", json!({ "after": call })))
                .await?;
        }
        2 => {
            store
                .insert_step(NewStep::new(run.id, format!("s{call}"), "f", json!({})))
                .await?;
        }
        _ => {
            let claimed = store
                .claim_step(run.id, &format!("s{}", call - 1), "f")
                .await?;
            assert!(
                claimed.is_some(),
                "the step inserted by call {} is claimed",
                call - 1
            );
        }
    }
    Ok(())
}

/// A session id, as the kill queries answer it.
#[derive(QueryableByName)]
struct Session {
    /// PostgreSQL's backend pid or MariaDB's connection id.
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Kills every server session on `db`'s database (other than the admin
/// connection doing it) and answers how many it killed.
pub async fn kill_sessions(db: &TestDb) -> usize {
    let sessions = sessions(db).await;
    match db.dialect {
        Dialect::Postgres => {
            let mut admin = admin_pg().await;
            for session in &sessions {
                diesel::sql_query(format!("SELECT pg_terminate_backend({})", session.id))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
        }
        Dialect::Mysql => {
            let mut admin = admin_mysql().await;
            for session in &sessions {
                diesel::sql_query(format!("KILL CONNECTION {}", session.id))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
        }
        Dialect::Sqlite => unreachable!("SQLite has no server sessions"),
    }
    sessions.len()
}

/// Waits until the server lists exactly `count` sessions on `db`'s database.
pub async fn wait_for_sessions(db: &TestDb, count: usize) {
    let started = Instant::now();
    loop {
        let now = sessions(db).await.len();
        if now == count {
            return;
        }
        assert!(
            started.elapsed() < GONE_GUARD,
            "{} still lists {now} sessions on {}, not {count}",
            db.dialect,
            db.name
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The server sessions on `db`'s database, other than the admin
/// connection asking.
async fn sessions(db: &TestDb) -> Vec<Session> {
    match db.dialect {
        Dialect::Postgres => diesel::sql_query(
            "SELECT pid::bigint AS id FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind::<Text, _>(&db.name)
        .load(&mut admin_pg().await)
        .await
        .unwrap(),
        Dialect::Mysql => diesel::sql_query(
            "SELECT CAST(id AS SIGNED) AS id FROM information_schema.processlist \
             WHERE db = ? AND id <> CONNECTION_ID()",
        )
        .bind::<Text, _>(&db.name)
        .load(&mut admin_mysql().await)
        .await
        .unwrap(),
        Dialect::Sqlite => unreachable!("SQLite has no server sessions"),
    }
}

/// A connection to PostgreSQL's admin database.
async fn admin_pg() -> AsyncPgConnection {
    let url = format!("{}/postgres", server_url(Dialect::Postgres));
    AsyncPgConnection::establish(&url).await.unwrap()
}

/// A connection to the MariaDB server, on no database.
async fn admin_mysql() -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(&server_url(Dialect::Mysql))
        .await
        .unwrap()
}

/// The message of a database error (what the error table reads).
pub fn message(err: &DieselError) -> &str {
    match err {
        DieselError::DatabaseError(_, info) => info.message(),
        other => panic!("expected a database error, got {other:?}"),
    }
}

/// A store of one connection whose session is demoted to read-only
/// (`demote`, the dialect's SQL: what a demoted primary looks like to the
/// session that stays on it) fails the next write retryably, and the call
/// after it takes the write on a new connection within [`CALL_BOUND`].
pub async fn read_only_session_is_replaced(dialect: Dialect, demote: &str) {
    let db = TestDb::migrated(dialect).await;
    let store = db.warm_store(StoreConfig::default(), 1).await;
    store.batch_execute(demote).await.unwrap();

    let err = store
        .create_run(NewRun::new("wf", json!(1)))
        .await
        .expect_err("a read-only session refuses the write");
    assert!(err.is_retryable(), "{err}");
    let run = tokio::time::timeout(CALL_BOUND, store.create_run(NewRun::new("wf", json!(2))))
        .await
        .expect("the next call answers within the bound")
        .expect("a new connection takes the write")
        .record;
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM flowstate_runs").await,
        1
    );
    drop(store);
    db.drop_database().await;
}

/// A database of `dialect` holding `t (id, n)` (made by `create`) with rows
/// 1 and 2, and two connections on it.
pub async fn two_sessions<C: AsyncConnection>(dialect: Dialect, create: &str) -> (TestDb, C, C) {
    let db = TestDb::empty(dialect).await;
    // `TestDb::execute`, not diesel's `RunQueryDsl::execute` in scope here.
    TestDb::execute(&db, create).await;
    TestDb::execute(&db, "INSERT INTO t VALUES (1, 0), (2, 0)").await;
    let a = C::establish(&db.url).await.unwrap();
    let b = C::establish(&db.url).await.unwrap();
    (db, a, b)
}

/// Asserts that `err` is retryable and its message starts as the error
/// table's row for it says.
pub fn assert_retryable(err: &DieselError, starts: &str) {
    assert!(
        message(err).starts_with(starts),
        "{err} does not start with {starts:?}"
    );
    assert!(flowstate_store_diesel::error::is_retryable(err), "{err}");
}
