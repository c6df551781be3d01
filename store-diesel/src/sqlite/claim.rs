//! The claim on SQLite: one `BEGIN IMMEDIATE` transaction.
//!
//! 1. `UPDATE flowstate_steps ... RETURNING`, guarded exactly as
//!    [`ClaimDecision`](flowstate_core::ClaimDecision) decides: the
//!    RETURNING row is the claimed step, and SQLite's write lock makes the
//!    guard see every earlier claim, so of any number of racing claims one
//!    gets the row.
//! 2. On a win, the history upsert of `(step, current_attempt)`: a fresh
//!    claim moves its row to running (recreating it if missing), a retry
//!    inserts the new attempt's row.
//! 3. On a loss (no row), one read of the step, in the same transaction, to
//!    answer through [`claim_lost`]: unknown step, refused function, or
//!    simply `None`.

use diesel::sql_types::{BigInt, Text};
use diesel::{OptionalExtension, RunQueryDsl};
use flowstate_core::{HistoryId, Result, RunId, Step, StepStatus};

use super::SqliteStore;
use super::guards;
use super::query::Sql;
use super::sql;
use crate::guard::claim_lost;
use crate::rows::StepRow;

impl SqliteStore {
    /// [`StepStore::claim_step`](flowstate_core::StepStore::claim_step).
    #[tracing::instrument(level = "debug", skip(self))]
    pub(super) async fn claim(
        &self,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<Option<Step>> {
        let limits = &self.config.limits;
        limits.check_key("step name", name)?;
        limits.check_key("function", function)?;
        let (name, function) = (name.to_owned(), function.to_owned());
        let now = self.now();
        self.write("claim_step", move |conn| {
            let claimed: Option<StepRow> = Sql::new(guards::CLAIM.as_str())
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(&name)
                .bind::<Text, _>(&function)
                .get_result(conn)
                .optional()?;
            if let Some(row) = claimed {
                let step = Step::try_from(row)?;
                Sql::new(guards::status_sql(StepStatus::Running).history.as_str())
                    .bind::<Text, _>(HistoryId::generate().to_string())
                    .bind::<BigInt, _>(now)
                    .bind::<Text, _>(step.id.to_string())
                    .execute(conn)?;
                tracing::debug!(step = %step.id, attempt = step.attempt, "claimed");
                return Ok(Some(step));
            }
            // Error path only: why nothing was claimed.
            let current: Option<StepRow> = Sql::new(sql::FIND_STEP)
                .bind::<Text, _>(run.to_string())
                .bind::<Text, _>(&name)
                .get_result(conn)
                .optional()?;
            let current = current.map(Step::try_from).transpose()?;
            Ok(claim_lost(run, &name, &function, current.as_ref())?)
        })
        .await
    }
}
