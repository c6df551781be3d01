//! Step transitions and retry attempts on SQLite: one `BEGIN IMMEDIATE`
//! transaction each, exactly two writes and no read on success: the
//! status-guarded `UPDATE` (its affected rows decide) and the history
//! upsert keyed on the step's `current_attempt` as the `UPDATE` left it. If
//! the `UPDATE` matched nothing the caller reads the status, on the error
//! path only.

use diesel::sql_types::{BigInt, Text};
use diesel::{QueryResult, SqliteConnection};

use flowstate_core::{HistoryId, Result, StepId};

use super::sql::MOVES;
use super::{Pool, write, wrote};
use crate::config::StoreConfig;
use crate::guard::Guarded;
use crate::schema::{Json, JsonText};
use crate::sql::Move;

/// A transition, retry or claimer's move of step `id`, its payload already
/// encoded by core (`attempt`: the claim's, for a fenced move).
pub(super) async fn guarded_move(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    step_move: Move,
    payload: Option<String>,
    attempt: Option<u32>,
) -> Result<Guarded> {
    let now = config.clock.now().as_micros();
    let binds = MoveValues {
        now,
        payload,
        offset: config.lease_offset_us(),
        default_us: config.claim_default_us(),
        attempt: i64::from(attempt.unwrap_or_default()),
    };
    write(pool, step_move.operation(), move |conn| {
        let moved = move_once(conn, step_move, &id.to_string(), binds)?;
        Ok(Guarded::written(moved))
    })
    .await
}

/// What a move binds besides the step.
#[derive(Clone, Debug)]
pub(super) struct MoveValues {
    /// The time stamped.
    pub now: i64,
    /// The payload, for a move that carries one.
    pub payload: Option<String>,
    /// The lease clock offset.
    pub offset: i64,
    /// The default claim timeout, in microseconds.
    pub default_us: i64,
    /// The claim's attempt, for a fenced move.
    pub attempt: i64,
}

/// The two writes of one move inside the caller's transaction: the guarded
/// `UPDATE` and, if it matched, the history upsert. Whether it moved.
pub(super) fn move_once(
    conn: &mut SqliteConnection,
    step_move: Move,
    id: &str,
    values: MoveValues,
) -> QueryResult<bool> {
    let sql = MOVES.get(step_move);
    let now = values.now;
    let mut update = diesel::sql_query(sql.update.as_str())
        .into_boxed()
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(id.to_owned());
    if sql.payload {
        update = update.bind::<Json, _>(JsonText(values.payload.unwrap_or_default()));
    }
    if sql.deadline {
        update = update
            .bind::<BigInt, _>(values.offset)
            .bind::<BigInt, _>(values.default_us);
    }
    if sql.attempt {
        update = update.bind::<BigInt, _>(values.attempt);
    }
    let moved = wrote(conn, update)?;
    if moved {
        let history = diesel::sql_query(sql.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(id);
        wrote(conn, history)?;
    }
    Ok(moved)
}
