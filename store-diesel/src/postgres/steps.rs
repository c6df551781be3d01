//! Inserting a step with its first history row, in one statement.

use diesel::QueryableByName;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{HistoryId, Result, RunId};

use super::Pool;
use super::sql::INSERT_STEP;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::{backend, or_missing_run};
use crate::guard::Inserting;
use crate::rows::StepRow;
use crate::sql::bind_new_step;
use crate::sql::typed::{now_sql, step_holder, step_holder_fenced};

/// How many steps the insert wrote.
#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    inserted: i64,
}

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
    let mut conn = pool.get("insert_step").await?;
    let query = bind_new_step(
        diesel::sql_query(INSERT_STEP[usize::from(token.is_some())].as_str()).into_boxed(),
        row,
    )
    .bind::<Text, _>(HistoryId::generate().to_string())
    .bind::<Nullable<BigInt>, _>(row.claim_timeout_ms);
    let query = match token {
        Some(token) => query
            .bind::<BigInt, _>(token)
            .bind::<BigInt, _>(config.lease_offset_us()),
        None => query,
    };
    let written: InsertedRow = query
        .cached()
        .get_result(&mut *conn)
        .await
        .map_err(|err| or_missing_run("insert_step", run, err))?;
    if written.inserted == 1 {
        return Ok(Inserting::Inserted);
    }
    // Nothing inserted: the name is taken, or the run refused the step.
    // Read the holder in a statement of its own, so it sees a racing insert
    // that committed meanwhile.
    let holder = match token {
        None => {
            step_holder(row)
                .select(StepRow::as_select())
                .first(&mut *conn)
                .await
        }
        Some(token) => {
            let (now_us, offset) = (now_sql(&*conn), config.lease_offset_us());
            step_holder_fenced(now_us, row, token, offset)
                .select(StepRow::as_select())
                .first(&mut *conn)
                .await
        }
    }
    .optional()
    .map_err(|err| backend("insert_step", err))?;
    Ok(holder.map_or(Inserting::Refused, |h| Inserting::Held(Box::new(h))))
}
