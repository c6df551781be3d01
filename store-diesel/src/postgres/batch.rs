//! Batches on PostgreSQL: a batch claim and a batch of completions, one
//! statement each however many steps they carry (the claim's inside a
//! transaction that first fixes how it scans).
//!
//! The claim picks its steps with `FOR UPDATE SKIP LOCKED`, through an
//! ordered scan of its partial index ([`ORDERED_PICK`]), so concurrent
//! batch claimers take disjoint sets without waiting on each other, and a
//! per-name claim racing a batch waits on the row lock, re-checks its guard
//! and loses. The completions are `unnest`ed arrays joined into one guarded
//! `UPDATE ... FROM` per target status. Each statement updates the history
//! rows of what it moved and upserts any that were missing
//! ([`history_ctes`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use diesel::sql_types::{Array, BigInt, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};

use flowstate_core::{HistoryId, Result, StepStatus};

use super::Pool;
use super::sql::{deadline, history_ctes};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::BatchItem;
use crate::rows::{IdRow, StepRow};
use crate::sql::{
    Move, MoveBinds, StepMove, batch_claimable, claim_move, claim_set, run_unsettled,
};

/// The batch claim. Binds: `$1` now, `$2` limit, `$3` as many fresh history
/// ids as the limit, `$4` the lease clock offset, `$5` the default claim
/// timeout (microseconds), then `$6` the function for the filtered form.
/// Rows: the claimed steps as the claim left them, oldest first. Steps of
/// settled runs are not picked ([`run_unsettled`]).
///
/// The update finds what the pick locked by tuple id (`ctid = ANY(...)`, one
/// TID scan), never by joining the pick back on the primary key: costed
/// against a few hundred key lookups, a hash join over a sequential scan of
/// the whole table looks cheap to the planner (SCHEMA.md, Decisions,
/// "PostgreSQL's batch claim by tuple id"). A tuple the pick locked cannot
/// move before the statement ends.
fn claim_batch_sql(by_function: bool) -> String {
    let claimable = batch_claimable(
        <diesel_async::AsyncPgConnection as Connection>::CLAIMABLE_COLUMN,
        "$1",
        by_function.then_some("$6"),
    );
    let history = history_ctes(
        &claim_move(),
        "claimed",
        "claim",
        "($3::text[])[row_number() OVER ()]",
        "$1",
    );
    format!(
        "WITH picked AS (SELECT ctid AS picked_ctid FROM flowstate_steps WHERE {claimable} \
         AND {unsettled} ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED), \
         claimed AS (UPDATE flowstate_steps SET {set} \
         WHERE ctid = ANY(ARRAY(SELECT picked_ctid FROM picked)) RETURNING flowstate_steps.*), \
         {history} \
         SELECT c.* FROM claimed AS c ORDER BY c.created_at, c.id",
        set = claim_set("$1", deadline("$4", "$5")),
        unsettled = run_unsettled("flowstate_steps.run_id"),
    )
}

/// The batch claim of any function, and of one.
static CLAIM_BATCH: LazyLock<[String; 2]> =
    LazyLock::new(|| [claim_batch_sql(false), claim_batch_sql(true)]);

/// One target status's share of the completions: its items as arrays, the
/// guarded `UPDATE ... FROM` and the history writes of what moved
/// ([`history_ctes`]).
fn completion_ctes(to: StepStatus, tag: &str, binds: [&str; 4]) -> String {
    let [ids, payloads, history_ids, attempts] = binds;
    let step_move = StepMove::of(Move::Claimed(to));
    let items = format!("{tag}_items");
    let moved = format!("{tag}_moved");
    let payload = format!("{items}.payload::jsonb");
    let attempt = format!("{items}.attempt");
    let update = step_move.update_where(
        MoveBinds {
            now: "$1",
            payload: &payload,
            deadline: deadline("", ""),
            attempt: &attempt,
        },
        &format!("FROM {items}"),
        &format!("id = {items}.item_id"),
    );
    let history = history_ctes(&step_move, &moved, tag, "m.history_id", "$1");
    format!(
        "{items} AS (SELECT * FROM unnest({ids}::text[], {payloads}::text[], {history_ids}::text[], \
         {attempts}::bigint[]) AS i(item_id, payload, history_id, attempt)), \
         {moved} AS ({update} RETURNING flowstate_steps.id, flowstate_steps.current_attempt, \
         flowstate_steps.result, flowstate_steps.error, {items}.history_id), \
         {history}"
    )
}

/// The completions, each fenced by its claim's attempt. Binds: `$1` now,
/// then ids, payloads, fresh history ids and attempts of the successes
/// (`$2`-`$5`) and of the failures (`$6`-`$9`). Rows: the id of every step
/// that moved.
static COMPLETE_BATCH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {}, {} SELECT id FROM s_moved UNION ALL SELECT id FROM f_moved",
        completion_ctes(StepStatus::Succeeded, "s", ["$2", "$3", "$4", "$5"]),
        completion_ctes(StepStatus::Failed, "f", ["$6", "$7", "$8", "$9"]),
    )
});

