//! Retention on PostgreSQL: each prune one statement, its pick in a CTE
//! (run once: an `IN (SELECT ... LIMIT)` may run its subquery, and its
//! limit, per row) that locks what it picks and skips what another prune
//! or a claim holds (`FOR UPDATE SKIP LOCKED`); the `DELETE` re-checks
//! every condition on the row it deletes ([`crate::sql::retention`]).
//! The runs' pick walks `flowstate_runs_settled_idx` (migration 000018).

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use flowstate_core::Result;
use flowstate_core::retention::PruneKind;

use super::Pool;
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::sql::retention::{Counted, count, prunable_run, records};

/// The lease clock's SQL on this dialect.
const NOW_US: &str = <AsyncPgConnection as Connection>::NOW_US;

/// [`RetentionStore::prune`](flowstate_core::ports::RetentionStore::prune)
/// of settled runs: one batch of at most `limit`, settled before `cutoff`
/// (microseconds). Binds: `$1` the cutoff, `$2` the lease clock offset,
/// `$3` the limit.
pub(super) async fn prune_runs(
    pool: &Pool,
    config: &StoreConfig,
    cutoff: i64,
    limit: i64,
) -> Result<u64> {
    let op = "prune runs";
    let offset = config.lease_offset_us();
    let pick = format!(
        "SELECT r.id FROM flowstate_runs r WHERE {} ORDER BY r.updated_at, r.id LIMIT $3",
        prunable_run("r", "$1", NOW_US, "$2")
    );
    let delete = format!(
        "WITH picked AS ({pick} FOR UPDATE SKIP LOCKED) \
         DELETE FROM flowstate_runs d USING picked WHERE d.id = picked.id AND {}",
        prunable_run("d", "$1", NOW_US, "$2")
    );
    let deleted: diesel::QueryResult<usize> = crate::conflict::leased!(pool, op, |conn| {
        diesel::sql_query(delete.as_str())
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(limit)
            .execute(conn)
            .await
    });
    Ok(deleted.map_err(|err| backend(op, err))? as u64)
}

/// [`RetentionStore::prune`](flowstate_core::ports::RetentionStore::prune)
/// of events, dead letters or virtual-user runs: one batch of at most
/// `limit`, older than `cutoff`. Binds: `$1` the cutoff, `$2` the limit.
pub(super) async fn prune_records(
    pool: &Pool,
    _config: &StoreConfig,
    kind: PruneKind,
    cutoff: i64,
    limit: i64,
) -> Result<u64> {
    let op = "prune";
    let (table, order, condition) = records(kind, "$1", "$1");
    let delete = format!(
        "WITH picked AS (SELECT id FROM {table} WHERE {condition} ORDER BY {order} LIMIT $2 \
         FOR UPDATE SKIP LOCKED) \
         DELETE FROM {table} USING picked WHERE {table}.id = picked.id AND {condition}"
    );
    let deleted: diesel::QueryResult<usize> = crate::conflict::leased!(pool, op, |conn| {
        diesel::sql_query(delete.as_str())
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(limit)
            .execute(conn)
            .await
    });
    Ok(deleted.map_err(|err| backend(op, err))? as u64)
}

/// [`RetentionStore::count_prunable`](flowstate_core::ports::RetentionStore::count_prunable):
/// what a prune of `kind` older than `cutoff` would delete now. Binds:
/// `$1` the cutoff, `$2` the lease clock offset (runs only).
pub(super) async fn count_prunable(
    pool: &Pool,
    config: &StoreConfig,
    kind: PruneKind,
    cutoff: i64,
) -> Result<u64> {
    let op = "count_prunable";
    let offset = config.lease_offset_us();
    let statement = count(kind, "$1", "$1", NOW_US, "$2");
    let counted: diesel::QueryResult<Counted> = crate::conflict::leased!(pool, op, |conn| {
        let query = diesel::sql_query(statement.as_str()).bind::<BigInt, _>(cutoff);
        if kind == PruneKind::Runs {
            query.bind::<BigInt, _>(offset).get_result(conn).await
        } else {
            query.get_result(conn).await
        }
    });
    Ok(counted.map_err(|err| backend(op, err))?.n as u64)
}
