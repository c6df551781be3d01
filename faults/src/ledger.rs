//! The execution ledger: a table the suite creates in the scenario's
//! database (not a flowstate migration), written by a worker *inside* the
//! step, after its claim and before its completion, so the database itself
//! says how many times each attempt ran.
//!
//! `fault_ledger (step_id, attempt, worker, executed_at)` has its primary
//! key on `(step_id, attempt)`: a second execution of an attempt is refused
//! by the key, and the worker then writes it to `fault_ledger_refused`
//! (no key), which the verdict counts as a double execution. A worker whose
//! insert went through but whose answer was lost (a connection cut) retries
//! it and finds its own row, told apart by `(worker, executed_at)`: that is
//! not a double.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl as _;
use flowstate_core::StepId;
use flowstate_store_diesel::Dialect;
use tokio::sync::Mutex;

use crate::sql::{RawConn, each_conn};

/// The ledger's tables, the same text on every dialect.
pub const CREATE_TABLES: &str = "\
    CREATE TABLE IF NOT EXISTS fault_ledger (\
        step_id VARCHAR(36) NOT NULL, \
        attempt BIGINT NOT NULL, \
        worker VARCHAR(64) NOT NULL, \
        executed_at BIGINT NOT NULL, \
        PRIMARY KEY (step_id, attempt)); \
    CREATE TABLE IF NOT EXISTS fault_ledger_refused (\
        step_id VARCHAR(36) NOT NULL, \
        attempt BIGINT NOT NULL, \
        worker VARCHAR(64) NOT NULL, \
        executed_at BIGINT NOT NULL);";

/// How long a ledger write keeps trying through a fault before it fails
/// the scenario: the ledger is the instrument, it must not be what breaks.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(60);

/// Creates the ledger's tables in the database at `url`.
pub async fn create(url: &str) -> Result<()> {
    let mut conn = RawConn::connect(url).await?;
    conn.run_sql(CREATE_TABLES)
        .await
        .context("create the ledger tables")
}

/// What a ledger write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The first execution of this attempt.
    First,
    /// The attempt had already run: a double execution, recorded.
    Double,
}

/// A ledger writer over a few connections of its own (`slots`), each
/// reopened after a failure, shared by a crew of workers.
#[derive(Debug)]
pub struct Ledger {
    url: String,
    slots: Vec<Mutex<Option<RawConn>>>,
}

/// The row holding a `(step, attempt)`.
#[derive(diesel::QueryableByName)]
struct Holder {
    #[diesel(sql_type = Text)]
    worker: String,
    #[diesel(sql_type = BigInt)]
    executed_at: i64,
}

impl Ledger {
    /// A writer on the database at `url` with `slots` connections (opened
    /// on first use).
    pub fn new(url: &str, slots: usize) -> Self {
        Self {
            url: url.to_owned(),
            slots: (0..slots.max(1)).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Records that `worker` executes `attempt` of `step` now, through
    /// slot `slot % slots`, trying again through faults for up to
    /// [`WRITE_PATIENCE`].
    pub async fn record(
        &self,
        slot: usize,
        step: StepId,
        attempt: u32,
        worker: &str,
    ) -> Result<Entry> {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        let row = Row {
            step: step.to_string(),
            attempt: i64::from(attempt),
            worker: worker.to_owned(),
            at,
        };
        let started = Instant::now();
        let mut slot = self.slots[slot % self.slots.len()].lock().await;
        loop {
            let outcome = match slot.as_mut() {
                Some(conn) => row.write(conn).await,
                None => match RawConn::connect(&self.url).await {
                    Ok(conn) => {
                        *slot = Some(conn);
                        continue;
                    }
                    Err(err) => Err(err),
                },
            };
            match outcome {
                Ok(entry) => return Ok(entry),
                Err(err) if started.elapsed() < WRITE_PATIENCE => {
                    tracing::debug!(%err, "ledger write failed; reconnecting");
                    *slot = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(err) => return Err(err.context("ledger write")),
            }
        }
    }
}

/// One execution, as written.
struct Row {
    step: String,
    attempt: i64,
    worker: String,
    at: i64,
}

impl Row {
    async fn write(&self, conn: &mut RawConn) -> Result<Entry> {
        let dialect = conn.dialect();
        let insert = |table: &str| {
            let values = match dialect {
                Dialect::Postgres => "$1, $2, $3, $4",
                Dialect::Mysql | Dialect::Sqlite => "?, ?, ?, ?",
            };
            diesel::sql_query(format!(
                "INSERT INTO {table} (step_id, attempt, worker, executed_at) VALUES ({values})"
            ))
            .bind::<Text, _>(self.step.clone())
            .bind::<BigInt, _>(self.attempt)
            .bind::<Text, _>(self.worker.clone())
            .bind::<BigInt, _>(self.at)
        };
        let first = insert("fault_ledger");
        match each_conn!(conn, |c| first.execute(c).await) {
            Ok(_) => return Ok(Entry::First),
            Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {}
            Err(err) => return Err(err.into()),
        }
        let read = diesel::sql_query(match dialect {
            Dialect::Postgres => {
                "SELECT worker, executed_at FROM fault_ledger WHERE step_id = $1 AND attempt = $2"
            }
            Dialect::Mysql | Dialect::Sqlite => {
                "SELECT worker, executed_at FROM fault_ledger WHERE step_id = ? AND attempt = ?"
            }
        })
        .bind::<Text, _>(self.step.clone())
        .bind::<BigInt, _>(self.attempt);
        let holder: Holder = each_conn!(conn, |c| read.get_result(c).await)?;
        if holder.worker == self.worker && holder.executed_at == self.at {
            // Our own insert, whose answer a fault swallowed.
            return Ok(Entry::First);
        }
        let refused = insert("fault_ledger_refused");
        each_conn!(conn, |c| refused.execute(c).await)?;
        Ok(Entry::Double)
    }
}

/// Refuses a worker name the ledger cannot hold (over 64 bytes, or empty).
pub fn check_worker(worker: &str) -> Result<()> {
    if worker.is_empty() || worker.len() > 64 {
        bail!("worker name {worker:?} must be 1 to 64 bytes");
    }
    Ok(())
}
