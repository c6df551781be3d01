//! [`RetentionStore`] for [`DieselStore`]: each prune one `DELETE` whose
//! own `WHERE` decides what may go (settled, settled before the cutoff, no
//! lease held on the database's clock, no child that is not settled), so
//! a run claimed, re-opened or given a live child concurrently is never
//! deleted: nothing is read first and decided in the process.
//!
//! What goes with a record is the schema's: `ON DELETE CASCADE` from a run
//! to its state, steps (and their history: a foreign key on MySQL and
//! SQLite, the statement trigger on PostgreSQL, migration 000012),
//! signals and effects; `ON DELETE SET NULL` for its children; from an
//! event to its deliveries; from a virtual-user run to its transcript.
//!
//! The statements, per dialect (`SCHEMA.md`, migration 000018, says which
//! index each walks; MySQL's pick names the virtual column `settled`, which
//! that migration adds and indexes):
//!
//! | prune | PostgreSQL | SQLite | MySQL |
//! | --- | --- | --- | --- |
//! | runs | `WITH picked AS (SELECT ... ORDER BY updated_at, id LIMIT n FOR UPDATE SKIP LOCKED) DELETE ... USING picked`, the conditions again on the row deleted | `DELETE ... WHERE id IN (SELECT ... INDEXED BY flowstate_runs_settled_idx ... LIMIT n)`: one statement under the one writer's lock | a transaction: the pick `SELECT ... FOR UPDATE SKIP LOCKED`, then `DELETE r FROM runs r LEFT JOIN runs c ...` over the ids picked, re-checking every condition (MySQL has no `LIMIT` in an `IN` subquery, nor a subquery on the table it deletes from) |
//! | events, dead letters, virtual-user runs | as runs | as runs | one `DELETE ... ORDER BY ... LIMIT n` |
//!
//! The statuses are literals from core's enums
//! ([`retention::prunable_run_statuses`]); the cutoff, the lease clock's
//! offset, the limit and the ids are bound.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use flowstate_core::ports::RetentionStore;
use flowstate_core::retention::{self, PruneKind};
use flowstate_core::{Result, RunStatus, Timestamp, VirtualUserRunStatus};

use crate::backend::{in_transaction, on_connection};
use crate::database::Dialect;
use crate::error::TxError;
use crate::sql::typed::now_sql;
use crate::store::DieselStore;

/// One `COUNT(*)` read back.
#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// One picked id read back (MySQL's run pick).
#[derive(QueryableByName)]
struct Picked {
    #[diesel(sql_type = Text)]
    id: String,
}

