//! Step transitions and retry attempts on MySQL: one statement each, no
//! transaction around it. The guarded `UPDATE` by id decides (its affected
//! rows) and stamps `move_history_id` with a fresh history id; the trigger
//! of migration `2026-12-06-000019_move_history` upserts the attempt's
//! history row from the row just written, inside that same statement, so
//! the move and its history row commit together under autocommit. If the
//! `UPDATE` matched nothing the caller reads the status, on the error path
//! only.

use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, StepId};

use super::Pool;
use super::sql::MOVES;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::conflict::leased;
use crate::error::backend;
use crate::guard::Guarded;
use crate::schema::{Json, JsonText};
use crate::sql::Move;

/// A transition, retry or claimer's move of step `id`, its payload already
/// encoded by core (`attempt`: the claim's, for a fenced move), as one
/// statement (run again after a lock conflict).
pub(super) async fn guarded_move(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    step_move: Move,
    payload: Option<String>,
    attempt: Option<u32>,
) -> Result<Guarded> {
    let (op, now, id) = (
        step_move.operation(),
        config.clock.now().as_micros(),
        id.to_string(),
    );
    let payload = JsonText(payload.unwrap_or_default());
    let (offset, default_us) = (config.lease_offset_us(), config.claim_default_us());
    let attempt = i64::from(attempt.unwrap_or_default());
    let sql = MOVES.get(step_move);
    // A rolled-back statement wrote nothing: its run again may reuse the id.
    let history = HistoryId::generate().to_string();
    let moved: diesel::QueryResult<usize> = leased!(pool, op, |conn| {
        let mut update = diesel::sql_query(sql.update.as_str())
            .into_boxed()
            .bind::<Text, _>(&history)
            .bind::<BigInt, _>(now);
        if sql.payload {
            update = update.bind::<Json, _>(&payload);
        }
        if sql.deadline {
            update = update
                .bind::<BigInt, _>(offset)
                .bind::<BigInt, _>(default_us);
        }
        update = update.bind::<Text, _>(&id);
        if sql.attempt {
            update = update.bind::<BigInt, _>(attempt);
        }
        update.cached().execute(conn).await
    });
    let moved = moved.map_err(|err| backend(op, err))?;
    Ok(Guarded::written(moved > 0))
}
