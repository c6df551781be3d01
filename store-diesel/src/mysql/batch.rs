//! Batches on MySQL and MariaDB: a batch claim and a batch of completions,
//! one transaction each however many steps they carry.
//!
//! The claim locks its steps with `SELECT * ... FOR UPDATE SKIP LOCKED`
//! (MySQL 8, MariaDB 10.6+), so concurrent batch claimers take disjoint
//! sets without waiting, moves them with one `UPDATE ... WHERE id IN` and
//! upserts their history rows with one `INSERT ... SELECT`. It answers the
//! locked rows as that `UPDATE` leaves them ([`claimed`]) instead of
//! reading them back: a claim of 256 is five statements, not six. The lock
//! is not what decides: on Galera it is local to its node, and another
//! node's claim of the same step can commit and abort this transaction
//! between its statements. So the `UPDATE` names each step with the status
//! and attempt its pick read (`(id, status, current_attempt) IN (...)`, a
//! compare-and-set: a claim changes both) and must move every step it
//! names, or the transaction is a lost race, rolled back and run again
//! ([`crate::conflict::lost_race`]); the rows it answers are then exactly
//! the rows it moved. The claim trigger does not write these history rows:
//! SCHEMA.md, Decisions, "MySQL's batch claim".
//!
//! The completions first try the move as it usually goes, every step still
//! running: per target status one guarded `UPDATE` (a `CASE` per step for
//! its payload) and one history upsert, no read. If an `UPDATE` moves fewer
//! rows than it names, some step was not in a status it may move from: the
//! transaction rolls back and the locking path runs instead, which locks
//! the steps with `SELECT ... FOR UPDATE`, keeps the items core's
//! transition table allows from the locked status and moves those. (One
//! multi-table `UPDATE` of the steps joined to their history rows would
//! save the upsert, but MySQL refuses it: the claim trigger on
//! `flowstate_steps` writes `flowstate_step_history`, and no statement may
//! write a table a trigger it fires writes too.) The statements name at
//! most [`MAX_LISTED`] steps each ([`crate::sql::in_list`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::{ClaimDecision, Result, StepStatus};

use super::Pool;
use super::spread::Spread;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::conflict::lost_race;
use crate::conflict::retry_conflicts;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::BatchItem;
use crate::rows::{StepRow, parse_status};
use crate::schema::flowstate_steps as steps;
use crate::sql::in_list::{self, MAX_LISTED, history_query, move_query};
use crate::sql::{Move, StepMove, batch_claimable, claim_move, run_unsettled};

/// The locking pick of a batch claim, whole rows and the database's clock
/// (`db_now_us`: the claim's deadlines are set from it, so the rows it
/// answers are the rows it wrote). Binds: the function in the filtered
/// form, now, the limit. The claimable test leads with MySQL's virtual
/// `claimable` column, which its index starts with (migration 000005
/// explains why it is not a `status` index). Steps of settled runs are not
/// picked; the run rows that test reads are not locked (a locking read
/// locks no row of a subquery that has no locking clause of its own).
fn pick_sql(by_function: bool) -> String {
    format!(
        "SELECT flowstate_steps.*, {now} AS db_now_us FROM flowstate_steps WHERE {} AND {} \
         ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
        batch_claimable(
            <AsyncMysqlConnection as Connection>::CLAIMABLE_COLUMN,
            "?",
            by_function.then_some("?")
        ),
        run_unsettled("flowstate_steps.run_id"),
        now = <AsyncMysqlConnection as Connection>::NOW_US,
    )
}

/// A picked step, with the database's clock as the pick read it.
#[derive(QueryableByName)]
struct Picked {
    #[diesel(embed)]
    step: StepRow,
    #[diesel(sql_type = BigInt)]
    db_now_us: i64,
}

/// The pick of any function, and of one.
static PICK: LazyLock<[String; 2]> = LazyLock::new(|| [pick_sql(false), pick_sql(true)]);

/// Writes the history rows of the move of `ids` to `step_move`'s status.
async fn upsert_history(
    conn: &mut AsyncMysqlConnection,
    step_move: &StepMove,
    ids: &[String],
    now: i64,
) -> QueryResult<usize> {
    history_query::<Mysql>(step_move, ids, now, super::UPSERT)
        .execute(conn)
        .await
}

/// [`BatchStepStore::claim_batch`](flowstate_core::ports::BatchStepStore::claim_batch),
/// its function already checked and `limit` at least 1.
pub(super) async fn claim_batch(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
    function: Option<&str>,
) -> Result<Vec<StepRow>> {
    let op = "claim_batch";
    let now = config.clock.now().as_micros();
    let deadline = (config.lease_offset_us(), config.claim_default_us());
    let mut conn = pool.get(op).await?;
    // A retry after a conflict spreads its pick at random (mysql/spread.rs).
    let mut attempt = 0_u32;
    retry_conflicts!(
        op,
        {
            let tried = attempt;
            attempt += 1;
            claim_once(&mut conn, now, deadline, (limit, tried), function).await
        },
        renew: conn = pool
    )
    .map_err(|err| backend(op, err))
}

