//! The baseline on MySQL/MariaDB: the bench's claim + succeed work as
//! hand-written SQL, through plain diesel-async `sql_query`, one connection
//! per worker and no store in between, beside flowstate's per-step rounds
//! as PostgreSQL's [`baseline`](super::baseline) is beside its own, with the
//! same fairness rules: each claim and each success is one statement that
//! moves the step and its current attempt's history row together, on the
//! same tables and indexes, prepared once per connection, on a session at
//! flowstate's isolation level (`READ COMMITTED`). Like PostgreSQL's it
//! writes the columns the work needs (status, stamps, the result) and none
//! of flowstate's guards and bookkeeping: no claim deadline
//! (`claimed_until`), no run status or function check, no retry
//! arithmetic, no read of the claimed step.
//!
//! What a MariaDB expert has to write it with: MariaDB 10.11 has no
//! `UPDATE ... RETURNING` (a syntax error there: only `DELETE ...
//! RETURNING` and, since 10.5, `INSERT ... RETURNING` exist) and no
//! writable CTE, so PostgreSQL's form is out. Two forms move both rows in
//! one statement, atomically under autocommit, and both are measured, each
//! on a database of its own beside the bench's, created afresh:
//!
//! - [`LABEL`], the baseline: single-table `UPDATE`s of the step whose
//!   `AFTER UPDATE` trigger upserts the history row, as flowstate's
//!   per-step moves do (migration 000019): the claim and the success each
//!   stamp `move_history_id`, flowstate's column, and this database puts a
//!   trigger of its own, one `INSERT` written for the two moves it makes,
//!   in the place of flowstate's ([`TRIGGER_SCHEMA`]).
//! - [`JOIN_LABEL`]: a multi-table `UPDATE` of the step joined to its
//!   history row by `(step_id, attempt)`, on flowstate's tables without the
//!   move trigger ([`JOIN_SCHEMA`]): MariaDB refuses any statement that
//!   updates a table an `UPDATE` trigger of another table it updates
//!   writes to (error 1442, "Can't update table ... in stored
//!   function/trigger because it is already used by statement"), even when
//!   the trigger's condition is false. Measured slower: MariaDB keeps the
//!   rows of a multi-table `UPDATE`'s other tables in a temporary table per
//!   statement, and one holding a `LONGTEXT` (the success's result) is an
//!   Aria table on disk (`Created_tmp_disk_tables` rose by one per
//!   success).
//!
//! A worker needs the step it claimed (its id, input and attempt), so the
//! trigger form reads it back after its claim, by `(run_id, name)`, the
//! unique key the claim found it by, and addresses its success by the
//! primary key it read (PostgreSQL's baseline reads the id back in its
//! claim's `RETURNING`). `SELECT ... FOR UPDATE SKIP LOCKED` and an
//! `UPDATE` in a transaction is the form for a queue's pick of the next
//! step; this work claims a named step, so it would be four round trips
//! (`BEGIN`, the locking read, the `UPDATE`, `COMMIT`) for what one
//! statement does. So: three statements per step, as flowstate sends (the
//! claim's `UPDATE`, whose trigger writes the history row, and a read of
//! the claimed step, which flowstate joins to its run's status; the
//! transition's `UPDATE`, whose trigger writes it too). An earlier
//! baseline read nothing back (two statements a step), which no worker
//! could do: it never learned the step's input. The multi-table form
//! still reads nothing back: it is kept to show what MariaDB's
//! multi-table `UPDATE` costs, not as the bar.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::HistoryId;
use flowstate_store_diesel::{DieselStore, StoreConfig};
use tokio::task::JoinSet;

use super::prepared::Prepared;
use super::statements::Counted;
use super::throughput::{self, Throughput};

/// The baseline's label: the trigger form.
pub const LABEL: &str = "mysql hand SQL";

/// The multi-table form's label.
pub const JOIN_LABEL: &str = "mysql join SQL";

/// Claims a pending step by (run, name): the step and its current
/// attempt's history row. Binds: now, now, run, name.
const CLAIM: &str = "\
UPDATE flowstate_steps AS s
JOIN flowstate_step_history AS h ON h.step_id = s.id AND h.attempt = s.current_attempt
SET s.status = 'running', s.updated_at = ?, h.status = 'running', h.running_at = ?
WHERE s.run_id = ? AND s.name = ? AND s.status IN ('pending', 'scheduled')";

/// Succeeds a running step by (run, name): the step and its current
/// attempt's history row. Binds: result, now, result, now, run, name.
const SUCCEED: &str = "\
UPDATE flowstate_steps AS s
JOIN flowstate_step_history AS h ON h.step_id = s.id AND h.attempt = s.current_attempt
SET s.status = 'succeeded', s.result = ?, s.updated_at = ?,
    h.status = 'succeeded', h.result = ?, h.succeeded_at = ?
