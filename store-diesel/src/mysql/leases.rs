//! The run claim on MySQL 8 / MariaDB 10.6+: one transaction.
//!
//! MySQL has no `UPDATE ... RETURNING` and cannot `UPDATE` a table it
//! selects from in a subquery, so the runs are taken first:
//! `SELECT id ... FOR UPDATE SKIP LOCKED` over the runnable runs (forced
//! onto `flowstate_runs_leasable`, on a virtual column of the leasable
//! statuses, see [`pick_sql`]), which locks what it answers and skips what other claims
//! hold; then the `UPDATE` of exactly those ids, and the
//! runs read back, in the same transaction. Runs with a cancel requested
//! are taken and settled the same way, before. Sleeping and waiting runs
//! are left out by [`crate::sql::waits::awake`]. The time is the server's
//! ([`crate::lease_clock`]).

use std::sync::LazyLock;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::lease::lease_micros;
use flowstate_core::{Result, RunStatus};

use super::{Pool, transaction};
use crate::cached::CacheExt;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::rows::IdRow;
use crate::rows::leases::LeasedRunRow;
use crate::schema::flowstate_runs as runs;
use crate::sql::typed::{db_time, now_sql};

/// What one claim binds.
struct Claim<'a> {
    worker: &'a str,
    n: i64,
    offset: i64,
    until: i64,
    now: i64,
}

/// [`RunLeaseStore::claim_runs`](flowstate_core::ports::RunLeaseStore::claim_runs),
/// its input already checked: the runs it leased, as written.
pub(super) async fn claim_runs(
    pool: &Pool,
    config: &StoreConfig,
    worker: &str,
    n: u32,
    lease_for: Duration,
) -> Result<Vec<LeasedRunRow>> {
    let offset = config.lease_offset_us();
    let claim = Claim {
        worker,
        n: i64::from(n),
        offset,
        until: offset.saturating_add(lease_micros(lease_for)),
        now: config.clock.now().as_micros(),
    };
    transaction!(pool, "claim_run", |conn| {
        let cancelled = pick(conn, &claim, true).await?;
        if !cancelled.is_empty() {
            diesel::update(runs::table.filter(runs::id.eq_any(&cancelled)))
                .set((
                    runs::status.eq(RunStatus::Cancelled.as_str()),
                    runs::updated_at.eq(claim.now),
                    runs::lease_token.eq(runs::lease_token + 1),
                    runs::lease_owner.eq(None::<String>),
                    runs::lease_expires_at.eq(None::<i64>),
                    runs::cancel_requested.eq(false),
                    runs::wake_at.eq(None::<i64>),
                    runs::waiting_on.eq(None::<String>),
                ))
                .execute(conn)
                .await?;
        }
        let ids = pick(conn, &claim, false).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        diesel::update(runs::table.filter(runs::id.eq_any(&ids)))
            .set((
                runs::lease_token.eq(runs::lease_token + 1),
                runs::lease_owner.eq(claim.worker),
                runs::lease_expires_at.eq(db_time(now_sql(&*conn), claim.until)),
                runs::wake_at.eq(None::<i64>),
                runs::waiting_on.eq(None::<String>),
            ))
            .execute(conn)
            .await?;
        runs::table
            .filter(runs::id.eq_any(&ids))
            .select(LeasedRunRow::as_select())
            .load(conn)
            .await
    })
    .map_err(|err| backend("claim_run", err))
}

/// The pick of up to `n` runnable runs with (`1`) or without (`0`) a
/// cancel requested, locked. Binds: the lease clock offset (twice), how
/// many.
///
/// `FORCE INDEX` names `flowstate_runs_leasable` (migration
/// `2026-12-01-000007_lease_claim`, on the virtual column `leasable`, 1 for
/// the leasable statuses): otherwise MariaDB walks `flowstate_runs_created`,
/// the `ORDER BY`'s own index, and reads and locks every settled run older
/// than the first runnable one (SCHEMA.md, Decisions, "MySQL's run claim
/// index"). The DSL
/// has no index hint, so this pick is written out.
fn pick_sql(cancel: u8) -> String {
    let now = <AsyncMysqlConnection as Connection>::NOW_US;
    format!(
        "SELECT id FROM flowstate_runs FORCE INDEX (flowstate_runs_leasable) \
         WHERE leasable = 1 AND cancel_requested = {cancel} AND {runnable} \
         ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
        runnable = crate::sql::waits::runnable_sql(&format!("{now} + ?")),
    )
}

/// The picks without and with a cancel requested.
static PICKS: LazyLock<[String; 2]> = LazyLock::new(|| [pick_sql(0), pick_sql(1)]);

/// Up to `n` runnable runs with (or without) a cancel requested, locked.
async fn pick(
    conn: &mut AsyncMysqlConnection,
    claim: &Claim<'_>,
    cancel: bool,
) -> QueryResult<Vec<String>> {
    let picked: Vec<IdRow> = diesel::sql_query(PICKS[usize::from(cancel)].as_str())
        .bind::<BigInt, _>(claim.offset)
        .bind::<BigInt, _>(claim.offset)
        .bind::<BigInt, _>(claim.n)
        .cached()
        .load(conn)
        .await?;
    Ok(picked.into_iter().map(|row| row.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_names_its_index_and_skips_locked_runs() {
        for (cancel, pick) in PICKS.iter().enumerate() {
            assert!(pick.starts_with(&format!(
                "SELECT id FROM flowstate_runs FORCE INDEX (flowstate_runs_leasable) \
                 WHERE leasable = 1 AND cancel_requested = {cancel} AND status IN ("
            )));
            assert!(pick.ends_with("ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED"));
            assert_eq!(pick.matches("UTC_TIMESTAMP(6)) + ?").count(), 2, "{pick}");
        }
    }
}
