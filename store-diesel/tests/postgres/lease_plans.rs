//! The run claim's plan on 100k runs, 99% of them settled: the statement
//! the store really sends (from its `StatementLog`) is prepared and
//! `EXPLAIN EXECUTE`d, and each of its four picks must walk its partial
//! index in order: no `Seq Scan` of the runs, no `Sort` but the merge of
//! the three lease picks' few rows. Then the claim among 100k runs held
//! under a live lease or asleep: `EXPLAIN ANALYZE` shows it reads none of
//! them.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::RunId;
use flowstate_core::ports::{RunLeaseStore, RunWaitStore};

use crate::explain::{plan, plan_with};
use crate::support;

/// 100k runs: one in a hundred running (a tenth of those with a cancel
/// requested), the rest completed, failed or cancelled; some running runs
/// leased until far in the future, some waiting on a signal, some asleep;
/// 10k signals.
const LOAD: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at,
                            cancel_requested, lease_owner, lease_expires_at, lease_token)
SELECT 'run-' || lpad(g::text, 8, '0'), 'wf',
       CASE WHEN g % 100 = 0 THEN 'running'
            ELSE (ARRAY['completed','failed','cancelled'])[g % 3 + 1] END,
       '{}'::jsonb, g, g,
       g % 1000 = 0,
       CASE WHEN g % 300 = 0 THEN 'w' END,
       CASE WHEN g % 300 = 0 THEN 9000000000000000 END,
       CASE WHEN g % 300 = 0 THEN 1 ELSE 0 END
FROM generate_series(1, 100000) AS g;
UPDATE flowstate_runs SET waiting_on = 'sig' WHERE status = 'running' AND right(id, 3) = '500';
UPDATE flowstate_runs SET wake_at = 9000000000000000
WHERE status = 'running' AND right(id, 3) = '700' AND lease_owner IS NULL;
INSERT INTO flowstate_run_signals (run_id, name, payload, sent_at)
SELECT 'run-' || lpad(g::text, 8, '0'), 'sig', '{}'::jsonb, g
FROM generate_series(1, 100000, 10) AS g;
ANALYZE;
";

#[tokio::test]
async fn the_claim_walks_its_partial_indexes_on_100k_runs() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD).await.unwrap();

    let lease = Duration::from_secs(300);
    let (_, sent) = log.capture(store.claim_run("w", lease)).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (_, renew) = log.capture(store.renew(RunId::generate(), 1, lease)).await;

    let claim_indexes = &[
        "flowstate_runs_free_idx",
        "flowstate_runs_sleeping_idx",
        "flowstate_runs_lease_expiry_idx",
        "flowstate_runs_cancel_requested_idx",
    ][..];
    for (sql, args, indexes) in [
        (&sent[0], "0, 0, 1, 'w', 300000000", claim_indexes),
        (&sent[0], "0, 0, 100, 'w', 300000000", claim_indexes),
        (
            &renew[0],
            "300000000, 'run-00000100', 1, 0",
            &["flowstate_runs_pkey"][..],
        ),
    ] {
        let plan = plan(&mut conn, sql, &[args.to_owned()]).await;
        // The runs table is never scanned whole. The pending signals (taken
        // ones are deleted) may be read once into a hash when the planner
        // expects many waiting runs to check: its choice, by cost.
        assert!(
            !plan.contains("Seq Scan on flowstate_runs "),
            "a scan of the whole runs table:\n{plan}"
        );
        // The one sort allowed is the merge of the lease picks' rows (at
        // most three times the claim's size), keyed on their CTEs.
        for line in plan.lines().filter(|l| l.contains("Sort Key")) {
            assert!(
                line.contains("Sort Key: free.created_at"),
                "the unsettled runs are sorted:\n{plan}"
            );
        }
        for index in indexes {
            assert!(
                plan.contains(&format!("Index Scan using {index}"))
                    || plan.contains(&format!("Index Only Scan using {index}")),
                "{index} is not walked:\n{plan}"
            );
        }
    }
    support::drop_database(&url).await;
}

/// 50,000 running runs held by another worker until far in the future,
/// 50,000 asleep until far in the future, then 5 asleep whose time has
/// come, 5 whose lease ran out and 90 free, the newest: an engine with
/// 100,000 runs in flight or asleep.
const HELD: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at,
                            lease_owner, lease_expires_at, lease_token, wake_at)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'), 'wf', 'running',
       '{}'::jsonb, g, g,
       CASE WHEN g <= 50000 OR g BETWEEN 100006 AND 100010 THEN 'other' END,
       CASE WHEN g <= 50000 THEN 9000000000000000 WHEN g BETWEEN 100006 AND 100010 THEN 5 END,
       1,
       CASE WHEN g BETWEEN 50001 AND 100000 THEN 9000000000000000
            WHEN g BETWEEN 100001 AND 100005 THEN 5 END