WHERE s.run_id = ? AND s.name = ? AND s.status = 'running'";

/// The baseline's database: the bench's, with this suffix.
pub const TRIGGER_DATABASE_SUFFIX: &str = "_trigger";

/// The multi-table form's database: the bench's, with this suffix.
pub const JOIN_DATABASE_SUFFIX: &str = "_join";

/// What the multi-table form's database takes out of flowstate's schema:
/// the move trigger, which forbids the multi-table `UPDATE`.
pub const JOIN_SCHEMA: [&str; 1] = ["DROP TRIGGER flowstate_steps_move_history"];

/// Claims a pending step by (run, name), stamping `move_history_id`: the
/// trigger of [`TRIGGER_SCHEMA`] writes the history row. Binds: history
/// id, now, run, name.
const TRIGGER_CLAIM: &str = "\
UPDATE flowstate_steps SET move_history_id = ?, status = 'running', updated_at = ?
WHERE run_id = ? AND name = ? AND status IN ('pending', 'scheduled')";

/// Reads the step a claim took, by (run, name): what a worker needs to
/// run it. Binds: run, name.
const TRIGGER_READ: &str = "\
SELECT id, input, current_attempt FROM flowstate_steps WHERE run_id = ? AND name = ?";

/// Succeeds a running step by its id (read back after the claim),
/// stamping `move_history_id`: the trigger of [`TRIGGER_SCHEMA`] writes
/// the history row. Binds: history id, result, now, id.
const TRIGGER_SUCCEED: &str = "\
UPDATE flowstate_steps SET move_history_id = ?, status = 'succeeded', result = ?, updated_at = ?
WHERE id = ? AND status = 'running'";

/// What the trigger form's database changes in flowstate's schema: in the
/// place of flowstate's move trigger, one of its own on the same column
/// (which a move stamps with its history row's fresh id), one `INSERT`
/// that upserts that row (the attempt's status, payload and stamp) in the
/// move's own statement.
pub const TRIGGER_SCHEMA: [&str; 2] = [
    "DROP TRIGGER flowstate_steps_move_history",
    "CREATE TRIGGER baseline_move_history AFTER UPDATE ON flowstate_steps FOR EACH ROW \
     INSERT INTO flowstate_step_history \
     (id, step_id, attempt, status, created_at, result, error, running_at, succeeded_at, \
     failed_at) \
     SELECT NEW.move_history_id, NEW.id, NEW.current_attempt, NEW.status, NEW.updated_at, \
     NEW.result, NEW.error, \
     CASE WHEN NEW.status = 'running' THEN NEW.updated_at END, \
     CASE WHEN NEW.status = 'succeeded' THEN NEW.updated_at END, \
     CASE WHEN NEW.status = 'failed' THEN NEW.updated_at END \
     FROM DUAL WHERE NOT (NEW.move_history_id <=> OLD.move_history_id) \
     ON DUPLICATE KEY UPDATE status = VALUES(status), result = VALUES(result), \
     error = VALUES(error), running_at = COALESCE(VALUES(running_at), running_at), \
     succeeded_at = COALESCE(VALUES(succeeded_at), succeeded_at), \
     failed_at = COALESCE(VALUES(failed_at), failed_at)",
];

/// The session flowstate's MySQL connections run (its isolation level).
const SESSION: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// What the baseline sends per operation (the rest it does not do); with
/// `trigger` false, the multi-table form's.
pub fn statements(trigger: bool) -> Vec<Counted> {
    let one = |operation, sql: &str| Counted {
        operation,
        statements: vec![sql.to_owned()],
    };
    if trigger {
        let claim = || Counted {
            operation: "claim (win)",
            statements: vec![TRIGGER_CLAIM.to_owned(), TRIGGER_READ.to_owned()],
        };
        return vec![
            claim(),
            Counted {
                operation: "claim (lose)",
                ..claim()
            },
            one("transition", TRIGGER_SUCCEED),
        ];
    }
    vec![
        one("claim (win)", CLAIM),
        one("claim (lose)", CLAIM),
        one("transition", SUCCEED),
    ]
}

