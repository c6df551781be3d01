//! Step transitions and retry attempts on SQLite: one `BEGIN IMMEDIATE`
//! transaction each, exactly two writes and no read on success.
//!
//! 1. The status-guarded `UPDATE` of the step (guard from
//!    [`StepStatus::sources_of`]); its affected-row count decides.
//! 2. The history upsert `INSERT ... SELECT ... FROM flowstate_steps
//!    WHERE id = ? ON CONFLICT (step_id, attempt) DO UPDATE`, keyed on the
//!    step's `current_attempt` as the UPDATE left it, so the live attempt's
//!    row moves with the step and a missing one is recreated.
//!
//! Only when the UPDATE matched nothing is the step read (error path), to
//! answer not-found or illegal-move through [`step_transition_refused`].

use diesel::sql_types::{BigInt, Text};
use diesel::{OptionalExtension, RunQueryDsl, SqliteConnection};
use flowstate_core::error::InvalidInput;
use flowstate_core::{Error, HistoryId, Result, StepId, StepStatus, StepTransition};

use super::guards;
use super::query::Sql;
use super::sql;
use super::{Fail, SqliteStore};
use crate::guard::step_transition_refused;
use crate::rows::StatusRow;

impl SqliteStore {
    /// [`StepStore::transition_step`](flowstate_core::StepStore::transition_step).
    #[tracing::instrument(level = "debug", skip(self, transition), fields(to = %transition.target()))]
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
        self.write("transition_step", move |conn| {
            let statements = guards::status_sql(to);
            let moved = match payload {
                Some(payload) => Sql::new(statements.transition.as_str())
                    .bind::<BigInt, _>(now)
                    .bind::<Text, _>(id.to_string())
                    .bind::<Text, _>(payload)
                    .execute(conn)?,
                None => Sql::new(statements.transition.as_str())
                    .bind::<BigInt, _>(now)
                    .bind::<Text, _>(id.to_string())
                    .execute(conn)?,
            };
            if moved == 0 {
                return Err(refused(conn, id, to));
            }
            upsert_history(conn, id, to, now)
        })
        .await
    }

    /// [`StepStore::create_retry_attempt`](flowstate_core::StepStore::create_retry_attempt).
    #[tracing::instrument(level = "debug", skip(self))]
    pub(super) async fn retry_attempt(&self, id: StepId, start: StepStatus) -> Result<()> {
        if !StepStatus::RETRY_STARTS.contains(&start) {
            return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: "retry start",
                detail: format!("a retry starts pending or running, not {start}"),
            }));
        }
        let now = self.now();
        self.write("create_retry_attempt", move |conn| {
            let moved = Sql::new(guards::retry_attempt(start))
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(id.to_string())
                .execute(conn)?;
            if moved == 0 {
                return Err(refused(conn, id, start));
            }
            upsert_history(conn, id, start, now)
        })
        .await
    }
}

/// Writes the history row of the step's current attempt at status `to`.
fn upsert_history(
    conn: &mut SqliteConnection,
    id: StepId,
    to: StepStatus,
    now: i64,
) -> Result<(), Fail> {
    Sql::new(guards::status_sql(to).history.as_str())
        .bind::<Text, _>(HistoryId::generate().to_string())
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(id.to_string())
        .execute(conn)?;
    Ok(())
}

/// Why a guarded move of step `id` to `to` matched nothing (one read).
fn refused(conn: &mut SqliteConnection, id: StepId, to: StepStatus) -> Fail {
    let current: std::result::Result<Option<StatusRow>, _> = Sql::new(sql::STEP_STATUS)
        .bind::<Text, _>(id.to_string())
        .get_result(conn)
        .optional();
    match current {
        Ok(current) => Fail::Port(step_transition_refused(
            id,
            current.as_ref().map(|r| r.status.as_str()),
            to,
        )),
        Err(err) => Fail::Db(err),
    }
}
