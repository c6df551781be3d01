//! Inserting a step on MySQL: one transaction of the guarded, idempotent
//! insert, a read of the row holding the name (under the same guard), and
//! (if this call inserted it) the first history row.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, RunId};

use super::sql::{FIRST_HISTORY, INSERT_STEP};
use super::{Pool, transaction};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::or_missing_run;
use crate::guard::Inserting;
use crate::rows::StepRow;
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
    let offset = config.lease_offset_us();
    transaction!(pool, "insert_step", |conn| {
        // A duplicate (run, name) counts as a matched row here
        // (`CLIENT_FOUND_ROWS`), and a refused run as none, so the affected
        // rows cannot tell an insert from a skip; the row holding the name
        // is read instead, whoever wrote it.
        let insert = bind_new_step(
            diesel::sql_query(INSERT_STEP[usize::from(token.is_some())].as_str()).into_boxed(),
            row,
        )
        .bind::<BigInt, _>(row.created_at)
        .bind::<Nullable<BigInt>, _>(row.claim_timeout_ms)
        .bind::<Text, _>(&row.run_id);
        let insert = match token {
            Some(token) => insert.bind::<BigInt, _>(token).bind::<BigInt, _>(offset),
            None => insert,
        };
        insert.cached().execute(conn).await?;
        let holder: Option<StepRow> = match token {
            None => {
                step_holder(row)
                    .select(StepRow::as_select())
                    .first(conn)
                    .await
            }
            Some(token) => {
                step_holder_fenced(now_sql(&*conn), row, token, offset)
                    .select(StepRow::as_select())
                    .first(conn)
                    .await
            }
        }
        .optional()?;
        match holder {
            None => return Ok(Inserting::Refused),
            Some(holder) if holder.id != row.id => return Ok(Inserting::Held(Box::new(holder))),
            Some(_) => {}
        }
        diesel::sql_query(FIRST_HISTORY.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(row.created_at)
            .bind::<Text, _>(&row.id)
            .cached()
            .execute(conn)
            .await?;
        Ok(Inserting::Inserted)
    })
    .map_err(|err| or_missing_run("insert_step", run, err))
}
