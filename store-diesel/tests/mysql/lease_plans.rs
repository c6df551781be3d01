//! The run claim's picks on MariaDB. When settled runs outnumber runnable
//! ones, as in any queue that has run for a while, they must walk
//! `flowstate_runs_leasable` from the first runnable run, not the
//! creation-order index through every settled run before it (which the
//! optimizer chose, at 77 ms a claim, until the pick named its index).
//! When an engine holds many runs under live leases or has put many to
//! sleep, the pick must read and lock none of them (one range of every
//! unsettled run made it lock all of them: at 1,000,000 held, InnoDB
//! aborted the server when lock heaps filled its buffer pool).

use diesel::sql_types::BigInt;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::ports::{RunLeaseStore, RunWaitStore};

use crate::explain::{PlanRow, bound, plan};
use crate::support;

/// Numbers 0..100,000 as `n(i)`, for seeds.
const NUMBERS: &str = "
  WITH digit AS (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
                 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
                 UNION ALL SELECT 8 UNION ALL SELECT 9),
       n AS (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS i
             FROM digit a, digit b, digit c, digit e, digit f)";

/// 20,000 completed runs, created first, then 4,000 running ones: the
/// optimizer, taking runnable runs to be spread evenly, expects to meet one
/// every six rows of the creation-order index.
fn settled_seed() -> String {
    format!(
        "INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at)
         {NUMBERS}
         SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), 'wf',
                IF(i < 20000, 'completed', 'running'), '{{}}', i, i
         FROM n WHERE i < 24000;
         ANALYZE TABLE flowstate_runs;"
    )
}

/// 10,000 running runs held by another worker until far in the future,
/// 10,000 asleep until far in the future, then 5 asleep whose time has
/// come, 5 whose lease ran out and 90 free, the newest: an engine with
/// 20,000 runs in flight or asleep.
fn held_seed() -> String {
    format!(
        "INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at,
                                     lease_owner, lease_expires_at, lease_token, wake_at)
         {NUMBERS}
         SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), 'wf', 'running', '{{}}',
                i, i, IF(i < 10000 OR i BETWEEN 20005 AND 20009, 'other', NULL),
                CASE WHEN i < 10000 THEN 9000000000000000 WHEN i BETWEEN 20005 AND 20009 THEN 5 END,
                1,
                CASE WHEN i BETWEEN 10000 AND 19999 THEN 9000000000000000
                     WHEN i BETWEEN 20000 AND 20004 THEN 5 END
         FROM n WHERE i < 20100;
         ANALYZE TABLE flowstate_runs;"
    )
}

/// The two picks a claim sent: of runs with a cancel requested, then of
/// runs to lease.
fn picks(statements: &[String]) -> (String, String) {
    let cancels: Vec<&String> = statements
        .iter()
        .filter(|s| s.starts_with("SELECT id, lease_token, created_at FROM flowstate_runs"))
        .collect();
    let leases: Vec<&String> = statements
        .iter()
        .filter(|s| s.starts_with("(SELECT id, lease_token, created_at FROM flowstate_runs"))
        .collect();
    assert_eq!(
        (cancels.len(), leases.len()),
        (1, 1),
        "a pick of cancelled runs, then of runnable ones: {statements:#?}"
    );
    (cancels[0].clone(), leases[0].clone())
}

/// The lease pick's binds for `n` runs at the server's own time.
fn lease_args(n: u32) -> Vec<String> {
    let n = n.to_string();
    ["0", &n, "0", &n, "0", "0", &n, &n]
        .map(str::to_owned)
        .to_vec()
}

/// A run a pick answered.
#[derive(diesel::QueryableByName)]
struct Picked {
    #[diesel(sql_type = diesel::sql_types::Text)]
    #[allow(dead_code, reason = "read to count the rows")]
    id: String,
}

/// The records InnoDB counts as locked by this connection's open
/// transaction.
async fn rows_locked(conn: &mut diesel_async::AsyncMysqlConnection) -> i64 {
    diesel::select(diesel::dsl::sql::<BigInt>(
        "(SELECT trx_rows_locked FROM information_schema.INNODB_TRX \
          WHERE trx_mysql_thread_id = CONNECTION_ID())",
    ))
    .get_result(conn)
    .await
    .unwrap()
}

/// The plan's rows that read the runs table.
fn reads(rows: &[PlanRow]) -> Vec<&PlanRow> {
    rows.iter()
        .filter(|r| r.table.as_deref() == Some("flowstate_runs"))
        .collect()
}

