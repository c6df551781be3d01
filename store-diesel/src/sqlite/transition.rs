//! Step transitions and retry attempts on SQLite: one `BEGIN IMMEDIATE`
//! transaction each, exactly two writes and no read on success: the
//! status-guarded `UPDATE` (its affected rows decide) and the history
//! upsert keyed on the step's `current_attempt` as the `UPDATE` left it. If
//! the `UPDATE` matched nothing the caller reads the status, on the error
//! path only.

use diesel::RunQueryDsl;
use diesel::sql_types::{BigInt, Text};

use flowstate_core::{HistoryId, Result, RetryStart, StepId, StepStatus};

use super::sql::{MoveSql, RETRIES, TRANSITIONS};
use super::{Pool, write};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::guard::Guarded;
use crate::schema::{Json, JsonText};

/// [`StepStore::transition_step`](flowstate_core::StepStore::transition_step),
/// its payload already encoded by core.
#[tracing::instrument(level = "debug", skip_all, fields(step = %id, to = %to))]
pub(crate) async fn transition(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    to: StepStatus,
    payload: Option<String>,
) -> Result<Guarded> {
    let now = config.clock.now().as_micros();
    guarded_write(
        pool,
        "transition_step",
        TRANSITIONS.get(to),
        id,
        now,
        payload,
    )
    .await
}

/// [`StepStore::create_retry_attempt`](flowstate_core::StepStore::create_retry_attempt).
#[tracing::instrument(level = "debug", skip_all, fields(step = %id, start = %start))]
pub(crate) async fn retry_attempt(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    start: RetryStart,
) -> Result<Guarded> {
    let now = config.clock.now().as_micros();
    guarded_write(
        pool,
        "create_retry_attempt",
        RETRIES.get(start),
        id,
        now,
        None,
    )
    .await
}

async fn guarded_write(
    pool: &Pool,
    op: &'static str,
    sql: &'static MoveSql,
    id: StepId,
    now: i64,
    payload: Option<String>,
) -> Result<Guarded> {
    write(pool, op, move |conn| {
        let id = id.to_string();
        let update = diesel::sql_query(sql.update.as_str())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(&id);
        let moved = match payload {
            Some(json) => update
                .bind::<Json, _>(JsonText(json))
                .cached()
                .execute(conn)?,
            None => update.cached().execute(conn)?,
        };
        if moved == 0 {
            return Ok(Guarded::Unseen);
        }
        diesel::sql_query(sql.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(&id)
            .cached()
            .execute(conn)?;
        Ok(Guarded::Moved)
    })
    .await
}
