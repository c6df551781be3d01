//! Batches on MySQL and MariaDB: a batch claim and a batch of completions,
//! one transaction each however many steps they carry.
//!
//! The claim locks its steps with `SELECT ... FOR UPDATE SKIP LOCKED`
//! (MySQL 8, MariaDB 10.6+), so concurrent batch claimers take disjoint
//! sets without waiting, then moves them with one `UPDATE ... WHERE id IN`,
//! upserts their history rows with one `INSERT ... SELECT` and reads them
//! back. The completions lock their steps with `SELECT ... FOR UPDATE`,
//! keep the items core's transition table allows from the locked status,
//! and write each target status's share with one guarded `UPDATE` (a
//! `CASE` per step for its payload) and one history upsert.
//!
//! The `IN` lists vary with the batch, so these statements are built per
//! call and bound one value at a time ([`diesel::query_builder::BoxedSqlQuery`]);
//! MySQL prepares them each time, which a batch pays once for many steps.

use std::collections::HashSet;
use std::sync::LazyLock;

use diesel::mysql::Mysql;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::{HistoryId, Result, StepStatus};

use super::Pool;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::rows::{StepRow, parse_status};
use crate::schema::flowstate_steps as steps;
use crate::schema::{Json, JsonText};
use crate::sql::{HistorySource, StepMove, Upsert, batch_claimable, claim_move, claim_set};
use crate::store::BatchItem;
use crate::store::conflict::retry_conflicts;

/// The locking pick of a batch claim. Binds: the function in the filtered
/// form, now, the limit.
/// `claimable = 1` leads the `WHERE` for the index on MySQL's virtual
/// `claimable` column (the migration explains why it is not a `status`
/// index).
fn pick_sql(by_function: bool) -> String {
    format!(
        "SELECT id FROM flowstate_steps WHERE claimable = 1 AND {} ORDER BY created_at, id \
         LIMIT ? FOR UPDATE SKIP LOCKED",
        batch_claimable("?", by_function.then_some("?"))
    )
}

/// The pick of any function, and of one.
static PICK: LazyLock<[String; 2]> = LazyLock::new(|| [pick_sql(false), pick_sql(true)]);

/// A picked step's id.
#[derive(QueryableByName)]
struct Picked {
    #[diesel(sql_type = Text)]
    id: String,
}

/// `?, ?, ...`, `n` of them.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// The history upsert of a move of `n` steps to `step_move`'s status, read
/// from the rows just written. Binds: `(step id, fresh history id)` for
/// each, now twice (once without a stamp column), then the `n` step ids.
fn history_sql(step_move: &StepMove, n: usize) -> String {
    let id = format!("CASE m.id {}END", "WHEN ? THEN ? ".repeat(n));
    step_move.history_upsert(
        HistorySource {
            from: &format!(
                "FROM flowstate_steps AS m WHERE m.id IN ({})",
                placeholders(n)
            ),
            prefix: "m.",
            id: &id,
            now: "?",
        },
        Upsert::OnDuplicateKey,
    )
}

/// Runs [`history_sql`] for `ids`.
async fn upsert_history(
    conn: &mut AsyncMysqlConnection,
    step_move: &StepMove,
    ids: &[String],
    now: i64,
) -> QueryResult<usize> {
    let mut history = diesel::sql_query(history_sql(step_move, ids.len())).into_boxed::<Mysql>();
    for id in ids {
        history = history
            .bind::<Text, _>(id.clone())
            .bind::<Text, _>(HistoryId::generate().to_string());
    }
    history = history.bind::<BigInt, _>(now);
    if crate::sql::stamp_column(step_move.to).is_some() {
        history = history.bind::<BigInt, _>(now);
    }
    for id in ids {
        history = history.bind::<Text, _>(id.clone());
    }
    history.execute(conn).await
}

/// [`BatchStepStore::claim_batch`](flowstate_core::BatchStepStore::claim_batch),
/// its function already checked and `limit` at least 1.
pub(crate) async fn claim_batch(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
    function: Option<&str>,
) -> Result<Vec<StepRow>> {
    let op = "claim_batch";
    let now = config.clock.now().as_micros();
    let mut conn = pool.get(op).await?;
    retry_conflicts!(op, claim_once(&mut conn, now, limit, function).await)
        .map_err(|err| backend(op, err))
}

