//! The claim on SQLite: one `BEGIN IMMEDIATE` transaction.
//!
//! 1. The guarded `UPDATE ... RETURNING`: the returned row is the claimed
//!    step, and SQLite's write lock makes the guard see every earlier
//!    claim, so of any number of racing claims one gets the row.
//! 2. On a win, the history upsert of `(step, current_attempt)`.
//! 3. On a loss (no row), one read of the step, in the same transaction, to
//!    answer through [`claim_lost`].

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

use flowstate_core::{ClaimOutcome, HistoryId, Result, RunId, Step, StepStatus};

use super::sql::{CLAIM, MOVES};
use super::{Pool, write, wrote};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::guard::claim_lost;
use crate::rows::StepRow;
use crate::schema::{flowstate_runs as runs, flowstate_steps as steps};
use crate::sql::Move;

/// [`StepStore::claim_step_outcome`](flowstate_core::ports::StepStore::claim_step_outcome), its
/// name and function already checked.
pub(super) async fn claim(
    pool: &Pool,
    config: &StoreConfig,
    run: RunId,
    name: &str,
    function: &str,
) -> Result<ClaimOutcome> {
    let (name, function) = (name.to_owned(), function.to_owned());
    let now = config.clock.now().as_micros();
    let (offset, default_us) = (config.lease_offset_us(), config.claim_default_us());
    write(pool, "claim_step", move |conn| {
        let run_text = run.to_string();
        let claimed: Option<StepRow> = diesel::sql_query(CLAIM.as_str())
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(&run_text)
            .bind::<Text, _>(&name)
            .bind::<Text, _>(&function)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(default_us)
            .cached()
            .get_result(conn)
            .optional()?;
        if let Some(row) = claimed {
            let step = Step::try_from(row)?;
            let history = MOVES
                .get(Move::Transition(StepStatus::Running))
                .history
                .as_str();
            let history = diesel::sql_query(history)
                .bind::<Text, _>(HistoryId::generate().to_string())
                .bind::<BigInt, _>(now)
                .bind::<Text, _>(step.id.to_string());
            wrote(conn, history)?;
            tracing::debug!(step = %step.id, attempt = step.attempt, "step claimed");
            return Ok(ClaimOutcome::Claimed(step));
        }
        // Error path only: why nothing was claimed.
        let current: Option<(StepRow, String)> = steps::table
            .inner_join(runs::table)
            .filter(steps::run_id.eq(&run_text))
            .filter(steps::name.eq(&name))
            .select((StepRow::as_select(), runs::status))
            .first(conn)
            .optional()?;
        let current = current
            .map(|(row, status)| Ok::<_, flowstate_core::Error>((Step::try_from(row)?, status)))
            .transpose()?;
        let found = current
            .as_ref()
            .map(|(step, status)| (step, Some(status.as_str())));
        Ok(claim_lost(run, &name, &function, found)?)
    })
    .await
}
