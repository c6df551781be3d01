//! Inserting a step on MySQL: one transaction of the idempotent insert, a
//! read of the row holding the name, and (if this call inserted it) the
//! first history row.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, RunId};

use super::sql::FIRST_HISTORY;
use super::{Pool, transaction};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::or_missing_run;
use crate::rows::StepRow;
use crate::schema::flowstate_steps as steps;

/// Inserts `row` with its first history row; `None` if this call inserted
/// it, else the step that already holds its name.
pub(crate) async fn insert_step(
    pool: &Pool,
    _config: &StoreConfig,
    run: RunId,
    row: &StepRow,
) -> Result<Option<StepRow>> {
    transaction!(pool, "insert_step", |conn| {
        // A duplicate (run, name) counts as a matched row here
        // (`CLIENT_FOUND_ROWS`), so the affected rows cannot tell; the
        // row the upsert locked is read instead, whoever wrote it.
        diesel::insert_into(steps::table)
            .values(row)
            .on_conflict(diesel::dsl::DuplicatedKeys)
            .do_update()
            .set(steps::id.eq(steps::id))
            .execute(conn)
            .await?;
        let holder: StepRow = steps::table
            .filter(steps::run_id.eq(&row.run_id))
            .filter(steps::name.eq(&row.name))
            .select(StepRow::as_select())
            .first(conn)
            .await?;
        if holder.id != row.id {
            return Ok(Some(holder));
        }
        diesel::sql_query(FIRST_HISTORY.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(row.created_at)
            .bind::<Text, _>(&row.id)
            .cached()
            .execute(conn)
            .await?;
        Ok(None)
    })
    .map_err(|err| or_missing_run("insert_step", run, err))
}
