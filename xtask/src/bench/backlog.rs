//! The bench at scale (issue 31): `--backlog N` measures per-step and
//! batched claim + succeed on a second database of the same server (a
//! second SQLite file) holding a backlog, each round taken in turn with the
//! same work on the bench's own database, which has none
//! ([`super::interleaved`]), so the ratio of the pair says what the
//! backlog costs.
//!
//! The backlog, seeded once per run by bulk SQL (PostgreSQL's
//! `generate_series`, a cross join of digits on MySQL, a recursive CTE on
//! SQLite): `N` running runs, each with one pending step (the queue) and
//! one succeeded step, and the history row of each: `N` runs, `N` queued
//! steps, `N` settled steps and `2N` history rows, all older than the
//! measured work. The queued steps are pinned to a function of their own
//! ([`FUNCTION`]), so no measured worker takes them: they stand for other
//! work waiting in the same tables and indexes. The measured claims find
//! their steps by key (per-step) or in their own function's range of the
//! claim index (batched), so what this measures is the tables' and
//! indexes' size (their depth, and what still fits in the server's cache),
//! not a scan over the backlog. After seeding, the server's statistics are
//! refreshed as its own autovacuum or statistics would after a bulk load
//! (`VACUUM ANALYZE` on PostgreSQL, `ANALYZE TABLE` on MySQL), on both
//! databases of the pair, so neither plans with statistics the other lacks
//! (a first PostgreSQL run refreshed only the backlog's, and its per-step
//! rounds ran 1.19x those without a backlog); SQLite's store runs without
//! statistics, so none are gathered there.
//!
//! Run leases and events are not measured here: the lease workload leases
//! every leasable run it finds, so a backlog of runnable runs would be its
//! own work, and one of runs held or asleep is a different question (the
//! claim's walk over them).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig, migrate};
use serde_json::{Value, json};

use crate::backend::{self, ServerUrl};

/// The function the backlog's queued steps are pinned to.
pub const FUNCTION: &str = "bench.backlog";

/// What one seeding wrote, and how long it took.
#[derive(Clone, Debug)]
pub struct Seeded {
    /// The dialect's name.
    pub dialect: &'static str,
    /// The `N` of `--backlog N`.
    pub backlog: usize,
    /// How long the bulk inserts and the statistics took.
    pub elapsed: Duration,
}

impl Seeded {
    /// The seeding as JSON, for the report.
    pub fn to_json(&self) -> Value {
        json!({
            "dialect": self.dialect,
            "backlog": self.backlog,
            "runs": self.backlog,
            "queued_steps": self.backlog,
            "settled_steps": self.backlog,
            "history_rows": 2 * self.backlog,
            "seed_seconds": self.elapsed.as_secs_f64(),
        })
    }
}

/// The URL of the backlog's database beside `url`: database
/// `<name>_backlog` on the same server, or the SQLite file
/// `<stem>-backlog.db` beside `url`'s.
pub fn url_beside(dialect: Dialect, url: &str) -> Result<String> {
    if dialect == Dialect::Sqlite {
        return Ok(match url.strip_suffix(".db") {
            Some(stem) => format!("{stem}-backlog.db"),
            None => format!("{url}-backlog"),
        });
    }
    let server = ServerUrl::split(url)?;
    let name = server
        .database
        .context("a server URL needs a database name")?;
    Ok(server.with_database(&format!("{name}_backlog")))
}

/// Recreates the backlog's database at `url` (dropped first: a backlog
/// database belongs to the bench), migrates it, and seeds `n` of each.
pub async fn seed(dialect: Dialect, url: &str, n: usize) -> Result<Seeded> {
    backend::prepare(url, true).await?;
    migrate::up(url)
        .await
        .context("migrating the backlog's database failed")?;
    let store = DieselStore::open(url, StoreConfig::default().pool_size(1))
        .await
        .context("cannot open the backlog's database")?;
    let started = Instant::now();
    for sql in seed_sql(dialect, n, now_micros() - 86_400_000_000) {
        store
            .batch_execute(&sql)
            .await
            .with_context(|| format!("seeding the backlog failed: {sql}"))?;
    }
    refresh_statistics(dialect, &store).await?;
    Ok(Seeded {
        dialect: dialect.name(),
        backlog: n,
        elapsed: started.elapsed(),
    })
}

/// Refreshes the server's statistics of the step tables on `url` as after
/// a seeding: run on both databases of a pair before its rounds, so
/// neither plans with statistics the other lacks.
pub async fn refresh(dialect: Dialect, url: &str) -> Result<()> {
    let store = DieselStore::open(url, StoreConfig::default().pool_size(1))
        .await
        .context("cannot open the store")?;
    refresh_statistics(dialect, &store).await
}

