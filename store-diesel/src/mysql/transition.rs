//! Step transitions and retry attempts on MySQL: one transaction each, the
//! guarded `UPDATE` by id and the history upsert copying the step row just
//! written: two writes, no read. If the `UPDATE` matched nothing the caller
//! reads the status, on the error path only.

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::{HistoryId, Result, RetryStart, StepId, StepStatus};

use super::Pool;
use super::sql::{MoveSql, RETRIES, TRANSITIONS};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::guard::Guarded;
use crate::schema::{Json, JsonText};
use crate::store::conflict::retry_conflicts;

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
    let payload = payload.map(JsonText);
    guarded_write(
        pool,
        "transition_step",
        TRANSITIONS.get(to),
        id,
        now,
        payload.as_ref(),
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

/// Runs the move's two writes as one transaction (again after a conflict).
async fn guarded_write(
    pool: &Pool,
    op: &'static str,
    sql: &'static MoveSql,
    id: StepId,
    now: i64,
    payload: Option<&JsonText>,
) -> Result<Guarded> {
    let id = id.to_string();
    let mut conn = pool.get(op).await?;
    let moved = retry_conflicts!(op, write_once(&mut conn, sql, &id, now, payload).await)
        .map_err(|err| backend(op, err))?;
    conn.release();
    Ok(if moved {
        Guarded::Moved
    } else {
        Guarded::Unseen
    })
}

async fn write_once(
    conn: &mut AsyncMysqlConnection,
    sql: &'static MoveSql,
    id: &str,
    now: i64,
    payload: Option<&JsonText>,
) -> diesel::QueryResult<bool> {
    conn.transaction(async |conn| {
        let update = diesel::sql_query(sql.update.as_str())
            .into_boxed()
            .bind::<BigInt, _>(now);
        let update = match payload {
            Some(json) => update.bind::<Json, _>(json),
            None => update,
        };
        let moved = update.bind::<Text, _>(id).cached().execute(conn).await?;
        if moved == 0 {
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
        history.bind::<Text, _>(id).cached().execute(conn).await?;
        Ok(true)
    })
    .await
}
