//! [`StepStore`] for [`SqliteStore`]: inserting and reading steps and their
//! history; the claim and the transitions live in `claim.rs` and
//! `transition.rs`.
//!
//! Reads are one statement each and never touch the history table unless
//! they are about history; reads of a run's steps or history join the run
//! so an unknown run is told apart from an empty one in that same statement.

use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{OptionalExtension, RunQueryDsl};
use flowstate_core::ports::StepStore;
use flowstate_core::{
    Error, HistoryId, Inserted, NewStep, Result, RunId, Step, StepAttempt, StepId, StepStatus,
    StepTransition, Timestamp,
};

use super::query::Sql;
use super::sql;
use super::{Fail, SqliteStore};
use crate::rows::{AttemptRow, StepRow};
use crate::rows::{convert, joined_to_run};

impl StepStore for SqliteStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.run, name = %step.name))]
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        let encoded = self.config.limits.encode_step(&step)?;
        let input = encoded.input;
        let delay_ms = encoded.retry_delay_ms.map(i64::from);
        let now = self.now();
        let record = step.into_step(StepId::generate(), Timestamp::from_micros(now))?;
        self.write("insert_step", move |conn| {
            let run = record.run;
            let inserted = Sql::new(sql::INSERT_STEP)
                .bind::<Text, _>(record.id.to_string())
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(&record.name)
                .bind::<Nullable<Text>, _>(record.function.as_deref())
                .bind::<Text, _>(&input)
                .bind::<BigInt, _>(i64::from(record.retry.retries))
                .bind::<Nullable<BigInt>, _>(delay_ms)
                .bind::<BigInt, _>(now)
                .execute(conn)
                .map_err(|err| Fail::fk_as(err, Error::RunNotFound(run)))?;
            if inserted == 0 {
                let existing: StepRow = Sql::new(sql::FIND_STEP)
                    .bind::<Text, _>(run.to_string())
                    .bind::<Text, _>(&record.name)
                    .get_result(conn)?;
                return Ok(Inserted {
                    record: Step::try_from(existing)?,
                    inserted: false,
                });
            }
            Sql::new(sql::INSERT_FIRST_ATTEMPT)
                .bind::<Text, _>(HistoryId::generate().to_string())
                .bind::<Text, _>(record.id.to_string())
                .bind::<BigInt, _>(now)
                .execute(conn)?;
            Ok(Inserted {
                record,
                inserted: true,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_step(&self, id: StepId) -> Result<Step> {
        self.read("get_step", move |conn| {
            let row: Option<StepRow> = Sql::new(sql::GET_STEP)
                .bind::<Text, _>(id.to_string())
                .get_result(conn)
                .optional()?;
            Ok(Step::try_from(row.ok_or(Error::StepNotFound(id))?)?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        self.config.limits.check_key("step name", name)?;
        let name = name.to_owned();
        self.read("find_step", move |conn| {
            let row: Option<StepRow> = Sql::new(sql::FIND_STEP)
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(&name)
                .get_result(conn)
                .optional()?;
            Ok(Step::try_from(
                row.ok_or(Error::StepNameNotFound { run, name })?,
            )?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        self.read("list_steps", move |conn| {
            let rows: Vec<Option<StepRow>> = Sql::new(sql::LIST_STEPS)
                .bind::<Text, _>(run.to_string())
                .load(conn)?;
            Ok(convert(joined_to_run(run, rows)?)?)
        })
        .await
    }

    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        self.transition(id, transition).await
    }

    async fn create_retry_attempt(&self, id: StepId, start: StepStatus) -> Result<()> {
        self.retry_attempt(id, start).await
    }

    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        self.claim(run, name, function).await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        self.read("step_history", move |conn| {
            let rows: Vec<Option<AttemptRow>> = Sql::new(sql::STEP_HISTORY)
                .bind::<Text, _>(run.to_string())
                .load(conn)?;
            Ok(convert(joined_to_run(run, rows)?)?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.config.limits.check_key("branch", branch)?;
        let branch = branch.to_owned();
        let now = self.now();
        self.read("set_branch_taken", move |conn| {
            let updated = Sql::new(sql::SET_BRANCH)
                .bind::<Text, _>(branch)
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(id.to_string())
                .execute(conn)?;
            if updated == 0 {
                return Err(Error::StepNotFound(id).into());
            }
            Ok(())
        })
        .await
    }
}
