//! Batches on SQLite: a batch claim and a batch of completions, each one
//! `BEGIN IMMEDIATE` transaction (one writer at a time is SQLite's own
//! exclusion, so no row is ever skipped or waited for inside it).
//!
//! The claim is one `UPDATE ... WHERE id IN (SELECT ... LIMIT) RETURNING *`
//! and one history upsert for every step it returned. The completions run
//! each item's guarded move (the same prepared statements as
//! `transition_step`) inside the one transaction: SQLite has no round trip
//! to save, only the commit, and that is shared.

use std::collections::HashSet;
use std::sync::LazyLock;

use diesel::RunQueryDsl;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;

use flowstate_core::{HistoryId, Result};

use super::transition::move_once;
use super::{Pool, write};
use crate::config::StoreConfig;
use crate::rows::StepRow;
use crate::sql::{HistorySource, Move, Upsert, batch_claimable, claim_move, claim_set};
use crate::store::BatchItem;

/// The batch claim. Binds: `?1` now, `?2` limit, then `?3` the function in
/// the filtered form. Rows: the claimed steps as the claim left them.
fn claim_batch_sql(by_function: bool) -> String {
    format!(
        "UPDATE flowstate_steps SET {} WHERE id IN (SELECT id FROM flowstate_steps WHERE {} \
         ORDER BY created_at, id LIMIT ?2) RETURNING *",
        claim_set("?1"),
        batch_claimable("?1", by_function.then_some("?3")),
    )
}

/// The batch claim of any function, and of one.
static CLAIM_BATCH: LazyLock<[String; 2]> =
    LazyLock::new(|| [claim_batch_sql(false), claim_batch_sql(true)]);

/// The history upsert of `n` steps just claimed. Binds: `(step id, fresh
/// history id)` for each, now twice, then the `n` step ids.
fn claim_history_sql(n: usize) -> String {
    let ids = vec!["?"; n].join(", ");
    let id = format!("CASE m.id {}END", "WHEN ? THEN ? ".repeat(n));
    claim_move().history_upsert(
        HistorySource {
            from: &format!("FROM flowstate_steps AS m WHERE m.id IN ({ids})"),
            prefix: "m.",
            id: &id,
            now: "?",
        },
        Upsert::OnConflict,
    )
}

/// [`BatchStepStore::claim_batch`](flowstate_core::BatchStepStore::claim_batch),
/// its function already checked and `limit` at least 1.
pub(crate) async fn claim_batch(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
    function: Option<&str>,
) -> Result<Vec<StepRow>> {
    let now = config.clock.now().as_micros();
    let function = function.map(str::to_owned);
    write(pool, "claim_batch", move |conn| {
        let query = diesel::sql_query(CLAIM_BATCH[usize::from(function.is_some())].as_str())
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(i64::from(limit));
        let claimed: Vec<StepRow> = match function {
            Some(function) => query.bind::<Text, _>(function).load(conn)?,
            None => query.load(conn)?,
        };
        if claimed.is_empty() {
            return Ok(claimed);
        }
        let mut history =
            diesel::sql_query(claim_history_sql(claimed.len())).into_boxed::<Sqlite>();
        for step in &claimed {
            history = history
                .bind::<Text, _>(step.id.clone())
                .bind::<Text, _>(HistoryId::generate().to_string());
        }
        history = history.bind::<BigInt, _>(now).bind::<BigInt, _>(now);
        for step in &claimed {
            history = history.bind::<Text, _>(step.id.clone());
        }
        history.execute(conn)?;
        Ok(claimed)
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
    let now = config.clock.now().as_micros();
    let items = items.to_vec();
    write(pool, "complete_batch", move |conn| {
        let mut moved = HashSet::new();
        for item in items {
            let id = item.id.to_string();
            if move_once(
                conn,
                Move::Transition(item.to),
                now,
                &id,
                Some(item.payload),
            )? {
                moved.insert(id);
            }
        }
        Ok(moved)
    })
    .await
}
