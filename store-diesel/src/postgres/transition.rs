//! Step transitions and retry attempts: the step row and its current
//! attempt's history row written by one statement that reads nothing first.
//!
//! The statement's final `SELECT` reports the step's status in its
//! snapshot, so a refused move is diagnosed in the same round trip. Only
//! when that status could have moved (another writer won a race after the
//! snapshot) is the step read again (by the caller), to report what it is
//! now.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, RetryStart, StepId, StepStatus};

use super::Pool;
use super::sql::{RETRIES, TRANSITIONS};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::guard::Guarded;
use crate::rows::parse_status;
use crate::schema::{Json, JsonText};

/// What a guarded step write found and did.
#[derive(QueryableByName)]
struct MoveRow {
    /// The step's status in the statement's snapshot.
    #[diesel(sql_type = Text)]
    status: String,
    /// Whether the guarded `UPDATE` matched.
    #[diesel(sql_type = Bool)]
    moved: bool,
}

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
    let query = diesel::sql_query(TRANSITIONS.get(to).as_str())
        .bind::<Text, _>(id.to_string())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Text, _>(HistoryId::generate().to_string());
    let mut conn = pool.get("transition_step").await?;
    let rows: Vec<MoveRow> = match payload {
        Some(json) => {
            let query = query.bind::<Json, _>(JsonText(json));
            query.cached().load(&mut *conn).await
        }
        None => query.cached().load(&mut *conn).await,
    }
    .map_err(|err| backend("transition_step", err))?;
    conn.release();
    Ok(outcome(id, rows, |from| from.can_transition_to(to)))
}

/// [`StepStore::create_retry_attempt`](flowstate_core::StepStore::create_retry_attempt).
#[tracing::instrument(level = "debug", skip_all, fields(step = %id, start = %start))]
pub(crate) async fn retry_attempt(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    start: RetryStart,
) -> Result<Guarded> {
    let mut conn = pool.get("create_retry_attempt").await?;
    let rows: Vec<MoveRow> = diesel::sql_query(RETRIES.get(start).as_str())
        .bind::<Text, _>(id.to_string())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Text, _>(HistoryId::generate().to_string())
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend("create_retry_attempt", err))?;
    conn.release();
    Ok(outcome(id, rows, |from| from == StepStatus::Failed))
}

/// What the statement's row says: moved, refused with the snapshot's
/// status, or (the snapshot's status passed the guard, so a racing writer
/// changed the step after it) to be read again.
fn outcome(id: StepId, rows: Vec<MoveRow>, could_move: impl Fn(StepStatus) -> bool) -> Guarded {
    let Some(row) = rows.into_iter().next() else {
        return Guarded::Refused(None);
    };
    if row.moved {
        return Guarded::Moved;
    }
    let raced = parse_status::<StepStatus>(&id.to_string(), &row.status).is_ok_and(could_move);
    if raced {
        Guarded::Unseen
    } else {
        Guarded::Refused(Some(row.status))
    }
}
