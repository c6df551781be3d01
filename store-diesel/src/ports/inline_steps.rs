//! [`StepStore::record_step`](flowstate_core::ports::StepStore::record_step)
//! for [`DieselStore`]: a step the caller already ran, inserted settled
//! with its history row in one transaction, written once in the diesel
//! DSL for every dialect.
//!
//! The step's insert is `INSERT ... SELECT ... FROM flowstate_runs WHERE
//! <the run, not settled>` skipping a taken name (`ON CONFLICT DO NOTHING`,
//! `INSERT IGNORE` on MySQL), so the run's guard is decided in the write
//! itself. The history row is inserted from the step row holding this
//! call's id, so it is written only when this call inserted the step, and
//! its count tells whether it did (MySQL counts a skipped duplicate as a
//! matched row).

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::limits::checked;
use flowstate_core::ports::checks;
use flowstate_core::{
    Error, HistoryId, InlineOutcome, InlineStep, Inserted, Result, Step, StepId, Timestamp,
};

use super::runs::IDEMPOTENT_TRIES;
use crate::backend::in_transaction;
use crate::rows::StepRow;
use crate::schema::{
    Json, JsonText, flowstate_runs as runs, flowstate_step_history as history,
    flowstate_steps as steps,
};
use crate::sql::typed::unsettled;
use crate::store::DieselStore;

impl DieselStore {
    /// [`StepStore::record_step`](flowstate_core::ports::StepStore::record_step).
    pub(super) async fn record_inline_step(&self, inline: InlineStep) -> Result<Inserted<Step>> {
        let (inline, (encoded, payload)) =
            checked(inline, |i| checks::record_step(&self.config.limits, i))?;
        let InlineStep {
            step,
            outcome,
            started_at,
            finished_at,
        } = inline;
        let now = self.now();
        let mut record = step.into_step(StepId::generate(), Timestamp::from_micros(now))?;
        record.status = outcome.status();
        let mut row = StepRow::new(&record, encoded.input, encoded.retry_delay_ms);
        let history_id = HistoryId::generate().to_string();
        let running_at = Some(started_at.as_micros());
        let finished = Some(finished_at.as_micros());
        let (succeeded_at, failed_at) = match outcome {
            InlineOutcome::Succeeded(result) => {
                record.result = Some(result);
                row.result = Some(JsonText(payload));
                (finished, None)
            }
            InlineOutcome::Failed(error) => {
                record.error = Some(error);
                row.error = Some(JsonText(payload));
                (None, finished)
            }
        };
        for _ in 0..IDEMPOTENT_TRIES {
            let inserted = in_transaction!(self, "record_step", |conn| {
                let pick = runs::table
                    .filter(runs::id.eq(&row.run_id))
                    .filter(unsettled())
                    .select((
                        row.id.as_str().into_sql::<Text>(),
                        runs::id,
                        row.name.as_str().into_sql::<Text>(),
                        row.function_name.as_deref().into_sql::<Nullable<Text>>(),
                        row.status.as_str().into_sql::<Text>(),
                        (&row.input).into_sql::<Json>(),
                        row.result.as_ref().into_sql::<Nullable<Json>>(),
                        row.error.as_ref().into_sql::<Nullable<Json>>(),
                        row.current_attempt.into_sql::<BigInt>(),
                        row.retries.into_sql::<BigInt>(),
                        row.retry_delay_ms.into_sql::<Nullable<BigInt>>(),
                        row.created_at.into_sql::<BigInt>(),
                        row.updated_at.into_sql::<BigInt>(),
                        row.claim_timeout_ms.into_sql::<Nullable<BigInt>>(),
                    ));
                // MySQL counts a skipped duplicate as a matched row, so
                // the insert's count says nothing there: the history row
                // is inserted from the step row with this call's id, and
                // its count says whether this call inserted the step.
                diesel::insert_into(steps::table)
                    .values(pick)
                    .into_columns((
                        steps::id,
                        steps::run_id,
                        steps::name,
                        steps::function_name,
                        steps::status,
                        steps::input,
                        steps::result,
                        steps::error,
                        steps::current_attempt,
                        steps::retries,
                        steps::retry_delay_ms,
                        steps::created_at,
                        steps::updated_at,
                        steps::claim_timeout_ms,
                    ))
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await?;
                let ours = steps::table.filter(steps::id.eq(&row.id)).select((
                    history_id.as_str().into_sql::<Text>(),
                    steps::id,
                    steps::current_attempt,
                    steps::status,
                    steps::result,
                    steps::error,
                    now.into_sql::<BigInt>(),
                    running_at.into_sql::<Nullable<BigInt>>(),
                    succeeded_at.into_sql::<Nullable<BigInt>>(),
                    failed_at.into_sql::<Nullable<BigInt>>(),
                ));
                let n = diesel::insert_into(history::table)
                    .values(ours)
                    .into_columns((
                        history::id,
                        history::step_id,
                        history::attempt,
                        history::status,
                        history::result,
                        history::error,
                        history::created_at,
                        history::running_at,
                        history::succeeded_at,
                        history::failed_at,
                    ))
                    .execute(conn)
                    .await?;
                Ok(n == 1)
            })?;
            if inserted {
                tracing::debug!(run = %record.run, "inline step recorded");
                return Ok(Inserted {
                    record,
                    inserted: true,
                });
            }
            // Error path only: why nothing was written. A missing or
            // settled run first (as `insert_step` answers), then the step
            // holding the name; neither means the holder was deleted
            // meanwhile, and the write is tried again.
            if let Some(refusal) = self.run_refusal(record.run, None).await? {
                return Err(refusal);
            }
            if let Some(holder) = self
                .step_by_name("record_step", record.run, &record.name)
                .await?
            {
                return Ok(Inserted {
                    record: holder,
                    inserted: false,
                });
            }
        }
        Err(Error::backend(
            "record_step",
            true,
            "the step holding this name kept disappearing",
        ))
    }
}
