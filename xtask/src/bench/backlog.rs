//! The bench at scale (issue 31): `--backlog N` measures per-step and
//! batched claim + succeed, run leases (one run a claim, and batched) and
//! events on a second database of the same server (a second SQLite file)
//! holding a backlog, each round taken in turn with the same work on the
//! bench's own database, which has none ([`super::interleaved`]), so the
//! ratio of the pair says what the backlog costs.
//!
//! The backlog, seeded once per run by bulk SQL (PostgreSQL's
//! `generate_series`, a cross join of digits on MySQL, a recursive CTE on
//! SQLite), all older than the measured work:
//!
//! - `N` running runs, every odd one held under a live lease by another
//!   holder ([`HOLDER`], its expiry a year on), every even one asleep for
//!   a year with no lease (a `Wait::For`): an engine with `N` runs in
//!   flight or waiting on a timer, in the same table as the runs the lease
//!   workloads create, that no measured claim may take (a lease only
//!   expires by the holder's silence; a real engine renews a shorter one,
//!   which the far expiry stands for over the bench's minutes). The lease
//!   workloads check that every run they created was finished once, and
//!   count any other run they lease (runs other sections left running), so
//!   the test below checks after them that every held run is still held.
//! - For each run one pending step (the queue) and one succeeded step, and
//!   the history row of each: `N` queued steps, `N` settled steps, `2N`
//!   history rows. The queued steps are pinned to a function of their own
//!   ([`FUNCTION`]), so no measured worker takes them.
//! - `N` dispatched events of a type of their own ([`EVENT_TYPE`]), each
//!   with its delivery naming the backlog run it started, and the
//!   definitions they matched: a few workflows, each with its published
//!   version and activation, one of them listening for the measured
//!   events' type in another scope, so matching a measured event reads
//!   activations of its type that it must leave out, as in life.
//!
//! The measured step claims find their steps by key (per-step) or in their
//! own function's range of the claim index (batched), and a dispatcher
//! takes pending events only, so what this measures there is the tables'
//! and indexes' size (their depth, and what still fits in the server's
//! cache), not a scan over the backlog. A run claim reads no held run
//! either, since migration `2026-12-06-000020_free_runs_claim`: it takes
//! free runs from an index that holds only runs without a lease and
//! run-out leases from a range of the expiry index that ends at the clock
//! (SCHEMA.md, "The run claim reads no held run"), and no sleeping run
//! since `2026-12-07-000021_sleeping_runs_claim`: sleepers are read from
//! a range of their own that ends at the clock. Before them, the claim
//! took the oldest leasable runs from an index of every unsettled run,
//! held or not, and read past all `N` held runs on every claim: 0.016x at
//! 1,000,000 on PostgreSQL, `database is locked` on SQLite, and on
//! MariaDB, where its `FOR UPDATE SKIP LOCKED` locked each row it read,
//! lock heaps filled the buffer pool and InnoDB aborted the server. The
//! lease works here are the proof that it no longer does.
//! `FLOWSTATE_BACKLOG_WORKS` ([`works`]) names the works to measure, so
//! the others can be measured at a size where per-run leases take too long.
//!
//! After seeding, the server's statistics are refreshed as its own
//! autovacuum or statistics would after a bulk load (`VACUUM ANALYZE` on
//! PostgreSQL, `ANALYZE TABLE` on MySQL), on both databases of the pair, so
//! neither plans with statistics the other lacks (a first PostgreSQL run
//! refreshed only the backlog's, and its per-step rounds ran 1.19x those
//! without a backlog); SQLite's store runs without statistics, so none are
//! gathered there.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig, migrate};
use serde_json::{Value, json};

use crate::backend::{self, ServerUrl};

/// The function the backlog's queued steps are pinned to.
pub const FUNCTION: &str = "bench.backlog";

/// The holder of the backlog runs' leases: no measured worker is named so.
pub const HOLDER: &str = "bench.backlog-engine";

/// The type of the backlog's dispatched events.
pub const EVENT_TYPE: &str = "bench.backlog";

/// The type the events workload emits (`workloads::events`): one backlog
/// activation listens for it in another scope.
const MEASURED_EVENT_TYPE: &str = "bench.tick";

/// How far on the backlog runs' leases expire: a year, in microseconds.
const HELD_FOR_US: i64 = 366 * 86_400_000_000;

