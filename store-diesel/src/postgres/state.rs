//! Step transitions and retry attempts: the step row and its current
//! attempt's history row written by one statement that reads nothing first.
//!
//! The statement's final `SELECT` reports the step's status in its
//! snapshot, so a refused move is diagnosed in the same round trip. Only
//! when that status could have moved (another writer won a race after the
//! snapshot) is the step read again, to report what it is now.

use diesel::QueryableByName;
use diesel::sql_query;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::error::InvalidInput;
use flowstate_core::{Error, HistoryId, Result, StepId, StepStatus, StepStore, StepTransition};

use super::PgStore;
use super::sql::{self, cached};
use crate::error::backend;
use crate::guard::step_transition_refused;
use crate::rows::parse_status;

/// What a guarded step write found and did.
#[derive(QueryableByName)]
struct MoveRow {
    /// The step's status in the statement's snapshot.
    #[diesel(sql_type = Text)]
    status: String,
    /// Whether the guarded `UPDATE` matched.
    #[diesel(sql_type = Bool)]
    moved: bool,
}

impl PgStore {
    /// [`StepStore::transition_step`].
    #[tracing::instrument(level = "debug", skip_all, fields(step = %id, to = %transition.target()))]
    pub(super) async fn transition(&self, id: StepId, transition: StepTransition) -> Result<()> {
        let limits = &self.config.limits;
        let payload = match &transition {
            StepTransition::Succeeded(result) => Some(limits.encode("step result", result)?),
            StepTransition::Failed(error) => Some(limits.encode("step error", error)?),
            StepTransition::Running | StepTransition::Scheduled => None,
        };
        let to = transition.target();
        let query = sql_query(sql::transition(to))
            .bind::<Text, _>(id.to_string())
            .bind::<BigInt, _>(self.now().as_micros())
            .bind::<Text, _>(HistoryId::generate().to_string());
        let mut conn = self.pool.get("transition_step").await?;
        let rows: Vec<MoveRow> = match &payload {
            Some(json) => cached(query.bind::<Text, _>(json)).load(&mut *conn).await,
            None => cached(query).load(&mut *conn).await,
        }
        .map_err(|err| backend("transition_step", err))?;
        drop(conn);
        self.moved_or_refused(id, rows, |from| from.can_transition_to(to), to)
            .await
    }

    /// [`StepStore::create_retry_attempt`].
    #[tracing::instrument(level = "debug", skip_all, fields(step = %id, start = %start))]
    pub(super) async fn retry_attempt(&self, id: StepId, start: StepStatus) -> Result<()> {
        if !StepStatus::RETRY_STARTS.contains(&start) {
            return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                field: "retry start",
                detail: format!("a retry starts pending or running, not {start}"),
            }));
        }
        let mut conn = self.pool.get("create_retry_attempt").await?;
        let rows: Vec<MoveRow> = cached(
            sql_query(sql::retry(start))
                .bind::<Text, _>(id.to_string())
                .bind::<BigInt, _>(self.now().as_micros())
                .bind::<Text, _>(HistoryId::generate().to_string()),
        )
        .load(&mut *conn)
        .await
        .map_err(|err| backend("create_retry_attempt", err))?;
        drop(conn);
        self.moved_or_refused(id, rows, |from| from == StepStatus::Failed, start)
            .await
    }

    /// `Ok` if the guarded write moved the step; otherwise the typed
    /// refusal. `could_move` says whether the snapshot's status passes the
    /// guard: if it does, a racing writer changed the step after the
    /// snapshot, and the step is read again to name what it is now.
    async fn moved_or_refused(
        &self,
        id: StepId,
        rows: Vec<MoveRow>,
        could_move: impl Fn(StepStatus) -> bool,
        to: StepStatus,
    ) -> Result<()> {
        let Some(row) = rows.into_iter().next() else {
            return Err(Error::StepNotFound(id));
        };
        if row.moved {
            return Ok(());
        }
        let raced = parse_status::<StepStatus>(&id.to_string(), &row.status).is_ok_and(could_move);
        if !raced {
            return Err(step_transition_refused(id, Some(&row.status), to));
        }
        match self.get_step(id).await {
            Ok(now) => Err(step_transition_refused(id, Some(now.status.as_str()), to)),
            Err(err) => Err(err),
        }
    }
}
