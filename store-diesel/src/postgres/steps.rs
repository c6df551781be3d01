//! [`StepStore`] for [`PgStore`]: inserting and reading steps and their
//! history. Claims are in `claim.rs`, transitions and retries in `state.rs`.

use std::sync::LazyLock;

use diesel::sql_query;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{
    Error, HistoryId, Inserted, NewStep, Result, RunId, Step, StepAttempt, StepId, StepStatus,
    StepStore, StepTransition,
};

use super::PgStore;
use super::runs::IDEMPOTENT_TRIES;
use super::sql::{ATTEMPT_COLUMNS, STEP_COLUMNS, cached};
use crate::error::{backend, is_foreign_key_violation};
use crate::rows::{AttemptRow, StepRow, convert, joined_to_run};

/// The step and its first history row (attempt 1, pending), in one
/// statement; nothing if the run already has a step of that name.
static INSERT_STEP: LazyLock<String> = LazyLock::new(|| {
    let pending = StepStatus::Pending.as_str();
    format!(
        "WITH s AS (\
            INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, \
                current_attempt, retries, retry_delay_ms, created_at, updated_at) \
            VALUES ($1, $2, $3, $4, '{pending}', $5::jsonb, 1, $6, $7, $8, $8) \
            ON CONFLICT (run_id, name) DO NOTHING RETURNING *\
        ), history AS (\
            INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at) \
            SELECT $9, s.id, s.current_attempt, '{pending}', $8 FROM s\
        ) \
        SELECT {STEP_COLUMNS} FROM s"
    )
});

static GET_STEP: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {STEP_COLUMNS} FROM flowstate_steps AS s WHERE s.id = $1"));

/// Also the fallback read of an `insert_step` that inserted nothing.
pub(super) static FIND_STEP: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {STEP_COLUMNS} FROM flowstate_steps AS s WHERE s.run_id = $1 AND s.name = $2")
});

static LIST_STEPS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {STEP_COLUMNS} FROM flowstate_runs AS r \
         LEFT JOIN flowstate_steps AS s ON s.run_id = r.id \
         WHERE r.id = $1 ORDER BY s.created_at, s.name"
    )
});

static STEP_HISTORY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {ATTEMPT_COLUMNS} FROM flowstate_runs AS r \
         LEFT JOIN flowstate_steps AS s ON s.run_id = r.id \
         LEFT JOIN flowstate_step_history AS h ON h.step_id = s.id \
         WHERE r.id = $1 ORDER BY h.created_at, h.attempt, h.id"
    )
});

impl PgStore {
    /// Reads step `name` of `run`, if it exists.
    pub(super) async fn step_by_name(
        &self,
        operation: &'static str,
        run: RunId,
        name: &str,
    ) -> Result<Option<Step>> {
        let mut conn = self.pool.get(operation).await?;
        let rows: Vec<StepRow> = cached(
            sql_query(FIND_STEP.as_str())
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(name),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend(operation, err))?;
        rows.into_iter().next().map(Step::try_from).transpose()
    }
}

impl StepStore for PgStore {
    #[tracing::instrument(level = "debug", skip_all, fields(run = %step.run, name = %step.name))]
    async fn insert_step(&self, step: NewStep) -> Result<Inserted<Step>> {
        let encoded = self.config.limits.encode_step(&step)?;
        let input = encoded.input;
        let delay_ms = encoded.retry_delay_ms.map(i64::from);
        for _ in 0..IDEMPOTENT_TRIES {
            let id = StepId::generate();
            let mut conn = self.pool.get("insert_step").await?;
            let rows: Vec<StepRow> = cached(
                sql_query(INSERT_STEP.as_str())
                    .bind::<Text, _>(id.to_string())
                    .bind::<Text, _>(step.run.to_string())
                    .bind::<Text, _>(&step.name)
                    .bind::<Nullable<Text>, _>(step.function.as_deref())
                    .bind::<Text, _>(&input)
                    .bind::<BigInt, _>(i64::from(step.retry.retries))
                    .bind::<Nullable<BigInt>, _>(delay_ms)
                    .bind::<BigInt, _>(self.now().as_micros())
                    .bind::<Text, _>(HistoryId::generate().to_string()),
            )
            .load(&mut *conn)
            .await
            .map_err(|err| {
                if is_foreign_key_violation(&err) {
                    Error::RunNotFound(step.run)
                } else {
                    backend("insert_step", err)
                }
            })?;
            drop(conn);
            if let Some(row) = rows.into_iter().next() {
                let record = Step::try_from(row)?;
                return Ok(Inserted {
                    inserted: record.id == id,
                    record,
                });
            }
            // The name is taken: read the step holding it, in a statement of
            // its own so it sees a racing insert that committed meanwhile.
            if let Some(record) = self
                .step_by_name("insert_step", step.run, &step.name)
                .await?
            {
                return Ok(Inserted {
                    record,
                    inserted: false,
                });
            }
        }
        Err(Error::backend(
            "insert_step",
            true,
            "the step holding this name kept disappearing",
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id))]
    async fn get_step(&self, id: StepId) -> Result<Step> {
        let mut conn = self.pool.get("get_step").await?;
        let rows: Vec<StepRow> =
            cached(sql_query(GET_STEP.as_str()).bind::<Text, _>(id.to_string()))
                .load(&mut *conn)
                .await
                .map_err(|err| backend("get_step", err))?;
        rows.into_iter()
            .next()
            .map_or(Err(Error::StepNotFound(id)), Step::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run, name = %name))]
    async fn find_step(&self, run: RunId, name: &str) -> Result<Step> {
        self.config.limits.check_key("step name", name)?;
        self.step_by_name("find_step", run, name)
            .await?
            .ok_or_else(|| Error::StepNameNotFound {
                run,
                name: name.to_owned(),
            })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn list_steps(&self, run: RunId) -> Result<Vec<Step>> {
        let mut conn = self.pool.get("list_steps").await?;
        let rows: Vec<Option<StepRow>> =
            cached(sql_query(LIST_STEPS.as_str()).bind::<Text, _>(run.to_string()))
                .load(&mut *conn)
                .await
                .map_err(|err| backend("list_steps", err))?;
        convert(joined_to_run(run, rows)?)
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

    #[tracing::instrument(level = "debug", skip_all, fields(run = %run))]
    async fn step_history(&self, run: RunId) -> Result<Vec<StepAttempt>> {
        let mut conn = self.pool.get("step_history").await?;
        let rows: Vec<Option<AttemptRow>> =
            cached(sql_query(STEP_HISTORY.as_str()).bind::<Text, _>(run.to_string()))
                .load(&mut *conn)
                .await
                .map_err(|err| backend("step_history", err))?;
        convert(joined_to_run(run, rows)?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(step = %id))]
    async fn set_branch_taken(&self, id: StepId, branch: &str) -> Result<()> {
        self.config.limits.check_key("branch", branch)?;
        let mut conn = self.pool.get("set_branch_taken").await?;
        let updated = cached(
            sql_query(
                "UPDATE flowstate_steps SET branch_taken = $2, updated_at = $3 WHERE id = $1",
            )
            .bind::<Text, _>(id.to_string())
            .bind::<Text, _>(branch)
            .bind::<BigInt, _>(self.now().as_micros()),
        )
        .execute(&mut *conn)
        .await
        .map_err(|err| backend("set_branch_taken", err))?;
        if updated == 0 {
            return Err(Error::StepNotFound(id));
        }
        Ok(())
    }
}
