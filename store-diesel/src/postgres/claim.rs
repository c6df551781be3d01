//! The claim: [`ClaimDecision`](flowstate_core::ClaimDecision) carried out
//! as one statement, win or lose.
//!
//! Under READ COMMITTED a racing claim blocks on the row, then re-checks the
//! guard on the version the winner committed, finds `running` and matches
//! nothing: exactly one claim wins. A loser gets the step as its snapshot
//! saw it in the same round trip, enough for [`claim_lost`] to tell no step,
//! a function mismatch (the pinned function never changes) or why nothing
//! was claimed.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::{ClaimOutcome, HistoryId, Result, RunId, Step};

use super::Pool;
use super::sql::CLAIM;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::error::backend;
use crate::guard::claim_lost;
use crate::rows::StepRow;

/// The claim's answer: the step, and whether this claim moved it.
#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = Bool)]
    won: bool,
    /// The run's status, when the claim lost.
    #[diesel(sql_type = Nullable<Text>)]
    run_status: Option<String>,
    #[diesel(embed)]
    step: StepRow,
}

/// [`StepStore::claim_step_outcome`](flowstate_core::ports::StepStore::claim_step_outcome), its
/// name and function already checked.
pub(super) async fn claim(
    pool: &Pool,
    config: &StoreConfig,
    run: RunId,
    name: &str,
    function: &str,
) -> Result<ClaimOutcome> {
    let mut conn = pool.get("claim_step").await?;
    let rows: Vec<ClaimRow> = diesel::sql_query(CLAIM.as_str())
        .bind::<BigInt, _>(config.clock.now().as_micros())
        .bind::<Text, _>(run.to_string())
        .bind::<Text, _>(name)
        .bind::<Text, _>(function)
        .bind::<Text, _>(HistoryId::generate().to_string())
        .bind::<BigInt, _>(config.lease_offset_us())
        .bind::<BigInt, _>(config.claim_default_us())
        .cached()
        .load(&mut *conn)
        .await
        .map_err(|err| backend("claim_step", err))?;
    match rows.into_iter().next() {
        Some(row) if row.won => {
            let step = Step::try_from(row.step)?;
            tracing::debug!(step = %step.id, attempt = step.attempt, "step claimed");
            Ok(ClaimOutcome::Claimed(step))
        }
        Some(row) => claim_lost(
            run,
            name,
            function,
            Some((&Step::try_from(row.step)?, row.run_status.as_deref())),
        ),
        None => claim_lost(run, name, function, None),
    }
}