/// The baseline's database beside `url` (with `trigger` false, the
/// multi-table form's): created afresh, migrated, and changed by
/// [`TRIGGER_SCHEMA`] (or [`JOIN_SCHEMA`]); answers its URL.
pub async fn prepare_database(url: &str, trigger: bool) -> Result<String> {
    let server = crate::backend::ServerUrl::split(url)?;
    let name = server
        .database
        .context("a server URL needs a database name")?;
    let (suffix, schema): (_, &[&str]) = if trigger {
        (TRIGGER_DATABASE_SUFFIX, &TRIGGER_SCHEMA)
    } else {
        (JOIN_DATABASE_SUFFIX, &JOIN_SCHEMA)
    };
    let beside = server.with_database(&format!("{name}{suffix}"));
    crate::backend::prepare(&beside, true).await?;
    flowstate_store_diesel::migrate::up(&beside)
        .await
        .context("migrating the trigger database failed")?;
    let mut conn = AsyncMysqlConnection::establish(&beside)
        .await
        .context("cannot connect")?;
    for sql in schema {
        conn.batch_execute(sql)
            .await
            .with_context(|| format!("{sql} failed"))?;
    }
    Ok(beside)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Claims and succeeds `steps` fresh steps on `url` with `workers`
/// connections, in hand-written SQL: the trigger form, or with `trigger`
/// false the multi-table one (`url` names the database [`prepare_database`]
/// made for it).
pub async fn measure(url: &str, workers: usize, steps: usize, trigger: bool) -> Result<Throughput> {
    let config = StoreConfig::default().pool_size(workers.min(8));
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the store")?,
    );
    let items = Arc::new(throughput::create_steps(&store, steps, workers).await?);
    drop(store);
    let mut connections = Vec::with_capacity(workers);
    for _ in 0..workers {
        let mut conn = AsyncMysqlConnection::establish(url)
            .await
            .context("cannot connect")?;
        conn.batch_execute(SESSION)
            .await
            .context("cannot set the session up")?;
        connections.push(conn);
    }

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for mut conn in connections {
        let (items, next) = (Arc::clone(&items), Arc::clone(&next));
        set.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((run, name)) = items.get(index) else {
                    return Ok::<_, anyhow::Error>(());
                };
                let run = run.to_string();
                let result = serde_json::json!({ "i": index }).to_string();
                let (claimed, done) = if trigger {
                    by_trigger(&mut conn, &run, name, &result).await?
                } else {
                    by_join(&mut conn, &run, name, &result).await?
                };
                // Each form answers the rows it moved: the step and its
                // history row (2), or the step whose trigger wrote it (1).
                let moved = if trigger { 1 } else { 2 };
                ensure!(
                    claimed == moved,
                    "a fresh step's claim moved {claimed} rows, not {moved}"
                );
                ensure!(
                    done == moved,
                    "a claimed step's success moved {done} rows, not {moved}"
                );
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a baseline worker panicked")??;
    }
    Ok(Throughput {
        steps: items.len(),
        elapsed: started.elapsed().max(Duration::from_nanos(1)),
    })
}

/// One step's claim and success in the multi-table form: the rows each
/// moved.
async fn by_join(
    conn: &mut AsyncMysqlConnection,
    run: &str,
    name: &str,
    result: &str,
) -> Result<(usize, usize)> {
    let now = now_micros();
    let claimed = Prepared(
        diesel::sql_query(CLAIM)
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(run)
            .bind::<Text, _>(name),
    )
    .execute(conn)
    .await?;
    let now = now_micros();
    let done = Prepared(
        diesel::sql_query(SUCCEED)
            .bind::<Text, _>(result)
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(result)
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(run)
            .bind::<Text, _>(name),
    )
    .execute(conn)
    .await?;
    Ok((claimed, done))
}

/// The step a claim read back: what a worker needs to run it.
#[derive(diesel::QueryableByName)]
struct Claimed {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    input: String,
    #[diesel(sql_type = BigInt)]
    current_attempt: i64,
}

/// One step's claim, its read-back and its success as single-table
/// `UPDATE`s whose triggers write the history rows: the rows each
/// `UPDATE` moved.
async fn by_trigger(
    conn: &mut AsyncMysqlConnection,
    run: &str,
    name: &str,
    result: &str,
) -> Result<(usize, usize)> {
    let claimed = Prepared(
        diesel::sql_query(TRIGGER_CLAIM)
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now_micros())
            .bind::<Text, _>(run)
            .bind::<Text, _>(name),
    )
    .execute(conn)
    .await?;
    let step: Claimed = Prepared(
        diesel::sql_query(TRIGGER_READ)
            .bind::<Text, _>(run)
            .bind::<Text, _>(name),
    )
    .get_result(conn)
    .await?;
    ensure!(
        step.current_attempt >= 1 && !step.input.is_empty(),
        "the claimed step {} read back without its input or attempt",
        step.id
    );
    let done = Prepared(
        diesel::sql_query(TRIGGER_SUCCEED)
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<Text, _>(result)
            .bind::<BigInt, _>(now_micros())
            .bind::<Text, _>(&step.id),
    )
    .execute(conn)
    .await?;
    Ok((claimed, done))
}
