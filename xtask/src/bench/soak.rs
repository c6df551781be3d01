//! The soak (issue 31): `--soak MINUTES` runs batched work with retention
//! on, round after round for that long, and prints every minute the rate
//! and the size of flowstate's tables and indexes, so a team can see what
//! a year of churn does before it has one: dead index entries under the
//! claims, tables that grow although the pruner deletes what they settle.
//!
//! A round queues `--steps` steps through the ports (runs of ten, as the
//! other sections'), drains them with `flowstate-pool`'s `WorkerPool`
//! (the timed part, [`batched::drain`]), and settles their runs, as an
//! engine would once their steps are done. A [`Pruner`] runs beside it
//! the whole time, keeping settled runs for [`RETENTION`], so the tables
//! hold about that much settled work once the soak is past it and the
//! size should level off there.
//!
//! Each minute's line shows two rates: while draining (the batched
//! column's figure, comparable with it) and overall (queueing and
//! settling included, what an engine's whole loop would do). The summary
//! compares the last five minutes with the first five (the goal: at least
//! 0.90x) and the size at the end with the size half-way (levelled off:
//! grown by at most a tenth). Sizes are what the server says: PostgreSQL's
//! `pg_table_size` and `pg_indexes_size`; MariaDB's `information_schema`
//! figures (statistics, refreshed by InnoDB as rows change) and the
//! tablespace files' allocated size; SQLite's `dbstat` pages and the
//! file's pages.
//!
//! On a PostgreSQL server whose autovacuum daemon is off (the machine's
//! own test server is one), nothing would reclaim the pruned rows and the
//! size could only grow: the soak says so and vacuums the tables it
//! churns at each interval in the daemon's place.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use flowstate_core::ports::RunStore;
use flowstate_core::{RunId, RunStatus};
use flowstate_recovery::{Pruner, RetentionPolicy};
use flowstate_store_diesel::{DatabaseUrl, Dialect, DieselStore, StoreConfig};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::batched;
use super::throughput::create_steps_for;

/// How long the soak's pruner keeps a settled run.
pub const RETENTION: Duration = Duration::from_secs(120);

/// How often the soak's pruner passes.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// How the soak runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// For how long rounds are started.
    pub duration: Duration,
    /// How often a line is printed (a minute, unless a test asks less).
    pub interval: Duration,
    /// How long settled runs are kept.
    pub retention: Duration,
    /// How often the pruner passes.
    pub prune_every: Duration,
    /// Steps per round.
    pub steps: usize,
    /// The pool's handler tasks.
    pub workers: usize,
}

impl Settings {
    /// A soak of `minutes` minutes, a line a minute, [`RETENTION`].
    pub fn minutes(minutes: u32, steps: usize, workers: usize) -> Self {
        Self {
            duration: Duration::from_secs(u64::from(minutes) * 60),
            interval: Duration::from_secs(60),
            retention: RETENTION,
            prune_every: PRUNE_EVERY,
            steps,
            workers,
        }
    }
}

/// The size of flowstate's tables on one database, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// The tables' data (their heap, TOAST, clustered index, or pages).
    pub tables: i64,
    /// Their secondary indexes.
    pub indexes: i64,
    /// The files that hold them, free space included: MariaDB's
    /// tablespaces, SQLite's file; `None` on PostgreSQL, whose figures
    /// above are already the files'.
    pub files: Option<i64>,
}

impl Sizes {
    /// Tables and indexes.
    pub fn total(&self) -> i64 {
        self.tables + self.indexes
    }
}

/// One interval of the soak (a minute, unless the settings say otherwise).
#[derive(Clone, Copy, Debug)]
pub struct Interval {
    /// Rounds that ended in it.
    pub rounds: usize,
    /// Steps those rounds drained.
    pub steps: usize,
    /// Time spent draining them.
    pub draining: Duration,
    /// Their wall time, queueing and settling included.
    pub wall: Duration,
    /// Runs the pruner had deleted by the interval's end, since the start.
    pub pruned: u64,
    /// Sizes at the interval's end.
    pub sizes: Sizes,
}

impl Interval {
    /// Steps per second while draining.
    pub fn drain_rate(&self) -> f64 {
        self.steps as f64 / self.draining.as_secs_f64().max(1e-9)
    }

