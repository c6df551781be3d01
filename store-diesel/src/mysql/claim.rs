//! The claim on MySQL: two statements, no transaction around them.
//!
//! The status-guarded `UPDATE` by (run, name) decides, and the trigger of
//! migration `2026-12-06-000019_move_history` (the claim's since
//! `2026-12-01-000008_claim_history`) writes the attempt's history row
//! inside that same statement, so the move and its history commit
//! together. Then a `SELECT` reads the step: on a win the step as the claim
//! left it, by itself (nothing else moves a running step but its claimer,
//! or a deletion, which answers not found; the `UPDATE`'s guard saw its
//! run unsettled, so the run's status is not read again); on a loss the
//! step with its run's status, to say why.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::{ClaimOutcome, HistoryId, Result, RunId, Step};

use super::Pool;
use super::sql::CLAIM;
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::conflict::retry_conflicts;
use crate::error::backend;
use crate::guard::claim_lost;
use crate::rows::StepRow;
use crate::schema::{flowstate_runs as runs, flowstate_steps as steps};

/// [`StepStore::claim_step_outcome`](flowstate_core::ports::StepStore::claim_step_outcome), its
/// name and function already checked.
pub(super) async fn claim(
    pool: &Pool,
    config: &StoreConfig,
    run: RunId,
    name: &str,
    function: &str,
) -> Result<ClaimOutcome> {
    let now = config.clock.now().as_micros();
    let deadline = (config.lease_offset_us(), config.claim_default_us());
    let run_text = run.to_string();
    let mut conn = pool.get("claim_step").await?;
    let (won, row) = retry_conflicts!(
        "claim_step",
        claim_once(&mut conn, now, deadline, &run_text, name, function).await,
        renew: conn = pool
    )
    .map_err(|err| backend("claim_step", err))?;
    let found = row
        .map(|(row, run_status)| Ok::<_, flowstate_core::Error>((Step::try_from(row)?, run_status)))
        .transpose()?;
    match found {
        Some((step, _)) if won => {
            tracing::debug!(step = %step.id, attempt = step.attempt, "step claimed");
            Ok(ClaimOutcome::Claimed(step))
        }
        found => claim_lost(
            run,
            name,
            function,
            found
                .as_ref()
                .map(|(step, status)| (step, status.as_deref())),
        ),
    }
}

/// The claim's two statements: whether it won, and the step as it is
/// after, with its run's status when it lost (a win's run was unsettled:
/// the `UPDATE`'s guard read it, and the join was part of what made the
/// read-back 90 µs against the hand-written baseline's 48: SCHEMA.md, "The
/// per-step path on MariaDB against hand-written SQL").
async fn claim_once(
    conn: &mut AsyncMysqlConnection,
    now: i64,
    (offset, default_us): (i64, i64),
    run: &str,
    name: &str,
    function: &str,
) -> diesel::QueryResult<(bool, Option<(StepRow, Option<String>)>)> {
    let won = diesel::sql_query(CLAIM.as_str())
        .bind::<Text, _>(HistoryId::generate().to_string())
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(offset)
        .bind::<BigInt, _>(default_us)
        .bind::<Text, _>(run)
        .bind::<Text, _>(name)
        .bind::<Text, _>(function)
        .cached()
        .execute(conn)
        .await?
        == 1;
    let step = if won {
        steps::table
            .filter(steps::run_id.eq(run))
            .filter(steps::name.eq(name))
            .select(StepRow::as_select())
            .first(conn)
            .await
            .optional()?
            .map(|row| (row, None))
    } else {
        steps::table
            .inner_join(runs::table)
            .filter(steps::run_id.eq(run))
            .filter(steps::name.eq(name))
            .select((StepRow::as_select(), runs::status))
            .first(conn)
            .await
            .optional()?
            .map(|(row, status)| (row, Some(status)))
    };
    Ok((won, step))
}
