//! The status writes of [`MysqlStore`]: claims, step transitions and retry
//! attempts, each one transaction whose status-guarded `UPDATE` decides.
//!
//! - claim: `BEGIN`, the guarded `UPDATE` by (run, name); on a win the
//!   history upsert and a `SELECT` of the claimed (locked) step, `COMMIT`;
//!   on a loss a `SELECT` of the step to say why, `ROLLBACK`.
//! - transition and retry attempt: `BEGIN`, the guarded `UPDATE` by id, the
//!   history upsert `INSERT ... SELECT ... ON DUPLICATE KEY UPDATE` copying
//!   the step row just written, `COMMIT`: two writes, no read. If the
//!   `UPDATE` matched nothing: `ROLLBACK`, then one read of the status, on
//!   the error path only.

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::error::InvalidInput;
use flowstate_core::{Error, HistoryId, Result, RunId, Step, StepId, StepStatus, StepTransition};

use super::steps::select_step_by_name;
use super::tx::{Tx, begin, end, retry_conflicts};
use super::{Conn, MysqlStore, sql};
use crate::cached::CacheExt;
use crate::error::backend;
use crate::guard::{claim_lost, step_transition_refused};
use crate::rows::{StatusRow, StepRow};

/// What a claim's transaction found.
enum Claim {
    /// This call moved the step; it is as read after the claim.
    Won(StepRow),
    /// The guard matched nothing; the step as it is (if it exists).
    Lost(Option<StepRow>),
}

/// A guarded step write and its history upsert, with their binds.
struct GuardedWrite<'a> {
    id: StepId,
    sql: &'a sql::TransitionSql,
    /// The status the step moves to.
    to: StepStatus,
    /// The result or error, for the transitions that carry one.
    payload: Option<String>,
    /// The time stamped on the history row's status column, if any.
    stamp: Option<i64>,
    now: i64,
}

impl MysqlStore {
    /// [`flowstate_core::StepStore::claim_step`].
    pub(super) async fn claim(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<Option<Step>> {
        self.config.limits.check_key("step name", name)?;
        self.config.limits.check_key("function", function)?;
        let now = self.now();
        let mut conn = self.pool.get("claim_step").await?;
        let claim = retry_conflicts!(
            "claim_step",
            claim_step(&mut conn, run, name, function, now).await
        )
        .map_err(|err| backend("claim_step", err))?;
        match claim {
            Claim::Won(row) => {
                let step = Step::try_from(row)?;
                tracing::debug!(step = %step.id, attempt = step.attempt, "step claimed");
                Ok(Some(step))
            }
            Claim::Lost(row) => {
                let step = row.map(Step::try_from).transpose()?;
                claim_lost(run, name, function, step.as_ref())
            }
        }
    }

    /// [`flowstate_core::StepStore::transition_step`].
    pub(super) async fn transition(&self, id: StepId, transition: StepTransition) -> Result<()> {
        let to = transition.target();
        let payload = match &transition {
            StepTransition::Succeeded(result) => {
                Some(self.config.limits.encode("step result", result)?)
            }
            StepTransition::Failed(error) => Some(self.config.limits.encode("step error", error)?),
            StepTransition::Running | StepTransition::Scheduled => None,
        };
        let now = self.now();
        let Some(statements) = sql::transition(to) else {
            // Nothing may move there in place: refuse as the table says.
            let mut conn = self.pool.get("transition_step").await?;
            let current = select_status(&mut conn, id)
                .await
                .map_err(|err| backend("transition_step", err))?;
            return Err(step_transition_refused(id, current.as_deref(), to));
        };
        let write = GuardedWrite {
            id,
            sql: statements,
            to,
            payload,
            stamp: Some(now),
            now,
        };
        self.guarded_write("transition_step", &write).await
    }

    /// [`flowstate_core::StepStore::create_retry_attempt`].
    pub(super) async fn retry_attempt(&self, id: StepId, start: StepStatus) -> Result<()> {
        if !StepStatus::RETRY_STARTS.contains(&start) {
            return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: "retry start",
                detail: format!("a retry starts pending or running, not {start}"),
            }));
        }
        let now = self.now();
        let write = GuardedWrite {
            id,
            sql: &sql::RETRY_ATTEMPT,
            to: start,
            payload: None,
            stamp: (start == StepStatus::Running).then_some(now),
            now,
        };
        self.guarded_write("create_retry_attempt", &write).await
    }

    /// Runs `write` (retrying conflicts); if its guard matched nothing, reads
    /// the step's status once to say why.
    async fn guarded_write(&self, op: &'static str, write: &GuardedWrite<'_>) -> Result<()> {
        let mut conn = self.pool.get(op).await?;
        let moved = retry_conflicts!(op, step_and_history(&mut conn, write).await)
            .map_err(|err| backend(op, err))?;
        if moved {
            return Ok(());
        }
        let current = select_status(&mut conn, write.id)
            .await
            .map_err(|err| backend(op, err))?;
        Err(step_transition_refused(
            write.id,
            current.as_deref(),
            write.to,
        ))
    }
}

