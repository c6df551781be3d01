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

/// A transition or retry of step `id`, its payload already encoded by core,
/// as one transaction (run again after a lock conflict).
pub(crate) async fn guarded_move(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    step_move: Move,
    payload: Option<String>,
) -> Result<Guarded> {
    let (op, now, id) = (
        step_move.operation(),
        config.clock.now().as_micros(),
        id.to_string(),
    );
    let payload = payload.map(JsonText);
    let sql = MOVES.get(step_move);
    let moved = transaction!(pool, op, |conn| {
        let update = diesel::sql_query(sql.update.as_str())
            .into_boxed()
            .bind::<BigInt, _>(now);
        let update = match &payload {
            Some(json) => update.bind::<Json, _>(json),
            None => update,
        };
        if update.bind::<Text, _>(&id).cached().execute(conn).await? == 0 {
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
