//! Step transitions and retry attempts: the step row and its current
//! attempt's history row written by one statement that reads nothing first.
//!
//! When the guard matches nothing, the statement's final `SELECT` reports
//! the step's status in its snapshot, so a refused move is diagnosed in
//! the same round trip; a move that matches reads nothing besides. Only
//! when that status could have moved (another writer won a race after the
//! snapshot) is the step read again (by the caller), to report what it is
//! now.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, StepId, StepStatus};

use super::Pool;
use super::sql::MOVES;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::guard::Guarded;
use crate::rows::parse_status;
use crate::schema::{Json, JsonText};
use crate::sql::{Move, StepMove};

/// What a guarded step write found and did.
#[derive(QueryableByName)]
struct MoveRow {
    /// The status the step moved to, or, when nothing moved, its status in
    /// the statement's snapshot.
    #[diesel(sql_type = Text)]
    status: String,
    /// Whether the guarded `UPDATE` matched.
    #[diesel(sql_type = Bool)]
    moved: bool,
}

/// A transition, retry or claimer's move of step `id`, its payload already
/// encoded by core; `attempt` is the claim's, for a fenced move.
pub(super) async fn guarded_move(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    step_move: Move,
    payload: Option<String>,
    attempt: Option<u32>,
) -> Result<Guarded> {
    let statement = MOVES.get(step_move);
    let mut query = diesel::sql_query(statement.sql.as_str())
        .into_boxed()
        .bind::<Text, _>(id.to_string())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Text, _>(HistoryId::generate().to_string());
    if statement.params.payload {
        query = query.bind::<Json, _>(JsonText(payload.unwrap_or_default()));
    }
    if statement.params.deadline {
        query = query
            .bind::<BigInt, _>(config.lease_offset_us())
            .bind::<BigInt, _>(config.claim_default_us());
    }
    if statement.params.attempt {
        query = query.bind::<BigInt, _>(i64::from(attempt.unwrap_or_default()));
    }
    let mut conn = pool.get(step_move.operation()).await?;
    let rows: Vec<MoveRow> = query
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend(step_move.operation(), err))?;
    let Some(row) = rows.into_iter().next() else {
        return Ok(Guarded::Refused(None));
    };
    if row.moved {
        return Ok(Guarded::Moved);
    }
    // The snapshot's status passed the guard: a racing writer changed the
    // step after it, so the caller reads what it is now.
    let sources = StepMove::of(step_move).sources;
    let raced = parse_status::<StepStatus>(&id.to_string(), &row.status)
        .is_ok_and(|from| sources.contains(&from));
    Ok(if raced {
        Guarded::Unseen
    } else {
        Guarded::Refused(Some(row.status))
    })
}