/// The claim's transaction.
async fn claim_step(
    conn: &mut Conn,
    run: RunId,
    name: &str,
    function: &str,
    now: i64,
) -> diesel::QueryResult<Claim> {
    begin(conn).await?;
    let body = async {
        let won = diesel::sql_query(sql::CLAIM_STEP.as_str())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(name)
            .bind::<Text, _>(function)
            .cached()
            .execute(&mut *conn)
            .await?;
        if won == 0 {
            let step = select_step_by_name(&mut *conn, run, name).await?;
            return Ok(Tx::Rollback(Claim::Lost(step)));
        }
        diesel::sql_query(sql::CLAIM_HISTORY)
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(now)
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(run.to_string())
            .bind::<Text, _>(name)
            .cached()
            .execute(&mut *conn)
            .await?;
        let step = select_step_by_name(&mut *conn, run, name)
            .await?
            .ok_or(diesel::result::Error::NotFound)?;
        Ok(Tx::Commit(Claim::Won(step)))
    }
    .await;
    end(conn, body).await
}

/// A guarded step write and its history upsert, as one transaction:
/// answers whether the guard matched (and both rows were written).
async fn step_and_history(conn: &mut Conn, write: &GuardedWrite<'_>) -> diesel::QueryResult<bool> {
    let id = write.id.to_string();
    begin(conn).await?;
    let body = async {
        let mut update = diesel::sql_query(write.sql.update.as_str())
            .into_boxed()
            .bind::<Text, _>(write.to.as_str());
        if let Some(payload) = &write.payload {
            update = update.bind::<Text, _>(payload.as_str());
        }
        let moved = update
            .bind::<BigInt, _>(write.now)
            .bind::<Text, _>(id.as_str())
            .cached()
            .execute(&mut *conn)
            .await?;
        if moved == 0 {
            return Ok(Tx::Rollback(false));
        }
        diesel::sql_query(write.sql.history.as_str())
            .bind::<Text, _>(HistoryId::generate().to_string())
            .bind::<BigInt, _>(write.now)
            .bind::<Nullable<BigInt>, _>(write.stamp)
            .bind::<Text, _>(&id)
            .cached()
            .execute(&mut *conn)
            .await?;
        Ok(Tx::Commit(true))
    }
    .await;
    end(conn, body).await
}

/// A step's status, or `None` if there is no such step.
async fn select_status(conn: &mut Conn, id: StepId) -> diesel::QueryResult<Option<String>> {
    Ok(diesel::sql_query(sql::SELECT_STEP_STATUS)
        .bind::<Text, _>(id.to_string())
        .cached()
        .get_result::<StatusRow>(conn)
        .await
        .optional()?
        .map(|row| row.status))
}
