//! Inserting a step on SQLite: one `BEGIN IMMEDIATE` transaction of the
//! idempotent insert and either the first history row (this call inserted
//! the step) or a read of the step holding the name.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

use flowstate_core::{HistoryId, Result, RunId, StepStatus};

use super::sql::MOVES;
use super::{Pool, TxError, write, wrote};
use crate::config::StoreConfig;
use crate::error::or_missing_run;
use crate::rows::StepRow;
use crate::schema::flowstate_steps as steps;
use crate::sql::Move;

/// Inserts `row` with its first history row; `None` if this call inserted
/// it, else the step that already holds its name.
pub(crate) async fn insert_step(
    pool: &Pool,
    _config: &StoreConfig,
    run: RunId,
    row: &StepRow,
) -> Result<Option<StepRow>> {
    let row = row.clone();
    write(pool, "insert_step", move |conn| {
        let inserted = diesel::insert_into(steps::table)
            .values(&row)
            .on_conflict((steps::run_id, steps::name))
            .do_nothing()
            .execute(conn)
            .map_err(|err| TxError::Port(or_missing_run("insert_step", run, err)))?;
        if inserted == 0 {
            let holder = steps::table
                .filter(steps::run_id.eq(&row.run_id))
                .filter(steps::name.eq(&row.name))
                .select(StepRow::as_select())
                .first(conn)?;
            return Ok(Some(holder));
        }
        let first = MOVES.get(Move::Transition(StepStatus::Pending));
        let history = diesel::sql_query(first.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(row.created_at)
            .bind::<Text, _>(&row.id);
        wrote(conn, history)?;
        Ok(None)
    })
    .await
}