#[tokio::test]
async fn the_run_claim_walks_the_leasable_index_past_settled_runs() {
    let (db, mut conn, log, store) = support::seeded(&settled_seed()).await;
    let lease_for = std::time::Duration::from_secs(60);
    let (leased, statements) = log.capture(store.claim_runs("w", 2, lease_for)).await;
    let leased = leased.unwrap();
    assert_eq!(leased.len(), 2);
    assert_eq!(
        leased[0].run.id.to_string(),
        "00000000-0000-7000-8000-000000020000",
        "the oldest runnable run first"
    );
    let (cancels, leases) = picks(&statements);
    let rows = plan(&mut conn, &cancels, &["0".into(), "0".into(), "2".into()]).await;
    // The runs with a cancel requested (few) whose lease is free or ran
    // out: a range of the index, sorted.
    assert_eq!(
        rows[0].key.as_deref(),
        Some("flowstate_runs_leasable"),
        "{rows:#?}"
    );
    assert!(
        matches!(rows[0].access.as_deref(), Some("ref" | "range")),
        "{rows:#?}"
    );

    let rows = plan(&mut conn, &leases, &lease_args(2)).await;
    let runs = reads(&rows);
    assert_eq!(
        runs.len(),
        3,
        "a free part, a due part and a run-out part: {rows:#?}"
    );
    for (read, access) in runs.iter().zip(["ref", "range", "range"]) {
        assert_eq!(
            read.key.as_deref(),
            Some("flowstate_runs_leasable"),
            "{rows:#?}"
        );
        assert_eq!(read.access.as_deref(), Some(access), "{rows:#?}");
        let extra = read.extra.as_deref().unwrap_or_default();
        assert!(!extra.contains("filesort"), "a part sorts: {rows:#?}");
    }
    db.drop_database().await;
}

#[tokio::test]
async fn the_run_claim_reads_and_locks_no_run_held_or_asleep() {
    let (db, mut conn, log, store) = support::seeded(&held_seed()).await;
    let lease_for = std::time::Duration::from_secs(60);
    let (leased, statements) = log.capture(store.claim_runs("w", 32, lease_for)).await;
    let mut ids: Vec<String> = leased
        .unwrap()
        .iter()
        .map(|l| l.run.id.to_string())
        .collect();
    ids.sort();
    let oldest: Vec<String> = (20_000..20_032)
        .map(|i| format!("00000000-0000-7000-8000-{i:012}"))
        .collect();
    assert_eq!(
        ids, oldest,
        "the 5 woken runs, the 5 run-out leases and the 22 oldest free runs"
    );

    // The pick again, in a transaction: the records it locked (68 free
    // runs left, none run out or woken) are what it read. InnoDB counts
    // each index record it locks: a run's entry in the index, its row, and
    // the next entry after each range, so a pick of 32 locks under 4 a
    // run; a pick that read the held or sleeping runs would lock 10,000 at
    // least.
    let (_, leases) = picks(&statements);
    conn.batch_execute("BEGIN").await.unwrap();
    let picked: Vec<Picked> = diesel::sql_query(bound(&leases, &lease_args(32)))
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(picked.len(), 32);
    let locked = rows_locked(&mut conn).await;
    conn.batch_execute("ROLLBACK").await.unwrap();
    assert!(
        (32..=128).contains(&locked),
        "the pick locked {locked} rows for 32 runs (10,000 held, 10,000 asleep)"
    );
    let held: i64 = diesel::select(diesel::dsl::sql::<BigInt>(
        "(SELECT COUNT(*) FROM flowstate_runs WHERE lease_owner = 'other')",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(held, 10_000, "every live lease still held");
    let asleep: i64 = diesel::select(diesel::dsl::sql::<BigInt>(
        "(SELECT COUNT(*) FROM flowstate_runs WHERE wake_at = 9000000000000000 \
          AND lease_owner IS NULL)",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(asleep, 10_000, "every sleeper still asleep");
    db.drop_database().await;
}

/// The wake sweep (`wake_expired`, every pass of the recovery `Sweeper`)
/// among the same 20,000 runs held or asleep: a range of
/// `flowstate_runs(wake_at)` (migration 000022) that reads and locks the 5
/// waits whose time has come. Before that index its `UPDATE` read, and
/// locked while it read, every unsettled run.
#[tokio::test]
async fn the_wake_sweep_reads_and_locks_only_the_waits_due() {
    let (db, mut conn, log, store) = support::seeded(&held_seed()).await;
    let (woken, statements) = log.capture(store.wake_expired()).await;
    assert_eq!(woken.unwrap(), 5, "the 5 sleepers whose time has come");
    assert_eq!(statements.len(), 1, "{statements:?}");
    // The lease clock offset.
    let args = ["0".to_owned()];
    let due_again = "UPDATE flowstate_runs SET wake_at = 5 WHERE id BETWEEN \
         '00000000-0000-7000-8000-000000020000' AND '00000000-0000-7000-8000-000000020004'";
    conn.batch_execute(due_again).await.unwrap();

    let rows = plan(&mut conn, &statements[0], &args).await;
    let runs = reads(&rows);
    assert_eq!(runs.len(), 1, "{rows:#?}");
    assert_eq!(
        runs[0].key.as_deref(),
        Some("flowstate_runs_wake_at"),
        "{rows:#?}"
    );
    assert_eq!(runs[0].access.as_deref(), Some("range"), "{rows:#?}");

    // The sweep itself, in a transaction: what it locked is what it read.
    conn.batch_execute("BEGIN").await.unwrap();
    let woken = diesel::sql_query(bound(&statements[0], &args))
        .execute(&mut conn)
        .await
        .unwrap();
    let locked = rows_locked(&mut conn).await;
    conn.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(woken, 5);
    assert!(
        (5..=20).contains(&locked),
        "the sweep locked {locked} rows for 5 waits due (10,000 held, 10,000 asleep)"
    );
    db.drop_database().await;
}