/// The batch claim's transaction, its `attempt`-th try (0: the first).
async fn claim_once(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    (offset, default_us): (i64, i64),
    (limit, attempt): (u32, u32),
    function: Option<&str>,
) -> QueryResult<Vec<StepRow>> {
    // Where this node's claimers start (mysql/spread.rs): the oldest on
    // one server; at random among every slot's windows on a node's retry.
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let spread = Spread::again(
        crate::health::pick_slot(conn),
        limit,
        limit,
        attempt,
        crate::conflict::random(),
    );
    conn.transaction(async |conn| {
        let limit = spread.limit();
        let picked: Vec<Picked> = match function {
            Some(function) => {
                diesel::sql_query(PICK[1].as_str())
                    .bind::<Text, _>(function)
                    .bind::<BigInt, _>(now)
                    .bind::<BigInt, _>(limit)
                    .cached()
                    .load(conn)
                    .await?
            }
            None => {
                diesel::sql_query(PICK[0].as_str())
                    .bind::<BigInt, _>(now)
                    .bind::<BigInt, _>(limit)
                    .cached()
                    .load(conn)
                    .await?
            }
        };
        let picked = spread.take(picked);
        let Some(db_now_us) = picked.iter().map(|p| p.db_now_us).next() else {
            return Ok(Vec::new());
        };
        let lease_now = db_now_us.saturating_add(offset);
        for chunk in picked.chunks(MAX_LISTED) {
            let moved = claim_query(chunk, now, lease_now, default_us)
                .execute(conn)
                .await?;
            if moved != chunk.len() {
                return Err(lost_race("claim_batch"));
            }
            let ids: Vec<String> = chunk.iter().map(|p| p.step.id.clone()).collect();
            upsert_history(conn, &claim_move(), &ids, now).await?;
        }
        Ok(picked
            .into_iter()
            .map(|p| claimed(p.step, now, lease_now, default_us))
            .collect())
    })
    .await
}

/// The claim's `UPDATE` of the `picked` steps (at most [`MAX_LISTED`]):
/// the shared [`in_list::claim_query`] (the assignments, `WHERE id IN`),
/// each step then guarded by the status and attempt its pick read.
fn claim_query<'f>(
    picked: &[Picked],
    now: i64,
    lease_now: i64,
    default_us: i64,
) -> diesel::query_builder::BoxedSqlQuery<'f, Mysql, diesel::query_builder::SqlQuery> {
    let ids: Vec<String> = picked.iter().map(|p| p.step.id.clone()).collect();
    let mut query = in_list::claim_query::<Mysql>(&ids, now, lease_now, default_us).sql(format!(
        " AND (id, status, current_attempt) IN ({})",
        vec!["(?, ?, ?)"; picked.len()].join(", ")
    ));
    for p in picked {
        query = query
            .bind::<Text, _>(p.step.id.clone())
            .bind::<Text, _>(p.step.status.clone())
            .bind::<BigInt, _>(p.step.current_attempt);
    }
    query
}

/// The locked `row` as the claim's `UPDATE` leaves it: [`claim_set`]'s
/// assignments, in Rust. Running, stamped `now`, its claim deadline
/// `lease_now` plus its own timeout or `default_us`; a step in a retry
/// status starts its next attempt with result and error cleared. (The
/// testkit's batch cases compare what a claim answers, fresh and retried,
/// with what `get_step` reads afterwards, so the two cannot drift apart
/// unseen.)
///
/// [`claim_set`]: crate::sql::claim_set
fn claimed(mut row: StepRow, now: i64, lease_now: i64, default_us: i64) -> StepRow {
    let timeout_us = row
        .claim_timeout_ms
        .map_or(default_us, |ms| ms.saturating_mul(1_000));
    row.claimed_until = Some(lease_now.saturating_add(timeout_us));
    let retry = ClaimDecision::ClaimRetry
        .statuses()
        .iter()
        .any(|status| status.as_str() == row.status);
    if retry {
        row.current_attempt += 1;
        row.result = None;
        row.error = None;
    }
    StepStatus::Running.as_str().clone_into(&mut row.status);
    row.updated_at = now;
    row
}

