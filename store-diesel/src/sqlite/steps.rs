//! Inserting a step on SQLite: one `BEGIN IMMEDIATE` transaction of the
//! guarded, idempotent insert and either the first history row (this call
//! inserted the step) or a read of the step holding the name (under the
//! same guard).

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};

use flowstate_core::{HistoryId, Result, RunId, StepStatus};

use super::sql::{INSERT_STEP, MOVES};
use super::{Pool, TxError, write, wrote};
use crate::config::StoreConfig;
use crate::error::or_missing_run;
use crate::guard::Inserting;
use crate::rows::StepRow;
use crate::sql::Move;
use crate::sql::bind_new_step;
use crate::sql::typed::{now_sql, step_holder, step_holder_fenced};

/// Inserts `row` with its first history row, into a run that is not
/// settled (and, with `token`, whose lease the token holds): whether this
/// call inserted it, the step that already holds its name, or neither (the
/// run refused it).
pub(super) async fn insert_step(
    pool: &Pool,
    config: &StoreConfig,
    run: RunId,
    row: &StepRow,
    token: Option<i64>,
) -> Result<Inserting> {
    let row = row.clone();
    let offset = config.lease_offset_us();
    write(pool, "insert_step", move |conn| {
        let insert = bind_new_step(
            diesel::sql_query(INSERT_STEP[usize::from(token.is_some())].as_str()).into_boxed(),
            &row,
        )
        .bind::<Nullable<BigInt>, _>(row.claim_timeout_ms);
        let insert = match token {
            Some(token) => insert.bind::<BigInt, _>(token).bind::<BigInt, _>(offset),
            None => insert,
        };
        let inserted = wrote(conn, insert)
            .map_err(|err| TxError::Port(or_missing_run("insert_step", run, err)))?;
        if !inserted {
            let holder: Option<StepRow> = match token {
                None => step_holder(&row).select(StepRow::as_select()).first(conn),
                Some(token) => step_holder_fenced(now_sql(&*conn), &row, token, offset)
                    .select(StepRow::as_select())
                    .first(conn),
            }
            .optional()?;
            return Ok(holder.map_or(Inserting::Refused, |h| Inserting::Held(Box::new(h))));
        }
        let first = MOVES.get(Move::Transition(StepStatus::Pending));
        let history = diesel::sql_query(first.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(row.created_at)
            .bind::<Text, _>(&row.id);
        wrote(conn, history)?;
        Ok(Inserting::Inserted)
    })
    .await
}