/// `'a', 'b'`: status literals for an `IN` list.
fn literals<'a>(statuses: impl IntoIterator<Item = &'a str>) -> String {
    statuses
        .into_iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The settled run statuses, as an `IN` list's literals.
fn settled() -> String {
    literals(
        retention::prunable_run_statuses()
            .into_iter()
            .map(RunStatus::as_str),
    )
}

/// The placeholders of one dialect: PostgreSQL's `$n`, SQLite's `?n` (both
/// numbered, so a bind is used twice), MySQL's `?` (positional: each use
/// bound again).
fn mark(dialect: Dialect, n: usize) -> String {
    match dialect {
        Dialect::Postgres => format!("${n}"),
        Dialect::Sqlite => format!("?{n}"),
        Dialect::Mysql => "?".to_owned(),
    }
}

/// Whether the run row `a` may be pruned: settled, settled before the
/// cutoff (`cutoff`), no lease held on the lease clock (`now_us` plus
/// `offset`), no child that is not settled.
fn prunable_run(a: &str, cutoff: &str, now_us: &str, offset: &str) -> String {
    let settled = settled();
    format!(
        "{a}.status IN ({settled}) AND {a}.updated_at < {cutoff} \
         AND ({a}.lease_expires_at IS NULL OR {a}.lease_expires_at <= ({now_us} + {offset})) \
         AND NOT EXISTS (SELECT 1 FROM flowstate_runs c \
         WHERE c.parent_id = {a}.id AND c.status NOT IN ({settled}))"
    )
}

/// What an event row must be to be pruned as `kind`, the cutoff bound at
/// `cutoff` (every use its own placeholder text, given).
fn prunable_event(kind: PruneKind, cutoff: &str) -> String {
    match kind {
        PruneKind::DeadLetters => format!(
            "dispatched_at IS NULL AND dead_lettered_at IS NOT NULL AND dead_lettered_at < {cutoff}"
        ),
        _ => format!("dispatched_at IS NOT NULL AND dispatched_at < {cutoff}"),
    }
}

/// The finished virtual-user run statuses, as an `IN` list's literals.
fn finished() -> String {
    literals(
        retention::prunable_virtual_user_statuses()
            .into_iter()
            .map(VirtualUserRunStatus::as_str),
    )
}

/// The table, the order and the condition of a prune of events or
/// virtual-user runs, its cutoff at the placeholders `c1` and `c2` (the
/// same bind on PostgreSQL and SQLite, two on MySQL).
fn simple(kind: PruneKind, c1: &str, c2: &str) -> (&'static str, &'static str, String) {
    match kind {
        PruneKind::VirtualUserRuns => (
            "flowstate_virtual_user_runs",
            "updated_at, id",
            format!(
                "status IN ({}) AND created_at < {c1} AND updated_at < {c2}",
                finished()
            ),
        ),
        _ => (
            "flowstate_events",
            "occurred_at, id",
            format!("occurred_at < {c1} AND {}", prunable_event(kind, c2)),
        ),
    }
}

impl DieselStore {
    /// The cutoff of `older_than` on the stamping clock, in microseconds.
    fn prune_cutoff(&self, older_than: Duration) -> i64 {
        retention::cutoff(Timestamp::from_micros(self.now()), older_than).as_micros()
    }

    /// One batch of settled runs: one statement, or MySQL's pick and
    /// delete in one transaction.
    async fn prune_runs(&self, cutoff: i64, limit: i64) -> Result<u64> {
        let op = "prune runs";
        let offset = self.lease_offset();
        let dialect = self.dialect();
        if dialect == Dialect::Mysql {
            let deleted = in_transaction!(self, op, |conn| {
                let now_us = now_sql(&*conn);
                // `settled` (migration 000018): the virtual column whose
                // index walks the settled runs in settle order.
                let pick = format!(
                    "SELECT r.id FROM flowstate_runs r FORCE INDEX (flowstate_runs_settled) \
                     WHERE r.settled = 1 AND {} \
                     ORDER BY r.updated_at, r.id LIMIT ? FOR UPDATE SKIP LOCKED",
                    prunable_run("r", "?", now_us, "?")
                );
                let picked: Vec<Picked> = diesel::sql_query(pick)
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
                     AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= ({now_us} + ?))",
                    settled = settled(),
                );
                let mut query = diesel::sql_query(delete).into_boxed();
                for row in &picked {
                    query = query.bind::<Text, _>(row.id.clone());
                }
                let deleted = query
                    .bind::<BigInt, _>(cutoff)
                    .bind::<BigInt, _>(offset)
                    .execute(conn)
                    .await?;
                Ok::<_, TxError>(deleted)
            })?;
            return Ok(deleted as u64);
        }
        let deleted = on_connection!(self, op, |conn| {
            let now_us = now_sql(&*conn);
            let (c, o, l) = (mark(dialect, 1), mark(dialect, 2), mark(dialect, 3));
            // SQLite's planner, without statistics, prefers the equality
            // ranges of `flowstate_runs_status_created` and sorts every
            // settled run: it is told the index.
            let from = if dialect == Dialect::Postgres {
                "flowstate_runs r"
            } else {
                "flowstate_runs r INDEXED BY flowstate_runs_settled_idx"
            };
            let pick = format!(
                "SELECT r.id FROM {from} WHERE {} ORDER BY r.updated_at, r.id LIMIT {l}",
                prunable_run("r", &c, now_us, &o)
            );
            let delete = if dialect == Dialect::Postgres {
                // The pick in a CTE, run once (an `IN (SELECT ... LIMIT)`
                // may run its subquery per row, its limit then per row
                // too), locking what it picks and skipping what another
                // prune or a claim holds; the `DELETE` re-checks it.
                format!(
                    "WITH picked AS ({pick} FOR UPDATE SKIP LOCKED) \
                     DELETE FROM flowstate_runs d USING picked WHERE d.id = picked.id AND {}",
                    prunable_run("d", &c, now_us, &o)
                )
            } else {
                // SQLite: one statement under the one writer's lock, so
                // nothing changes between the pick and the delete; the
                // subquery is run once, and the delete goes by primary key.
                format!("DELETE FROM flowstate_runs WHERE id IN ({pick})")
            };
            diesel::sql_query(delete)
                .bind::<BigInt, _>(cutoff)
                .bind::<BigInt, _>(offset)
                .bind::<BigInt, _>(limit)
                .execute(conn)
                .await
        })?;
        Ok(deleted as u64)
    }

    /// One batch of events, dead letters or virtual-user runs: one
    /// statement.
    async fn prune_simple(&self, kind: PruneKind, cutoff: i64, limit: i64) -> Result<u64> {
        let op = "prune";
        let dialect = self.dialect();
        let statement = if dialect == Dialect::Mysql {
            let (table, order, condition) = simple(kind, "?", "?");
            format!("DELETE FROM {table} WHERE {condition} ORDER BY {order} LIMIT ?")
        } else {
            let (c, l) = (mark(dialect, 1), mark(dialect, 2));
            let (table, order, condition) = simple(kind, &c, &c);
            let pick =
                format!("SELECT id FROM {table} WHERE {condition} ORDER BY {order} LIMIT {l}");
            if dialect == Dialect::Postgres {
                format!(
                    "WITH picked AS ({pick} FOR UPDATE SKIP LOCKED) \
                     DELETE FROM {table} USING picked WHERE {table}.id = picked.id AND {condition}"
                )
            } else {
                format!("DELETE FROM {table} WHERE id IN ({pick}) AND {condition}")
            }
        };
        let deleted = if dialect == Dialect::Mysql {
            on_connection!(self, op, |conn| diesel::sql_query(statement.as_str())
                .bind::<BigInt, _>(cutoff)
                .bind::<BigInt, _>(cutoff)
                .bind::<BigInt, _>(limit)
                .execute(conn)
                .await)?
        } else {
            on_connection!(self, op, |conn| diesel::sql_query(statement.as_str())
                .bind::<BigInt, _>(cutoff)
                .bind::<BigInt, _>(limit)
                .execute(conn)
                .await)?
        };
        Ok(deleted as u64)
    }
}