async fn refresh_statistics(dialect: Dialect, store: &DieselStore) -> Result<()> {
    let statistics: &[&str] = match dialect {
        Dialect::Postgres => &[
            "VACUUM ANALYZE flowstate_runs",
            "VACUUM ANALYZE flowstate_steps",
            "VACUUM ANALYZE flowstate_step_history",
        ],
        Dialect::Mysql => {
            &["ANALYZE TABLE flowstate_runs, flowstate_steps, flowstate_step_history"]
        }
        Dialect::Sqlite => &[],
    };
    for sql in statistics {
        store
            .batch_execute(sql)
            .await
            .with_context(|| format!("{sql} failed"))?;
    }
    Ok(())
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The bulk inserts of a backlog of `n`, stamped from `t` (microseconds)
/// on: runs, settled steps, queued steps, then their history rows. Ids are
/// version-7-shaped uuids of 2024, older than any the store generates now,
/// numbered by the series.
fn seed_sql(dialect: Dialect, n: usize, t: i64) -> Vec<String> {
    // The series `g` = 1..=n, as a FROM clause (and a WITH prefix on SQLite).
    let (prefix, from) = match dialect {
        Dialect::Postgres => (
            String::new(),
            format!("FROM generate_series(1, {n}) AS seq(g)"),
        ),
        Dialect::Mysql => {
            let digits = n.max(1).to_string().len();
            let d = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                     UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                     UNION ALL SELECT 8 UNION ALL SELECT 9)";
            let sum: Vec<String> = (0..digits)
                .map(|k| format!("{}d{k}.d", "10*".repeat(k)))
                .collect();
            let tables: Vec<String> = (0..digits).map(|k| format!("{d} AS d{k}")).collect();
            (
                String::new(),
                format!(
                    "FROM (SELECT {} + 1 AS g FROM {}) AS seq WHERE g <= {n}",
                    sum.join(" + "),
                    tables.join(" CROSS JOIN ")
                ),
            )
        }
        Dialect::Sqlite => (
            format!(
                "WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < {n}) "
            ),
            "FROM seq".to_owned(),
        ),
    };
    let id = |kind: u8| match dialect {
        Dialect::Postgres => format!("'0190a00{kind}-0000-7000-8000-' || lpad(g::text, 12, '0')"),
        Dialect::Mysql => format!("CONCAT('0190a00{kind}-0000-7000-8000-', LPAD(g, 12, '0'))"),
        Dialect::Sqlite => format!("'0190a00{kind}-0000-7000-8000-' || printf('%012d', g)"),
    };
    let (run, settled, queued, settled_history, queued_history) =
        (id(1), id(2), id(3), id(4), id(5));
    let (at, later) = (format!("{t} + g"), format!("{t} + {n} + g"));
    let insert = |table: &str, columns: &str, values: String| {
        format!("{prefix}INSERT INTO {table} ({columns}) SELECT {values} {from}")
    };
    vec![
        insert(
            "flowstate_runs",
            "id, workflow, status, input, created_at, updated_at",
            format!("{run}, 'bench.backlog', 'running', '{{}}', {at}, {at}"),
        ),
        insert(
            "flowstate_steps",
            "id, run_id, name, function_name, status, input, result, current_attempt, retries, \
             created_at, updated_at",
            format!(
                "{settled}, {run}, 'done', '{FUNCTION}', 'succeeded', '{{}}', '{{\"ok\": true}}', \
                 1, 0, {at}, {at}"
            ),
        ),
        insert(
            "flowstate_steps",
            "id, run_id, name, function_name, status, input, current_attempt, retries, \
             created_at, updated_at",
            format!(
                "{queued}, {run}, 'queued', '{FUNCTION}', 'pending', '{{}}', 1, 0, {later}, {later}"
            ),
        ),
        insert(
            "flowstate_step_history",
            "id, step_id, attempt, status, result, created_at, running_at, succeeded_at",
            format!(
                "{settled_history}, {settled}, 1, 'succeeded', '{{\"ok\": true}}', {at}, {at}, {at}"
            ),
        ),
        insert(
            "flowstate_step_history",
            "id, step_id, attempt, status, created_at",
            format!("{queued_history}, {queued}, 1, 'pending', {later}"),
        ),
    ]
}

/// The label of `name`'s column of `work` (`""` for per-step, `" batch"`)
/// with a backlog of `n` (0: the pair's rounds without one).
pub fn label(name: &str, work: &str, n: usize) -> String {
    format!("{name}{work} +{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_database_sits_beside_the_benchs() {
        assert_eq!(
            url_beside(Dialect::Postgres, "postgres://u@h:5432/flowstate_bench?x=1").unwrap(),
            "postgres://u@h:5432/flowstate_bench_backlog?x=1"
        );
        assert_eq!(
            url_beside(Dialect::Sqlite, "sqlite:///t/flowstate_bench.db").unwrap(),
            "sqlite:///t/flowstate_bench-backlog.db"
        );
    }

    #[test]
    fn mysqls_series_has_as_many_digits_as_n() {
        let sql = seed_sql(Dialect::Mysql, 200_000, 0);
        assert_eq!(sql.len(), 5);
        assert!(
            sql[0].contains("d5.d") && !sql[0].contains("d6"),
            "{}",
            sql[0]
        );
        assert!(sql[0].ends_with("WHERE g <= 200000"), "{}", sql[0]);
    }
}
