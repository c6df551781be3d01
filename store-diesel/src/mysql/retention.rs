//! Retention on MySQL/MariaDB. A prune of runs is one transaction: the
//! pick (`SELECT ... FOR UPDATE SKIP LOCKED`, forced onto the index of the
//! virtual column `settled`, migration 000018: MariaDB otherwise read and
//! sorted every settled run), then `DELETE r FROM flowstate_runs r LEFT
//! JOIN flowstate_runs c ...` over the ids picked, re-checking every
//! condition (MySQL has no `LIMIT` in an `IN` subquery, nor a subquery on
//! the table it deletes from). Row locks are local to a node on Galera,
//! so the `DELETE`'s own `WHERE` is what decides. The other prunes are one
//! `DELETE ... ORDER BY ... LIMIT n`. The conditions are
//! [`crate::sql::retention`]'s; placeholders are positional (`?`), so a
//! value used twice is bound twice.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use flowstate_core::Result;
use flowstate_core::retention::PruneKind;

use super::{Pool, transaction};
use crate::config::StoreConfig;
use crate::dialect::Connection;
use crate::error::backend;
use crate::sql::retention::{Counted, count, prunable_run, records, settled};

/// The lease clock's SQL on this dialect.
const NOW_US: &str = <AsyncMysqlConnection as Connection>::NOW_US;

/// One picked id read back.
#[derive(QueryableByName)]
struct Picked {
    #[diesel(sql_type = Text)]
    id: String,
}

/// [`RetentionStore::prune`](flowstate_core::ports::RetentionStore::prune)
/// of settled runs: one batch of at most `limit`, settled before `cutoff`
/// (microseconds), picked and deleted in one transaction.
pub(super) async fn prune_runs(
    pool: &Pool,
    config: &StoreConfig,
    cutoff: i64,
    limit: i64,
) -> Result<u64> {
    let op = "prune runs";
    let offset = config.lease_offset_us();
    let pick = format!(
        "SELECT r.id FROM flowstate_runs r FORCE INDEX (flowstate_runs_settled) \
         WHERE r.settled = 1 AND {} \
         ORDER BY r.updated_at, r.id LIMIT ? FOR UPDATE SKIP LOCKED",
        prunable_run("r", "?", NOW_US, "?")
    );
    let deleted: diesel::QueryResult<usize> = transaction!(pool, op, |conn| {
        let picked: Vec<Picked> = diesel::sql_query(pick.as_str())
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(offset)
            .bind::<BigInt, _>(limit)
            .load(conn)
            .await?;
        if picked.is_empty() {
            return Ok(0);
        }
        let marks = vec!["?"; picked.len()].join(", ");
        let delete = format!(
            "DELETE r FROM flowstate_runs r LEFT JOIN flowstate_runs c \
             ON c.parent_id = r.id AND c.status NOT IN ({settled}) \
             WHERE r.id IN ({marks}) AND c.id IS NULL AND r.status IN ({settled}) \
             AND r.updated_at < ? \
             AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= ({NOW_US} + ?))",
            settled = settled(),
        );
        let mut query = diesel::sql_query(delete).into_boxed();
        for row in &picked {
            query = query.bind::<Text, _>(row.id.clone());
        }
        query
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(offset)
            .execute(conn)
            .await
    });
    Ok(deleted.map_err(|err| backend(op, err))? as u64)
}

/// [`RetentionStore::prune`](flowstate_core::ports::RetentionStore::prune)
/// of events, dead letters or virtual-user runs: one `DELETE ... ORDER BY
/// ... LIMIT`, the cutoff bound twice, then the limit.
pub(super) async fn prune_records(
    pool: &Pool,
    _config: &StoreConfig,
    kind: PruneKind,
    cutoff: i64,
    limit: i64,
) -> Result<u64> {
    let op = "prune";
    let (table, order, condition) = records(kind, "?", "?");
    let delete = format!("DELETE FROM {table} WHERE {condition} ORDER BY {order} LIMIT ?");
    let deleted: diesel::QueryResult<usize> = crate::conflict::leased!(pool, op, |conn| {
        diesel::sql_query(delete.as_str())
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(limit)
            .execute(conn)
            .await
    });
    Ok(deleted.map_err(|err| backend(op, err))? as u64)
}

/// [`RetentionStore::count_prunable`](flowstate_core::ports::RetentionStore::count_prunable):
/// what a prune of `kind` older than `cutoff` would delete now: the runs'
/// cutoff and offset bound, the others' cutoff twice.
pub(super) async fn count_prunable(
    pool: &Pool,
    config: &StoreConfig,
    kind: PruneKind,
    cutoff: i64,
) -> Result<u64> {
    let op = "count_prunable";
    let offset = config.lease_offset_us();
    let statement = count(kind, "?", "?", NOW_US, "?");
    let second = if kind == PruneKind::Runs {
        offset
    } else {
        cutoff
    };
    let counted: diesel::QueryResult<Counted> = crate::conflict::leased!(pool, op, |conn| {
        diesel::sql_query(statement.as_str())
            .bind::<BigInt, _>(cutoff)
            .bind::<BigInt, _>(second)
            .get_result(conn)
            .await
    });
    Ok(counted.map_err(|err| backend(op, err))?.n as u64)
}