/// The backlog's definitions: (workflow, version, activation) id suffixes,
/// scope, workflow name and event type. The first's activation is the one
/// the backlog events were delivered to.
const DEFINITIONS: [(u8, &str, &str, &str); 3] = [
    (1, "bench-backlog", "bench.backlog", EVENT_TYPE),
    (
        2,
        "bench-backlog",
        "bench.backlog.other",
        "bench.backlog.other",
    ),
    (
        3,
        "bench-backlog-other",
        "bench.events",
        MEASURED_EVENT_TYPE,
    ),
];

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
            "held_runs": self.backlog.div_ceil(2),
            "sleeping_runs": self.backlog / 2,
            "lease_holder": HOLDER,
            "dispatched_events": self.backlog,
            "deliveries": self.backlog,
            "activations": DEFINITIONS.len(),
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
            "VACUUM ANALYZE flowstate_events",
            "VACUUM ANALYZE flowstate_event_deliveries",
            "VACUUM ANALYZE flowstate_activations",
        ],
        Dialect::Mysql => &[
            "ANALYZE TABLE flowstate_runs, flowstate_steps, flowstate_step_history, \
             flowstate_events, flowstate_event_deliveries, flowstate_activations",
        ],
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
/// on: runs (odd held, even asleep), settled steps, queued steps, their history rows, then
/// the definitions, events and deliveries ([`events_sql`]). Ids are
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
            "id, workflow, status, input, created_at, updated_at, lease_owner, lease_token, \
             lease_expires_at, wake_at",
            format!(
                "{run}, 'bench.backlog', 'running', '{{}}', {at}, {at}, \
                 CASE WHEN g % 2 = 1 THEN '{HOLDER}' END, 1, \
                 CASE WHEN g % 2 = 1 THEN {t} + {HELD_FOR_US} END, \
                 CASE WHEN g % 2 = 0 THEN {t} + {HELD_FOR_US} END"
            ),
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
    .into_iter()
    .chain(events_sql(t, &run, &id(6), &at, &insert))
    .collect()
}

/// The id of the backlog's definition row `kind` (workflow 7, version 8,
/// activation 9) number `k`.
fn definition_id(kind: u8, k: u8) -> String {
    format!("0190a00{kind}-0000-7000-8000-{k:012}")
}

/// The definitions ([`DEFINITIONS`]) as literal rows, then `n` dispatched
/// events of [`EVENT_TYPE`], each with its delivery to the first
/// activation naming backlog run `run` (`event`, `at` and `insert` as in
/// [`seed_sql`]).
fn events_sql(
    t: i64,
    run: &str,
    event: &str,
    at: &str,
    insert: &dyn Fn(&str, &str, String) -> String,
) -> Vec<String> {
    let mut sql = Vec::new();
    for (k, scope, name, event_type) in DEFINITIONS {
        let (workflow, version, activation) = (
            definition_id(7, k),
            definition_id(8, k),
            definition_id(9, k),
        );
        sql.push(format!(
            "INSERT INTO flowstate_workflows (id, app_id, scope_id, name, enabled, \
             active_version_id, created_at) VALUES ('{workflow}', 'bench', '{scope}', '{name}', \
             TRUE, '{version}', {t})"
        ));
        sql.push(format!(
            "INSERT INTO flowstate_published_versions (id, workflow_id, hash, definition, \
             created_at) VALUES ('{version}', '{workflow}', 'h1', '{{}}', {t})"
        ));
        sql.push(format!(
            "INSERT INTO flowstate_activations (id, workflow_id, version_id, event_type, enabled, \
             authorization_snapshot, created_at) VALUES ('{activation}', '{workflow}', \
             '{version}', '{event_type}', TRUE, '{{\"as\": \"backlog\"}}', {t})"
        ));
    }
    let (_, scope, name, event_type) = DEFINITIONS[0];
    let (workflow, version, activation) = (
        definition_id(7, 1),
        definition_id(8, 1),
        definition_id(9, 1),
    );
    sql.push(insert(
        "flowstate_events",
        "id, app_id, scope_id, event_type, data, context, authorization_snapshot, occurred_at, \
         matched, dispatched_at, attempts, dispatch_after",
        format!(
            "{event}, 'bench', '{scope}', '{event_type}', '{{}}', '{{}}', '{{}}', {at}, 1, {at}, \
             1, {at}"
        ),
    ));
    sql.push(insert(
        "flowstate_event_deliveries",
        "event_id, activation_id, workflow_id, workflow_name, version_id, version_hash, \
         authorization_snapshot, run_id",
        format!(
            "{event}, '{activation}', '{workflow}', '{name}', '{version}', 'h1', \
             '{{\"as\": \"backlog\"}}', {run}"
        ),
    ));
    sql
}

/// The works the backlog section measures, by their label's part:
/// per-step (`""`), batched, run leases one a claim and batched, events.
pub const WORKS: [&str; 5] = ["", " batch", " leases", " leases batched", " events"];

/// The names `FLOWSTATE_BACKLOG_WORKS` takes (comma-separated), one a
/// work of [`WORKS`], in its order.
pub const WORK_NAMES: [&str; 5] = ["per-step", "batched", "leases", "leases-batched", "events"];

/// The works of [`WORKS`] `FLOWSTATE_BACKLOG_WORKS` names (all without it),
/// so a run at a size where one work is too slow measures the others.
pub fn works() -> Result<Vec<&'static str>> {
    let Ok(names) = std::env::var("FLOWSTATE_BACKLOG_WORKS") else {
        return Ok(WORKS.to_vec());
    };
    let mut chosen = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let index = WORK_NAMES
            .iter()
            .position(|w| *w == name)
            .with_context(|| {
                format!("FLOWSTATE_BACKLOG_WORKS: no work {name:?} (the works: {WORK_NAMES:?})")
            })?;
        chosen.push(index);
    }
    chosen.sort_unstable();
    chosen.dedup();
    Ok(chosen.into_iter().map(|index| WORKS[index]).collect())
}