/// The batch claim's transaction.
async fn claim_once(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    limit: u32,
    function: Option<&str>,
) -> QueryResult<Vec<StepRow>> {
    conn.transaction(async |conn| {
        let limit = i64::from(limit);
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
        if picked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = picked.into_iter().map(|p| p.id).collect();
        let set = claim_set("?");
        let mut update = diesel::sql_query(format!(
            "UPDATE flowstate_steps SET {set} WHERE id IN ({})",
            placeholders(ids.len())
        ))
        .into_boxed::<Mysql>()
        .bind::<BigInt, _>(now);
        for id in &ids {
            update = update.bind::<Text, _>(id.clone());
        }
        update.execute(conn).await?;
        upsert_history(conn, &claim_move(), &ids, now).await?;
        steps::table
            .filter(steps::id.eq_any(&ids))
            .select(StepRow::as_select())
            .load(conn)
            .await
    })
    .await
}

/// [`BatchStepStore::complete_batch`](flowstate_core::BatchStepStore::complete_batch)
/// of `items` (checked, encoded, each step once): the ids that moved.
pub(crate) async fn complete_batch(
    pool: &Pool,
    config: &StoreConfig,
    items: &[BatchItem],
) -> Result<HashSet<String>> {
    let op = "complete_batch";
    let now = config.clock.now().as_micros();
    let mut conn = pool.get(op).await?;
    retry_conflicts!(op, complete_once(&mut conn, now, items).await).map_err(|err| backend(op, err))
}

/// The completions' transaction.
async fn complete_once(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    items: &[BatchItem],
) -> QueryResult<HashSet<String>> {
    conn.transaction(async |conn| {
        let ids: Vec<String> = items.iter().map(|item| item.id.to_string()).collect();
        let locked: Vec<(String, String)> = steps::table
            .filter(steps::id.eq_any(&ids))
            .select((steps::id, steps::status))
            .for_update()
            .load(conn)
            .await?;
        let mut moved = HashSet::new();
        for to in [StepStatus::Succeeded, StepStatus::Failed] {
            let movers: Vec<&BatchItem> = items
                .iter()
                .filter(|item| item.to == to)
                .filter(|item| {
                    let id = item.id.to_string();
                    locked.iter().any(|(locked, status)| {
                        *locked == id
                            && parse_status::<StepStatus>(locked, status)
                                .is_ok_and(|from| from.can_transition_to(to))
                    })
                })
                .collect();
            if movers.is_empty() {
                continue;
            }
            let step_move = StepMove::transition(to);
            let ids: Vec<String> = movers.iter().map(|item| item.id.to_string()).collect();
            let payload = format!("CASE id {}END", "WHEN ? THEN ? ".repeat(movers.len()));
            let target = format!("id IN ({})", placeholders(movers.len()));
            let mut update = diesel::sql_query(step_move.update_where("?", &payload, "", &target))
                .into_boxed::<Mysql>()
                .bind::<BigInt, _>(now);
            for item in &movers {
                update = update
                    .bind::<Text, _>(item.id.to_string())
                    .bind::<Json, _>(JsonText(item.payload.clone()));
            }
            for id in &ids {
                update = update.bind::<Text, _>(id.clone());
            }
            let written = update.execute(conn).await?;
            debug_assert_eq!(written, movers.len(), "locked rows move as decided");
            upsert_history(conn, &step_move, &ids, now).await?;
            moved.extend(ids);
        }
        Ok(moved)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_skips_locked_rows_and_the_history_reads_the_moved_rows() {
        assert!(PICK[0].ends_with("ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"));
        assert!(PICK[1].contains("AND function_name = ?"));
        let history = history_sql(&claim_move(), 2);
        assert!(history.contains("SELECT CASE m.id WHEN ? THEN ? WHEN ? THEN ? END, m.id"));
        assert!(history.contains("WHERE m.id IN (?, ?) ON DUPLICATE KEY UPDATE"));
    }
}