FROM generate_series(1, 100100) AS g;
ANALYZE;
";

/// What a scan of the plan read: the sum of its `Rows Removed by Filter`.
fn removed_by_filters(plan: &str) -> u64 {
    plan.lines()
        .filter_map(|l| l.trim().strip_prefix("Rows Removed by Filter: "))
        .map(|n| n.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test]
async fn the_claim_reads_no_run_held_or_asleep() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(HELD).await.unwrap();

    let lease = Duration::from_secs(300);
    let (leased, sent) = log.capture(store.claim_runs("w", 32, lease)).await;
    let leased = leased.unwrap();
    // The 5 woken runs and the 5 run-out leases are the oldest leasable
    // runs, then 22 free.
    let ids: Vec<String> = leased.iter().map(|l| l.run.id.to_string()).collect();
    let expected: Vec<String> = (100_001..=100_032)
        .map(|g| format!("00000000-0000-7000-8000-{g:012}"))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, expected, "the oldest 32 leasable runs");

    // The same claim again, analysed: 68 free runs left, none run out or
    // woken.
    let plan = plan_with(
        &mut conn,
        &sent[0],
        "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF",
        &["0, 0, 32, 'w', 300000000".to_owned()],
    )
    .await;
    assert_eq!(
        removed_by_filters(&plan),
        0,
        "the claim read runs it could not take:\n{plan}"
    );
    for index in [
        "flowstate_runs_free_idx",
        "flowstate_runs_sleeping_idx",
        "flowstate_runs_lease_expiry_idx",
    ] {
        let scan = plan
            .lines()
            .find(|l| l.contains(&format!("Index Scan using {index}")))
            .unwrap_or_else(|| panic!("{index} is not walked:\n{plan}"));
        let rows: u64 = scan
            .split("rows=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no row count: {scan}"));
        assert!(rows <= 32, "{index} read {rows} runs:\n{plan}");
    }
    let held: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT count(*) FROM flowstate_runs WHERE lease_owner = 'other')",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(held, 50_000, "every live lease still held");
    let asleep: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT count(*) FROM flowstate_runs WHERE wake_at = 9000000000000000 \
          AND lease_owner IS NULL)",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(asleep, 50_000, "every sleeper still asleep");
    support::drop_database(&url).await;
}

/// The wake sweep (`wake_expired`, every pass of the recovery `Sweeper`)
/// among the same 100,000 runs held or asleep: it reads the 5 waits whose
/// time has come, the free sleepers' from the claim's sleeping index and
/// the others' from `flowstate_runs_wake_idx` (migration 000022), and no
/// other run. Before, it read every unsettled run.
#[tokio::test]
async fn the_wake_sweep_reads_only_the_waits_due() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(HELD).await.unwrap();

    let (woken, sent) = log.capture(store.wake_expired()).await;
    assert_eq!(woken.unwrap(), 5, "the 5 sleepers whose time has come");
    assert_eq!(sent.len(), 1, "{sent:?}");
    // The same 5 due again, then the sweep analysed (rolled back) at the
    // lease clock offset 0.
    conn.batch_execute(
        "UPDATE flowstate_runs SET wake_at = 5 WHERE id BETWEEN \
         '00000000-0000-7000-8000-000000100001' AND '00000000-0000-7000-8000-000000100005'",
    )
    .await
    .unwrap();
    let plan = plan_with(
        &mut conn,
        &sent[0],
        "ANALYZE, COSTS OFF, TIMING OFF",
        &["0".to_owned()],
    )
    .await;
    assert_eq!(
        removed_by_filters(&plan),
        0,
        "the sweep read runs whose wait is not due:\n{plan}"
    );
    // The free sleepers due from the claim's sleeping index (5), every
    // other wait due from the wake index (none here).
    for (index, due) in [
        ("flowstate_runs_sleeping_idx", 5),
        ("flowstate_runs_wake_idx", 0),
    ] {
        let scan = plan
            .lines()
            .find(|l| {
                l.contains(&format!("Index Scan using {index}"))
                    || l.contains(&format!("Index Only Scan using {index}"))
            })
            .unwrap_or_else(|| panic!("the sweep does not walk {index}:\n{plan}"));
        assert!(scan.contains(&format!("rows={due} ")), "{scan}\n{plan}");
    }
    assert!(!plan.contains("Seq Scan on flowstate_runs"), "{plan}");
    let asleep: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT count(*) FROM flowstate_runs WHERE wake_at = 9000000000000000)",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(asleep, 50_000, "every sleeper not due still asleep");
    support::drop_database(&url).await;
}
