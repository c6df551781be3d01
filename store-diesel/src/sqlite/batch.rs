//! Batches on SQLite: a batch claim and a batch of completions, each one
//! `BEGIN IMMEDIATE` transaction (one writer at a time is SQLite's own
//! exclusion, so no row is ever skipped or waited for inside it).
//!
//! The claim is one `UPDATE ... WHERE id IN (SELECT ... LIMIT) RETURNING *`
//! and one history upsert for the steps it returned. The completions are,
//! per target status, one guarded `UPDATE ... WHERE id IN (...) RETURNING
//! id` (a `CASE` per step for its payload) and one history upsert of the
//! ids it returned: four statements for a batch of successes however many
//! it carries (chunked at [`MAX_LISTED`](crate::sql::in_list::MAX_LISTED)
//! steps a statement, see [`crate::sql::in_list`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, RunQueryDsl, SqliteConnection};

use flowstate_core::{Result, StepStatus};

use super::sql::deadline;
use super::{Pool, write};
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::rows::BatchItem;
use crate::rows::{IdRow, StepRow};
use crate::sql::in_list::{MAX_LISTED, history_query, move_query};
use crate::sql::{Move, StepMove, batch_claimable, claim_move, claim_set, run_unsettled};

/// The batch claim. Binds: `?1` now, `?2` limit, `?3` the lease clock
/// offset, `?4` the default claim timeout (microseconds), then `?5` the
/// function in the filtered form. Rows: the claimed steps as the claim
/// left them. Steps of settled runs are not picked.
fn claim_batch_sql(by_function: bool) -> String {
    format!(
        "UPDATE flowstate_steps SET {} WHERE id IN (SELECT id FROM flowstate_steps WHERE {} \
         AND {} ORDER BY created_at, id LIMIT ?2) RETURNING *",
        claim_set("?1", deadline("?3", "?4")),
        batch_claimable(
            <super::SqliteConn as Connection>::CLAIMABLE_COLUMN,
            "?1",
            by_function.then_some("?5")
        ),
        run_unsettled("flowstate_steps.run_id"),
    )
}

/// The batch claim of any function, and of one.
static CLAIM_BATCH: LazyLock<[String; 2]> =
    LazyLock::new(|| [claim_batch_sql(false), claim_batch_sql(true)]);

/// [`BatchStepStore::claim_batch`](flowstate_core::ports::BatchStepStore::claim_batch),
/// its function already checked and `limit` at least 1.
pub(super) async fn claim_batch(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
    function: Option<&str>,
) -> Result<Vec<StepRow>> {
    let now = config.clock.now().as_micros();
    let (offset, default_us) = (config.lease_offset_us(), config.claim_default_us());
    let function = function.map(str::to_owned);
    write(pool, "claim_batch", move |conn| {
        let query = diesel::sql_query(CLAIM_BATCH[usize::from(function.is_some())].as_str())
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(i64::from(limit))
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(default_us);
        let claimed: Vec<StepRow> = match function {
            Some(function) => query.bind::<Text, _>(function).load(conn)?,
            None => query.load(conn)?,
        };
        if claimed.is_empty() {
            return Ok(claimed);
        }
        let ids: Vec<String> = claimed.iter().map(|step| step.id.clone()).collect();
        for chunk in ids.chunks(MAX_LISTED) {
            write_history(conn, &claim_move(), chunk, now)?;
        }
        Ok(claimed)
    })
    .await
}

/// The history rows of the move of `ids` (at most [`MAX_LISTED`]) just
/// written.
fn write_history(
    conn: &mut SqliteConnection,
    step_move: &StepMove,
    ids: &[String],
    now: i64,
) -> QueryResult<usize> {
    history_query::<Sqlite>(step_move, ids, now, super::UPSERT).execute(conn)
}

/// [`BatchStepStore::complete_batch`](flowstate_core::ports::BatchStepStore::complete_batch)
/// of `items` (checked, encoded, each step once): the ids that moved.
pub(super) async fn complete_batch(
    pool: &Pool,
    config: &StoreConfig,
    items: &[BatchItem],
) -> Result<HashSet<String>> {
    let now = config.clock.now().as_micros();
    let items = items.to_vec();
    write(pool, "complete_batch", move |conn| {
        let mut moved = HashSet::new();
        for to in [StepStatus::Succeeded, StepStatus::Failed] {
            let step_move = StepMove::of(Move::Claimed(to));
            let movers: Vec<&BatchItem> = items.iter().filter(|item| item.to == to).collect();
            for chunk in movers.chunks(MAX_LISTED) {
                let ids: Vec<String> =
                    move_query::<Sqlite>(&step_move, now, chunk, " RETURNING id")
                        .load::<IdRow>(conn)?
                        .into_iter()
                        .map(|row| row.id)
                        .collect();
                if !ids.is_empty() {
                    write_history(conn, &step_move, &ids, now)?;
                }
                moved.extend(ids);
            }
        }
        Ok(moved)
    })
    .await
}
