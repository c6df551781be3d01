//! [`StepStore`] for [`MysqlStore`]: inserting and reading steps and their
//! history. The status writes (claims, transitions, retry attempts) are in
//! [`super::claim`].

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{
    Error, HistoryId, Inserted, NewStep, Result, RunId, Step, StepAttempt, StepId, StepStatus,
    StepStore, StepTransition,
};

use super::tx::{Tx, begin, end, retry_conflicts};
use super::{Conn, MysqlStore, sql};
use crate::cached::CacheExt;
use crate::error::{backend, is_foreign_key_violation};
use crate::rows::{AttemptRow, StepRow, convert, joined_to_run};

/// A step to insert, validated and encoded.
struct StepInsert<'a> {
    id: StepId,
    step: &'a NewStep,
    input: String,
    retry_delay_ms: Option<i64>,
    now: i64,
}

impl StepStore for MysqlStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.run, name = %step.name))]
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        let encoded = self.config.limits.encode_step(&step)?;
        let input = encoded.input;
        let retry_delay_ms = encoded.retry_delay_ms.map(i64::from);
        let insert = StepInsert {
            id: StepId::generate(),
            step: &step,
            input,
            retry_delay_ms,
            now: self.now(),
        };
        let mut conn = self.pool.get("insert_step").await?;
        let row = retry_conflicts!("insert_step", insert_step(&mut conn, &insert).await).map_err(
            |err| {
                if is_foreign_key_violation(&err) {
                    Error::RunNotFound(step.run)
                } else {
                    backend("insert_step", err)
                }
            },
        )?;
        let record = Step::try_from(row)?;
        let inserted = record.id == insert.id;
        tracing::debug!(step = %record.id, inserted, "step inserted");
        Ok(Inserted { record, inserted })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn get_step(&self, id: StepId) -> Result<Step> {
        let mut conn = self.pool.get("get_step").await?;
        let row = diesel::sql_query(sql::SELECT_STEP)
            .bind::<Text, _>(id.to_string())
            .cached()
            .get_result::<StepRow>(&mut conn)
            .await
            .optional()
            .map_err(|err| backend("get_step", err))?;
        row.ok_or(Error::StepNotFound(id))?.try_into()
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        self.config.limits.check_key("step name", name)?;
        let mut conn = self.pool.get("find_step").await?;
        let row = select_step_by_name(&mut conn, run, name)
            .await
            .map_err(|err| backend("find_step", err))?;
        row.ok_or_else(|| Error::StepNameNotFound {
            run,
            name: name.to_owned(),
        })?
        .try_into()
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        let mut conn = self.pool.get("list_steps").await?;
        let rows = diesel::sql_query(sql::LIST_STEPS)
            .bind::<Text, _>(run.to_string())
            .cached()
            .load::<Option<StepRow>>(&mut conn)
            .await
            .map_err(|err| backend("list_steps", err))?;
        convert(joined_to_run(run, rows)?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id, to = %transition.target()))]
    async fn transition_step(&self, id: StepId, transition: StepTransition) -> Result<()> {
        self.transition(id, transition).await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn create_retry_attempt(&self, id: StepId, start: StepStatus) -> Result<()> {
        self.retry_attempt(id, start).await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn claim_step(&self, run: RunId, name: &str, function: &str) -> Result<Option<Step>> {
        self.claim(run, name, function).await
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        let mut conn = self.pool.get("step_history").await?;
        let rows = diesel::sql_query(sql::STEP_HISTORY)
            .bind::<Text, _>(run.to_string())
            .cached()
            .load::<Option<AttemptRow>>(&mut conn)
            .await
            .map_err(|err| backend("step_history", err))?;
        convert(joined_to_run(run, rows)?)
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.config.limits.check_key("branch", branch)?;
        let now = self.now();
        let mut conn = self.pool.get("set_branch_taken").await?;
        let matched = retry_conflicts!(
            "set_branch_taken",
            diesel::sql_query(sql::SET_BRANCH)
                .bind::<Text, _>(branch)
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(id.to_string())
                .cached()
                .execute(&mut conn)
                .await
        )
        .map_err(|err| backend("set_branch_taken", err))?;
        // CLIENT_FOUND_ROWS: a step already on this branch still counts.
        if matched == 0 {
            return Err(Error::StepNotFound(id));
        }
        Ok(())
    }
}

/// One step by run and name.
pub(super) async fn select_step_by_name(
    conn: &mut Conn,
    run: RunId,
    name: &str,
) -> diesel::QueryResult<Option<StepRow>> {
    diesel::sql_query(sql::SELECT_STEP_BY_NAME)
        .bind::<Text, _>(run.to_string())
        .bind::<Text, _>(name)
        .cached()
        .get_result::<StepRow>(conn)
        .await
        .optional()
}

/// Inserts a step and, if this call inserted it, its first history row, as
/// one transaction; answers the step that holds (run, name) afterwards.
async fn insert_step(conn: &mut Conn, insert: &StepInsert<'_>) -> diesel::QueryResult<StepRow> {
    let step = insert.step;
    begin(conn).await?;
    let body = async {
        diesel::sql_query(sql::INSERT_STEP)
            .bind::<Text, _>(insert.id.to_string())
            .bind::<Text, _>(step.run.to_string())
            .bind::<Text, _>(&step.name)
            .bind::<Nullable<Text>, _>(step.function.as_deref())
            .bind::<Text, _>(StepStatus::Pending.as_str())
            .bind::<Text, _>(&insert.input)
            .bind::<BigInt, _>(i64::from(step.retry.retries))
            .bind::<Nullable<BigInt>, _>(insert.retry_delay_ms)
            .bind::<BigInt, _>(insert.now)
            .bind::<BigInt, _>(insert.now)
            .cached()
            .execute(&mut *conn)
            .await?;
        // The upsert locked the row holding (run, name): this reads it,
        // whoever wrote it.
        let row = select_step_by_name(conn, step.run, &step.name)
            .await?
            .ok_or(diesel::result::Error::NotFound)?;
        if row.id == insert.id.to_string() {
            diesel::sql_query(sql::INSERT_FIRST_HISTORY)
                .bind::<Text, _>(HistoryId::generate().to_string())
                .bind::<Text, _>(insert.id.to_string())
                .bind::<Text, _>(StepStatus::Pending.as_str())
                .bind::<BigInt, _>(insert.now)
                .cached()
                .execute(&mut *conn)
                .await?;
        }
        Ok(Tx::Commit(row))
    }
    .await;
    end(conn, body).await
}