/// The label of `name`'s column of `work` (one of [`WORKS`])
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
        assert_eq!(sql.len(), 5 + 3 * DEFINITIONS.len() + 2);
        assert!(
            sql[0].contains("d5.d") && !sql[0].contains("d6"),
            "{}",
            sql[0]
        );
        assert!(sql[0].ends_with("WHERE g <= 200000"), "{}", sql[0]);
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod seeded_tests {
    use diesel::sql_types::BigInt;
    use diesel::{Connection, RunQueryDsl, SqliteConnection, dsl::sql};

    use super::super::workloads;
    use super::*;

    /// `SELECT COUNT(*)` of `from_where` on `conn`.
    fn count(conn: &mut SqliteConnection, from_where: &str) -> i64 {
        diesel::select(sql::<BigInt>(&format!(
            "(SELECT COUNT(*) FROM {from_where})"
        )))
        .get_result(conn)
        .unwrap_or_else(|err| panic!("counting {from_where}: {err}"))
    }

    /// What the seed says it wrote, read back.
    fn check_backlog(conn: &mut SqliteConnection, n: i64) {
        let held = format!(
            "flowstate_runs WHERE status = 'running' AND lease_owner = '{HOLDER}' \
             AND lease_token = 1 AND lease_expires_at > {}",
            now_micros() + 86_400_000_000
        );
        assert_eq!(count(conn, &held), (n + 1) / 2, "held runs");
        let asleep = format!(
            "flowstate_runs WHERE status = 'running' AND lease_owner IS NULL \
             AND lease_expires_at IS NULL AND waiting_on IS NULL AND wake_at > {} \
             AND id LIKE '0190a001-%'",
            now_micros() + 86_400_000_000
        );
        assert_eq!(count(conn, &asleep), n / 2, "sleeping runs");
        let steps = |status: &str| {
            format!("flowstate_steps WHERE function_name = '{FUNCTION}' AND status = '{status}'")
        };
        assert_eq!(count(conn, &steps("pending")), n, "queued steps");
        assert_eq!(count(conn, &steps("succeeded")), n, "settled steps");
        let history = "flowstate_step_history h JOIN flowstate_steps s ON s.id = h.step_id \
                       WHERE s.function_name = 'bench.backlog'";
        assert_eq!(count(conn, history), 2 * n, "history rows");
        let events = format!(
            "flowstate_events WHERE event_type = '{EVENT_TYPE}' AND dispatched_at IS NOT NULL \
             AND dead_lettered_at IS NULL"
        );
        assert_eq!(count(conn, &events), n, "dispatched events");
        let delivered = format!(
            "flowstate_event_deliveries d JOIN flowstate_events e ON e.id = d.event_id \
             JOIN flowstate_runs r ON r.id = d.run_id WHERE e.event_type = '{EVENT_TYPE}' \
             AND r.id LIKE '0190a001-%'"
        );
        assert_eq!(count(conn, &delivered), n, "deliveries with their runs");
        let activations = count(
            conn,
            "flowstate_activations a JOIN flowstate_workflows w \
             ON w.id = a.workflow_id AND w.active_version_id = a.version_id WHERE a.enabled AND a.id LIKE '0190a009-%'",
        );
        assert_eq!(activations, DEFINITIONS.len() as i64, "live activations");
    }

    /// A backlog of 40 on SQLite holds what it says, and beside it the run
    /// lease workloads (one a claim and batched) and the events workload
    /// pass their exact-once checks without taking a held or sleeping run
    /// or matching a backlog activation: the held runs are still held and
    /// the sleeping ones asleep after them, and
    /// each measured event has exactly one delivery.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_backlog_holds_what_it_says_and_the_workloads_leave_it() {
        let dir = std::env::temp_dir().join(format!("flowstate-backlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bench-backlog.db");
        let url = format!("sqlite://{}", path.display());
        let n = 40;
        let seeded = seed(Dialect::Sqlite, &url, n).await.unwrap();
        assert_eq!(seeded.to_json()["dispatched_events"], json!(n));
        let mut conn = SqliteConnection::establish(&path.display().to_string()).unwrap();
        check_backlog(&mut conn, n as i64);

        workloads::leases(&url, 2, 20).await.unwrap();
        workloads::leases_batched(&url, 2, 20, 4).await.unwrap();
        workloads::events(&url, 2, 12).await.unwrap();

        check_backlog(&mut conn, n as i64);
        let measured = format!(
            "flowstate_event_deliveries d JOIN flowstate_events e ON e.id = d.event_id \
             WHERE e.event_type = '{MEASURED_EVENT_TYPE}'"
        );
        assert_eq!(
            count(&mut conn, &measured),
            12,
            "one delivery a measured event"
        );
        let leased = "flowstate_runs WHERE workflow = 'bench.lease' AND status = 'completed'";
        assert_eq!(
            count(&mut conn, leased),
            40,
            "runs the lease workloads finished"
        );
        drop(conn);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