/// [`BatchStepStore::complete_batch`](flowstate_core::ports::BatchStepStore::complete_batch)
/// of `items` (checked, encoded, each step once): the ids that moved.
pub(super) async fn complete_batch(
    pool: &Pool,
    config: &StoreConfig,
    items: &[BatchItem],
) -> Result<HashSet<String>> {
    let op = "complete_batch";
    let now = config.clock.now().as_micros();
    let mut conn = pool.get(op).await?;
    retry_conflicts!(op, complete_once(&mut conn, now, items).await, renew: conn = pool)
        .map_err(|err| backend(op, err))
}

/// Why the usual completion path gave way.
enum Usual {
    /// A step was not in a status its move may leave; rolled back.
    Refused,
    /// The database failed; rolled back.
    Db(diesel::result::Error),
}

impl From<diesel::result::Error> for Usual {
    fn from(err: diesel::result::Error) -> Self {
        Self::Db(err)
    }
}

/// The completions: the usual path, or the locking one when it refused.
async fn complete_once(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    items: &[BatchItem],
) -> QueryResult<HashSet<String>> {
    match complete_usual(conn, now, items).await {
        Ok(moved) => Ok(moved),
        Err(Usual::Db(err)) => Err(err),
        Err(Usual::Refused) => complete_locking(conn, now, items).await,
    }
}

/// Every item moves: its guarded `UPDATE` moves all it names, or the whole
/// transaction rolls back as [`Usual::Refused`].
async fn complete_usual(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    items: &[BatchItem],
) -> Result<HashSet<String>, Usual> {
    conn.transaction(async |conn| {
        for to in [StepStatus::Succeeded, StepStatus::Failed] {
            let movers: Vec<&BatchItem> = items.iter().filter(|item| item.to == to).collect();
            move_all(conn, now, to, &movers).await?;
        }
        Ok(items.iter().map(|item| item.id.to_string()).collect())
    })
    .await
}

/// Moves `movers` to `to` with their history rows, [`MAX_LISTED`] a
/// statement; [`Usual::Refused`] if an `UPDATE` moves fewer than it names.
async fn move_all(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    to: StepStatus,
    movers: &[&BatchItem],
) -> Result<(), Usual> {
    let step_move = StepMove::of(Move::Claimed(to));
    for chunk in movers.chunks(MAX_LISTED) {
        let moved = move_query::<Mysql>(&step_move, now, chunk, "")
            .execute(conn)
            .await?;
        if moved != chunk.len() {
            return Err(Usual::Refused);
        }
        let ids: Vec<String> = chunk.iter().map(|item| item.id.to_string()).collect();
        upsert_history(conn, &step_move, &ids, now).await?;
    }
    Ok(())
}

/// The completions after a refusal: the steps locked, then moved where
/// the claim still holds its step (running in the item's attempt).
async fn complete_locking(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    items: &[BatchItem],
) -> QueryResult<HashSet<String>> {
    conn.transaction(async |conn| {
        let ids: Vec<String> = items.iter().map(|item| item.id.to_string()).collect();
        let mut locked: Vec<(String, String, i64)> = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LISTED) {
            let rows: Vec<(String, String, i64)> = steps::table
                .filter(steps::id.eq_any(chunk))
                .select((steps::id, steps::status, steps::current_attempt))
                .for_update()
                .load(conn)
                .await?;
            locked.extend(rows);
        }
        let mut moved = HashSet::new();
        for to in [StepStatus::Succeeded, StepStatus::Failed] {
            let movers: Vec<&BatchItem> = items
                .iter()
                .filter(|item| item.to == to)
                .filter(|item| {
                    let id = item.id.to_string();
                    locked.iter().any(|(locked, status, attempt)| {
                        *locked == id
                            && *attempt == i64::from(item.attempt)
                            && parse_status::<StepStatus>(locked, status).is_ok_and(|from| {
                                StepMove::of(Move::Claimed(to)).sources.contains(&from)
                            })
                    })
                })
                .collect();
            match move_all(conn, now, to, &movers).await {
                Ok(()) => {}
                Err(Usual::Db(err)) => return Err(err),
                // The row locks make this impossible; if it happens, the
                // flush fails and rolls back rather than panicking.
                Err(Usual::Refused) => {
                    return Err(diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::Unknown,
                        Box::new(format!(
                            "complete_batch: of {} locked steps moving to {}, fewer moved \
                             than their locked status allows",
                            movers.len(),
                            to.as_str()
                        )),
                    ));
                }
            }
            moved.extend(movers.iter().map(|item| item.id.to_string()));
        }
        Ok(moved)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_skips_locked_rows() {
        assert!(PICK[0].ends_with("ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"));
        assert!(PICK[0].starts_with("SELECT flowstate_steps.*, TIMESTAMPDIFF(MICROSECOND"));
        assert!(PICK[0].contains("AND EXISTS (SELECT 1 FROM flowstate_runs AS unsettled_run"));
        assert!(PICK[1].contains("AND function_name = ?"));
    }
}