    /// Steps per second, everything included.
    pub fn overall_rate(&self) -> f64 {
        self.steps as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// What a soak found on one database.
#[derive(Clone, Debug)]
pub struct Soak {
    /// The dialect's name.
    pub dialect: &'static str,
    /// How it ran.
    pub settings: Settings,
    /// One entry per interval, in order.
    pub intervals: Vec<Interval>,
}

impl Soak {
    /// How many intervals the first and last windows take: five, or half
    /// of a shorter soak's.
    fn window(&self) -> usize {
        (self.intervals.len() / 2).clamp(1, 5)
    }

    /// Steps per second while draining, over the first and the last
    /// window.
    pub fn first_and_last(&self) -> Option<(f64, f64)> {
        let n = self.window();
        if self.intervals.len() < 2 {
            return None;
        }
        let rate = |intervals: &[Interval]| {
            let steps: usize = intervals.iter().map(|i| i.steps).sum();
            let draining: f64 = intervals.iter().map(|i| i.draining.as_secs_f64()).sum();
            steps as f64 / draining.max(1e-9)
        };
        Some((
            rate(&self.intervals[..n]),
            rate(&self.intervals[self.intervals.len() - n..]),
        ))
    }

    /// The tables' and indexes' size at the end over their size half-way.
    pub fn growth_over_last_half(&self) -> Option<f64> {
        let half = self.intervals.get(self.intervals.len() / 2)?.sizes.total();
        let end = self.intervals.last()?.sizes.total();
        (half > 0).then(|| end as f64 / half as f64)
    }

    /// The lines printed under the table.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let n = self.window();
        if let Some((first, last)) = self.first_and_last() {
            lines.push(format!(
                "{} soak: last {n} interval(s) / first {n}, batched while draining: {:.2}x \
                 ({last:.0} against {first:.0} steps/s; goal: at least 0.90x)",
                self.dialect,
                last / first.max(1e-9)
            ));
        }
        if let Some(growth) = self.growth_over_last_half() {
            let verdict = if growth <= 1.10 {
                "levelled off"
            } else {
                "still growing"
            };
            lines.push(format!(
                "{} soak: tables + indexes {} at the end, {:+.0}% over the last half ({verdict})",
                self.dialect,
                megabytes(self.intervals.last().map_or(0, |i| i.sizes.total())),
                (growth - 1.0) * 100.0
            ));
        }
        lines
    }

    /// The soak as JSON, for the report.
    pub fn to_json(&self) -> Value {
        json!({
            "dialect": self.dialect,
            "steps_per_round": self.settings.steps,
            "workers": self.settings.workers,
            "interval_seconds": self.settings.interval.as_secs_f64(),
            "retention_seconds": self.settings.retention.as_secs_f64(),
            "intervals": self.intervals.iter().map(|i| json!({
                "rounds": i.rounds,
                "steps": i.steps,
                "drain_per_second": i.drain_rate(),
                "overall_per_second": i.overall_rate(),
                "runs_pruned": i.pruned,
                "table_bytes": i.sizes.tables,
                "index_bytes": i.sizes.indexes,
                "file_bytes": i.sizes.files,
            })).collect::<Vec<_>>(),
            "last_over_first": self.first_and_last().map(|(f, l)| l / f.max(1e-9)),
            "growth_over_last_half": self.growth_over_last_half(),
        })
    }
}

/// Soaks `url` (its flowstate tables already migrated and empty of the
/// soak's function) as `settings` say, printing a line per interval.
pub async fn run(dialect: Dialect, url: &str, settings: Settings) -> Result<Soak> {
    let name = dialect.name();
    let open = async |pool: usize| {
        DieselStore::open(
            url,
            StoreConfig::default()
                .pool_size(pool)
                .acquire_timeout(Duration::from_secs(30)),
        )
        .await
        .context("cannot open the soak's store")
    };
    let store = Arc::new(open(settings.workers.clamp(1, 8)).await?);
    let policy = RetentionPolicy {
        runs: Some(settings.retention),
        events: None,
        dead_letters: None,
        virtual_user_runs: None,
        ..RetentionPolicy::default()
    };
    let pruner = Pruner::new(Arc::new(open(2).await?), policy)
        .with_interval(settings.prune_every)
        .spawn();
    println!(
        "  {name}: soak for {:.0} s, rounds of {} steps, {} workers, settled runs kept {:.0} s",
        settings.duration.as_secs_f64(),
        settings.steps,
        settings.workers,
        settings.retention.as_secs_f64()
    );
    let started = Instant::now();
    let mut intervals = Vec::new();
    let mut current = Interval {
        rounds: 0,
        steps: 0,
        draining: Duration::ZERO,
        wall: Duration::ZERO,
        pruned: 0,
        sizes: Sizes::default(),
    };
    let vacuum = vacuum_in_place_of_the_daemon(dialect, &store).await?;
    if vacuum {
        println!(
            "  !! {name}: this server runs with autovacuum = off, so nothing would ever reclaim \
             the rows the pruner deletes; the soak runs `{VACUUM}` at each interval in the \
             daemon's place (turn autovacuum on in production)"
        );
    }
    let mut mark = started + settings.interval;
    let outcome: Result<()> = async {
        while started.elapsed() < settings.duration {
            let round = Instant::now();
            let made =
                create_steps_for(&store, settings.steps, settings.workers, batched::FUNCTION)
                    .await?;
            let drained = batched::drain(url, settings.workers, settings.steps, "soak").await?;
            settle(&store, made.iter().map(|(run, _)| *run).collect()).await?;
            current.rounds += 1;
            current.steps += drained.throughput.steps;
            current.draining += drained.throughput.elapsed;
            current.wall += round.elapsed();
            if Instant::now() >= mark || started.elapsed() >= settings.duration {
                current.pruned = pruner.report().runs;
                if vacuum {
                    store
                        .batch_execute(VACUUM)
                        .await
                        .context("the soak's VACUUM")?;
                }
                current.sizes = sizes(dialect, url).await?;
                intervals.push(current);
                let i = &current;
                println!(
                    "  {name} soak {:>3}: {:>7} steps, {:>7.0}/s draining, {:>6.0}/s overall; \
                     {:>8} runs pruned; tables {}, indexes {}{}",
                    intervals.len(),
                    i.steps,
                    i.drain_rate(),
                    i.overall_rate(),
                    i.pruned,
                    megabytes(i.sizes.tables),
                    megabytes(i.sizes.indexes),
                    i.sizes
                        .files
                        .map(|f| format!(", files {}", megabytes(f)))
                        .unwrap_or_default()
                );
                current = Interval {
                    rounds: 0,
                    steps: 0,
                    draining: Duration::ZERO,
                    wall: Duration::ZERO,
                    ..current
                };
                while mark <= Instant::now() {
                    mark += settings.interval;
                }
            }
        }
        Ok(())
    }
    .await;
    let pruned = pruner.shutdown().await;
    outcome?;
    ensure!(
        pruned.failed_passes == 0,
        "{} of the soak pruner's {} passes failed (see the log)",
        pruned.failed_passes,
        pruned.passes
    );
    Ok(Soak {
        dialect: name,
        settings,
        intervals,
    })
}

/// What the soak runs at each interval on a PostgreSQL server whose
/// autovacuum daemon is off: the tables its rounds churn.
const VACUUM: &str = "VACUUM flowstate_runs, flowstate_steps, flowstate_step_history";

/// Whether `store` is on a PostgreSQL server with `autovacuum = off`
/// (the machine's own test server is one): there a soak measures dead
/// rows piling up for ever, not retention, unless something vacuums.
async fn vacuum_in_place_of_the_daemon(dialect: Dialect, store: &DieselStore) -> Result<bool> {
    if dialect != Dialect::Postgres {
        return Ok(false);
    }
    // `SHOW` cannot be a subquery; the setting is in pg_settings too.
    let probe = "DO $$ BEGIN IF current_setting('autovacuum') = 'off' THEN \
                 RAISE EXCEPTION 'autovacuum is off'; END IF; END $$";
    Ok(store.batch_execute(probe).await.is_err())
}

/// Marks every run in `runs` completed, as an engine does once a run's
/// steps are done, eight at a time.
async fn settle(store: &Arc<DieselStore>, runs: BTreeSet<RunId>) -> Result<()> {
    let runs: Vec<RunId> = runs.into_iter().collect();
    let mut set: JoinSet<flowstate_core::Result<()>> = JoinSet::new();
    for chunk in runs.chunks(runs.len().div_ceil(8).max(1)) {
        let (store, chunk) = (Arc::clone(store), chunk.to_vec());
        set.spawn(async move {
            for run in chunk {
                store.set_run_status(run, RunStatus::Completed).await?;
            }
            Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a settling task panicked")?
            .context("settling the soak's runs failed")?;
    }
    Ok(())
}

fn megabytes(bytes: i64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

/// The statement that reads [`Sizes`] on `dialect`: columns `n0` (tables),
/// `n1` (indexes) and `n2` (files, -1 where there are none).
fn sizes_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => {
            "SELECT CAST(COALESCE(SUM(pg_table_size(c.oid)), 0) AS BIGINT) AS n0, \
             CAST(COALESCE(SUM(pg_indexes_size(c.oid)), 0) AS BIGINT) AS n1, \
             CAST(-1 AS BIGINT) AS n2 \
             FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace \
             WHERE c.relkind = 'r' AND c.relname LIKE 'flowstate\\_%' \
             AND ns.nspname = current_schema()"
        }
        Dialect::Mysql => {
            "SELECT CAST(COALESCE(SUM(t.data_length), 0) AS SIGNED) AS n0, \
             CAST(COALESCE(SUM(t.index_length), 0) AS SIGNED) AS n1, \
             CAST(COALESCE((SELECT SUM(s.allocated_size) \
               FROM information_schema.innodb_sys_tablespaces s \
               WHERE s.name LIKE CONCAT(DATABASE(), '/flowstate\\_%')), 0) AS SIGNED) AS n2 \
             FROM information_schema.tables t \
             WHERE t.table_schema = DATABASE() AND t.table_name LIKE 'flowstate\\_%'"
        }
        Dialect::Sqlite => {
            "SELECT CAST(COALESCE(SUM(CASE WHEN m.type = 'index' THEN 0 ELSE d.pgsize END), 0) \
               AS BIGINT) AS n0, \
             CAST(COALESCE(SUM(CASE WHEN m.type = 'index' THEN d.pgsize ELSE 0 END), 0) \
               AS BIGINT) AS n1, \
             (SELECT page_count FROM pragma_page_count()) \
               * (SELECT page_size FROM pragma_page_size()) AS n2 \
             FROM dbstat d JOIN sqlite_schema m ON m.name = d.name \
             WHERE m.tbl_name LIKE 'flowstate\\_%' ESCAPE '\\'"
        }
    }
}

#[derive(diesel::QueryableByName)]
struct SizeRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n0: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n1: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n2: i64,
}

/// The size of flowstate's tables on `url`, read on a connection of its
/// own (outside the store, as an operator's query would be).
pub async fn sizes(dialect: Dialect, url: &str) -> Result<Sizes> {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let target = DatabaseUrl::parse(url)
        .context("the soak's database url")?
        .target;
    let query = diesel::sql_query(sizes_sql(dialect));
    let row: SizeRow = match dialect {
        #[cfg(feature = "postgres")]
        Dialect::Postgres => {
            let mut conn = diesel_async::AsyncPgConnection::establish(&target).await?;
            query.get_result(&mut conn).await?
        }
        #[cfg(feature = "mysql")]
        Dialect::Mysql => {
            let mut conn = diesel_async::AsyncMysqlConnection::establish(&target).await?;
            query.get_result(&mut conn).await?
        }
        #[cfg(feature = "sqlite")]
        Dialect::Sqlite => {
            let mut conn = diesel_async::sync_connection_wrapper::SyncConnectionWrapper::<
                diesel::SqliteConnection,
            >::establish(&target)
            .await?;
            query.get_result(&mut conn).await?
        }
        #[allow(unreachable_patterns)]
        other => anyhow::bail!("this xtask build has no {} driver", other.name()),
    };
    Ok(Sizes {
        tables: row.n0,
        indexes: row.n1,
        files: (row.n2 >= 0).then_some(row.n2),
    })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use flowstate_store_diesel::migrate;

    /// A soak of a few seconds on SQLite: every round drained, the pruner
    /// deleting what the rounds settled (kept no time at all), an interval
    /// line each second with sizes read back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_soak_drains_prunes_and_measures() {
        let dir = std::env::temp_dir().join(format!("flowstate-soak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("soak.db").display());
        migrate::up(&url).await.unwrap();
        let settings = Settings {
            duration: Duration::from_secs(3),
            interval: Duration::from_secs(1),
            retention: Duration::ZERO,
            prune_every: Duration::from_millis(100),
            steps: 100,
            workers: 2,
        };
        let soak = run(Dialect::Sqlite, &url, settings).await.unwrap();
        let rounds: usize = soak.intervals.iter().map(|i| i.rounds).sum();
        let steps: usize = soak.intervals.iter().map(|i| i.steps).sum();
        assert!(soak.intervals.len() >= 2, "{:?}", soak.intervals);
        assert_eq!(steps, rounds * 100);
        let last = soak.intervals.last().unwrap();
        assert!(last.pruned > 0, "the pruner deleted nothing: {last:?}");
        assert!(last.sizes.tables > 0 && last.sizes.indexes > 0, "{last:?}");
        assert!(last.sizes.files.unwrap() >= last.sizes.total(), "{last:?}");
        assert_eq!(soak.summary().len(), 2, "{:?}", soak.summary());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
