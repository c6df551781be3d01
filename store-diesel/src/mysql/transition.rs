//! Step transitions and retry attempts on MySQL: one transaction each, the
//! guarded `UPDATE` by id and the history upsert copying the step row just
//! written: two writes, no read. If the `UPDATE` matched nothing the caller
//! reads the status, on the error path only.

use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, StepId};

use super::sql::MOVES;
use super::{Pool, transaction};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::guard::Guarded;
use crate::schema::{Json, JsonText};
use crate::sql::Move;

/// A transition, retry or claimer's move of step `id`, its payload already
/// encoded by core (`attempt`: the claim's, for a fenced move), as one
/// transaction (run again after a lock conflict).
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
    let moved = transaction!(pool, op, |conn| {
        let mut update = diesel::sql_query(sql.update.as_str())
            .into_boxed()
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
        if update.cached().execute(conn).await? == 0 {
            return Ok(false);
        }
        let history = diesel::sql_query(sql.history.as_str())
            .into_boxed()
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now);
        let history = if sql.stamps {
            history.bind::<BigInt, _>(now)
        } else {
            history
        };
        history.bind::<Text, _>(&id).cached().execute(conn).await?;
        Ok(true)
    })
    .map_err(|err| backend(op, err))?;
    Ok(Guarded::written(moved))
}
