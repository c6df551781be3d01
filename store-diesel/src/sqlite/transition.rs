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

/// A transition or retry of step `id`, its payload already encoded by core.
pub(crate) async fn guarded_move(
    pool: &Pool,
    config: &StoreConfig,
    id: StepId,
    step_move: Move,
    payload: Option<String>,
) -> Result<Guarded> {
    let now = config.clock.now().as_micros();
    write(pool, step_move.operation(), move |conn| {
        let moved = move_once(conn, step_move, now, &id.to_string(), payload)?;
        Ok(Guarded::written(moved))
    })
    .await
}

/// The two writes of one move inside the caller's transaction: the guarded
/// `UPDATE` and, if it matched, the history upsert. Whether it moved.
pub(super) fn move_once(
    conn: &mut SqliteConnection,
    step_move: Move,
    now: i64,
    id: &str,
    payload: Option<String>,
) -> QueryResult<bool> {
    let sql = MOVES.get(step_move);
    let update = diesel::sql_query(sql.update.as_str())
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(id);
    let moved = match payload {
        Some(json) => wrote(conn, update.bind::<Json, _>(JsonText(json)))?,
        None => wrote(conn, update)?,
    };
    if moved {
        let history = diesel::sql_query(sql.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(id);
        wrote(conn, history)?;
    }
    Ok(moved)
}