impl RetentionStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(kind = %kind, limit = limit))]
    async fn prune(&self, kind: PruneKind, older_than: Duration, limit: u32) -> Result<u64> {
        let limit = i64::from(retention::effective_limit(limit));
        let cutoff = self.prune_cutoff(older_than);
        let deleted = match kind {
            PruneKind::Runs => self.prune_runs(cutoff, limit).await?,
            _ => self.prune_simple(kind, cutoff, limit).await?,
        };
        tracing::debug!(deleted, "pruned");
        Ok(deleted)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(kind = %kind))]
    async fn count_prunable(&self, kind: PruneKind, older_than: Duration) -> Result<u64> {
        let cutoff = self.prune_cutoff(older_than);
        let offset = self.lease_offset();
        let dialect = self.dialect();
        let mysql = dialect == Dialect::Mysql;
        let counted: Counted = on_connection!(self, "count_prunable", |conn| {
            let now_us = now_sql(&*conn);
            let (c1, c2, o) = if mysql {
                ("?".to_owned(), "?".to_owned(), "?".to_owned())
            } else {
                (mark(dialect, 1), mark(dialect, 1), mark(dialect, 2))
            };
            let count = if kind == PruneKind::Runs {
                format!(
                    "SELECT COUNT(*) AS n FROM flowstate_runs r WHERE {}",
                    prunable_run("r", &c1, now_us, &o)
                )
            } else {
                let (table, _, condition) = simple(kind, &c1, &c2);
                format!("SELECT COUNT(*) AS n FROM {table} WHERE {condition}")
            };
            let query = diesel::sql_query(count).into_boxed();
            let query = match (kind, mysql) {
                // MySQL binds each use: the runs' cutoff and offset, the
                // others' cutoff twice.
                (PruneKind::Runs, _) => query.bind::<BigInt, _>(cutoff).bind::<BigInt, _>(offset),
                (_, true) => query.bind::<BigInt, _>(cutoff).bind::<BigInt, _>(cutoff),
                (_, false) => query.bind::<BigInt, _>(cutoff),
            };
            query.get_result(conn).await
        })?;
        Ok(counted.n as u64)
    }
}