/// Turns off bitmap scans for the rest of the claim's transaction.
///
/// Every claim leaves its steps' entries in the partial index it walks
/// (PostgreSQL removes index entries only at `VACUUM`), and the next claims
/// start from the oldest entry again. An ordered index scan marks each
/// entry whose row is dead to every snapshot (`kill_prior_tuple`), so later
/// claims step over it without reading the heap; a bitmap scan never does,
/// and reads the heap of every claimed step since the last vacuum on every
/// claim. The planner picks the bitmap scan and a sort whenever its
/// statistics say few steps are claimable, which is the usual state of a
/// queue, so the claim cannot leave the choice to it: on a table holding
/// 40,000 claimed steps, an empty claim took 6.2 ms through the bitmap
/// scan, and 1.0 ms through the index once its entries were marked.
const ORDERED_PICK: &str = "SET LOCAL enable_bitmapscan = off";

/// [`BatchStepStore::claim_batch`](flowstate_core::ports::BatchStepStore::claim_batch),
/// its function already checked and `limit` at least 1: one transaction,
/// [`ORDERED_PICK`] then the claim.
pub(super) async fn claim_batch(
    pool: &Pool,
    config: &StoreConfig,
    limit: u32,
    function: Option<&str>,
) -> Result<Vec<StepRow>> {
    let op = "claim_batch";
    let history_ids: Vec<String> = (0..limit)
        .map(|_| HistoryId::generate().to_string())
        .collect();
    let now = config.clock.now().as_micros();
    let mut conn = pool.get(op).await?;
    conn.transaction(async |conn| {
        diesel::sql_query(ORDERED_PICK).execute(conn).await?;
        let query = diesel::sql_query(CLAIM_BATCH[usize::from(function.is_some())].as_str())
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(i64::from(limit))
            .bind::<Array<Text>, _>(history_ids)
            .bind::<BigInt, _>(config.lease_offset_us())
            .bind::<BigInt, _>(config.claim_default_us());
        match function {
            Some(function) => query.bind::<Text, _>(function).cached().load(conn).await,
            None => query.cached().load(conn).await,
        }
    })
    .await
    .map_err(|err| backend(op, err))
}

/// [`BatchStepStore::complete_batch`](flowstate_core::ports::BatchStepStore::complete_batch)
/// of `items` (checked, encoded, each step once): the ids that moved.
pub(super) async fn complete_batch(
    pool: &Pool,
    config: &StoreConfig,
    items: &[BatchItem],
) -> Result<HashSet<String>> {
    let op = "complete_batch";
    let arrays = |to: StepStatus| {
        let mut arrays: [Vec<String>; 3] = Default::default();
        let mut attempts: Vec<i64> = Vec::new();
        for item in items.iter().filter(|item| item.to == to) {
            arrays[0].push(item.id.to_string());
            arrays[1].push(item.payload.clone());
            arrays[2].push(HistoryId::generate().to_string());
            attempts.push(i64::from(item.attempt));
        }
        (arrays, attempts)
    };
    let ([s_ids, s_payloads, s_history], s_attempts) = arrays(StepStatus::Succeeded);
    let ([f_ids, f_payloads, f_history], f_attempts) = arrays(StepStatus::Failed);
    let mut conn = pool.get(op).await?;
    let moved: Vec<IdRow> = diesel::sql_query(COMPLETE_BATCH.as_str())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Array<Text>, _>(s_ids)
        .bind::<Array<Text>, _>(s_payloads)
        .bind::<Array<Text>, _>(s_history)
        .bind::<Array<BigInt>, _>(s_attempts)
        .bind::<Array<Text>, _>(f_ids)
        .bind::<Array<Text>, _>(f_payloads)
        .bind::<Array<Text>, _>(f_history)
        .bind::<Array<BigInt>, _>(f_attempts)
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend(op, err))?;
    Ok(moved.into_iter().map(|m| m.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_batch_is_one_statement_over_the_shared_fragments() {
        let [any, one] = &*CLAIM_BATCH;
        assert!(any.contains("FOR UPDATE SKIP LOCKED"));
        assert!(any.contains("WHERE ctid = ANY(ARRAY(SELECT picked_ctid FROM picked))"));
        assert!(!any.contains("function_name = $6"));
        assert!(one.contains("function_name = $6"));
        assert!(any.contains("AND EXISTS (SELECT 1 FROM flowstate_runs AS unsettled_run"));
        assert!(any.contains("$4 + COALESCE(claim_timeout_ms * 1000, $5)"));
        assert!(any.contains("SELECT ($3::text[])[row_number() OVER ()], m.id, m.current_attempt"));
        assert!(any.contains("claim_settled AS (UPDATE flowstate_step_history AS h SET status = 'running', running_at = $1 FROM claimed AS m"));
        assert!(COMPLETE_BATCH.contains(
            "result = s_items.payload::jsonb, claimed_until = NULL FROM s_items \
             WHERE id = s_items.item_id AND status IN ('running') AND current_attempt = s_items.attempt"
        ));
        assert!(
            COMPLETE_BATCH
                .contains("error = f_items.payload::jsonb, claimed_until = NULL FROM f_items")
        );
        assert!(COMPLETE_BATCH.contains(
            "s_settled AS (UPDATE flowstate_step_history AS h SET status = 'succeeded', \
             succeeded_at = $1, result = m.result FROM s_moved AS m \
             WHERE h.step_id = m.id AND h.attempt = m.current_attempt RETURNING h.step_id)"
        ));
        assert!(COMPLETE_BATCH.contains(
            "FROM f_moved AS m WHERE m.id NOT IN (SELECT step_id FROM f_settled) ON CONFLICT"
        ));
    }
}
