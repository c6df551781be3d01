//! Inserting a step with its first history row, in one statement.

use diesel::QueryableByName;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{Error, HistoryId, Result, RunId};

use super::Pool;
use super::sql::INSERT_STEP;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::{backend, or_missing_run};
use crate::rows::StepRow;
use crate::schema::{Json, flowstate_steps as steps};

/// How many steps the insert wrote.
#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    inserted: i64,
}

/// Inserts `row` with its first history row; `None` if this call inserted
/// it, else the step that already holds its name.
pub(crate) async fn insert_step(
    pool: &Pool,
    _config: &StoreConfig,
    run: RunId,
    row: &StepRow,
) -> Result<Option<StepRow>> {
    let mut conn = pool.get("insert_step").await?;
    for _ in 0..crate::store::IDEMPOTENT_TRIES {
        let written: InsertedRow = diesel::sql_query(INSERT_STEP.as_str())
            .bind::<Text, _>(&row.id)
            .bind::<Text, _>(&row.run_id)
            .bind::<Text, _>(&row.name)
            .bind::<Nullable<Text>, _>(row.function_name.as_deref())
            .bind::<Json, _>(&row.input)
            .bind::<BigInt, _>(row.retries)
            .bind::<Nullable<BigInt>, _>(row.retry_delay_ms)
            .bind::<BigInt, _>(row.created_at)
            .bind::<Text, _>(HistoryId::generate().to_string())
            .cached()
            .get_result(&mut *conn)
            .await
            .map_err(|err| or_missing_run("insert_step", run, err))?;
        if written.inserted == 1 {
            return Ok(None);
        }
        // The name is taken: read the step holding it, in a statement of its
        // own so it sees a racing insert that committed meanwhile.
        let holder = steps::table
            .filter(steps::run_id.eq(&row.run_id))
            .filter(steps::name.eq(&row.name))
            .select(StepRow::as_select())
            .first(&mut *conn)
            .await
            .optional()
            .map_err(|err| backend("insert_step", err))?;
        if holder.is_some() {
            return Ok(holder);
        }
    }
    Err(Error::backend(
        "insert_step",
        true,
        "the step holding this name kept disappearing",
    ))
}
