//! The recovery queries' plans on 100k runs, 99% of them settled, and 100k
//! steps, nearly all succeeded: the statements the store really sends
//! (from its `StatementLog`) are prepared and `EXPLAIN EXECUTE`d with real
//! values, and each must reach runs and steps through an index: no
//! `Seq Scan` of either table, whatever share of them is settled.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use flowstate_core::RunId;
use flowstate_core::ports::{RecoveryStore, RunRecoveryStore};

use crate::explain::{assert_indexed, lit, plan};
use crate::support;

/// 100k runs: one in a hundred running, the rest settled; one in three of
/// the running ones leased, half of those leases long run out. 100k steps,
/// one per run: the running runs' steps pending, running, succeeded or
/// failed in turn, one settled run's step in 97 left pending, the rest
/// succeeded; 10k signals.
const LOAD: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at,
                            lease_owner, lease_expires_at, lease_token)
SELECT '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 'wf',
       CASE WHEN g % 100 = 0 THEN 'running'
            ELSE (ARRAY['completed','failed','cancelled'])[g % 3 + 1] END,
       '{}'::jsonb, g, g,
       CASE WHEN g % 300 = 0 THEN 'w' END,
       CASE WHEN g % 600 = 0 THEN 1 WHEN g % 300 = 0 THEN 9000000000000000 END,
       CASE WHEN g % 300 = 0 THEN 1 ELSE 0 END
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, current_attempt,
                             retries, created_at, updated_at)
SELECT '00000000-0000-7000-8000-' || lpad(g::text, 12, '0'),
       '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 's', 'f',
       CASE WHEN g % 100 = 0 THEN (ARRAY['pending','running','succeeded','failed'])[(g / 100) % 4 + 1]
            WHEN g % 97 = 0 THEN 'pending' ELSE 'succeeded' END,
       '{}'::jsonb, 1, 1, g, g
FROM generate_series(1, 100000) AS g;
INSERT INTO flowstate_run_signals (run_id, name, payload, sent_at)
SELECT '00000000-0000-7000-9000-' || lpad(g::text, 12, '0'), 'sig', '{}'::jsonb, g
FROM generate_series(1, 100000, 10) AS g;
ANALYZE;
";

/// The one statement `statements` holds.
fn sent(statements: Vec<String>) -> String {
    assert_eq!(statements.len(), 1, "{statements:?}");
    statements.into_iter().next().unwrap()
}

/// Asserts `plan` reads neither big table whole.
fn assert_no_big_scan(what: &str, plan: &str) {
    for table in ["flowstate_runs", "flowstate_steps"] {
        assert!(
            !plan.contains(&format!("Seq Scan on {table} ")),
            "{what} scans {table}:\n{plan}"
        );
    }
}

#[tokio::test]
async fn the_recovery_queries_use_their_indexes_on_100k_runs() {
    let (store, log, url) = support::logged_store().await;
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    conn.batch_execute(LOAD).await.unwrap();
    let idle = Duration::from_secs(60);

    let (found, statements) = log.capture(store.undispatched_steps(idle, 100)).await;
    assert_eq!(found.unwrap().len(), 100);
    let relay = sent(statements);
    let (found, statements) = log.capture(store.stalled_runs(idle, 100)).await;
    assert!(!found.unwrap().is_empty());
    let stalled = sent(statements);
    let (reaped, statements) = log.capture(store.reap_expired_leases(100)).await;
    assert_eq!(reaped.unwrap().len(), 100, "166 leases ran out");
    let reap = sent(statements);
    let (_, statements) = log
        .capture(store.lease_run(RunId::generate(), "w", idle))
        .await;
    assert_eq!(statements.len(), 2, "{statements:?}");
    let lease_run = statements[0].clone();

    // Binds as the store sends them, in `$n` order: the relay's now, its
    // cutoff twice, the limit; the sweep's limit of its last-activity
    // subquery (1), its cutoff, the lease offset twice, the cutoff of its
    // steps, the limit (the statuses are literals in the text).
    let now = flowstate_core::Clock::now(&flowstate_core::SystemClock).as_micros();
    let cutoff = (now - 60_000_000).to_string();
    let p = plan(
        &mut conn,
        &relay,
        &[
            now.to_string(),
            cutoff.clone(),
            cutoff.clone(),
            "100".into(),
        ],
    )
    .await;
    assert_indexed("undispatched_steps", &p, &["flowstate_steps_claimable_idx"]);
    assert!(p.contains("flowstate_runs_pkey"), "{p}");
    assert!(!p.contains("Sort"), "the relay sorts:\n{p}");

    let p = plan(
        &mut conn,
        &stalled,
        &[
            "1".into(),
            cutoff.clone(),
            "0".into(),
            "0".into(),
            cutoff.clone(),
            "100".into(),
        ],
    )
    .await;
    assert_indexed("stalled_runs", &p, &["flowstate_runs_running_updated_idx"]);
    assert!(!p.contains("Sort"), "the stalled sweep sorts:\n{p}");

    let p = plan(&mut conn, &reap, &["0".into(), "100".into()]).await;
    assert_no_big_scan("reap_expired_leases", &p);
    assert!(
        p.contains("flowstate_runs_lease_expiry_idx"),
        "the reap does not walk the expiry index:\n{p}"
    );
    assert!(p.contains("LockRows"), "the reap locks nothing:\n{p}");

    // The assignments' binds (the cancelled status, the stamp, 1, no
    // worker or the worker, the expiry, the cleared wait, `false`), then
    // the run and the lease offset twice (the leasable statuses are
    // literals in the text).
    let args = [
        lit("cancelled"),
        now.to_string(),
        "1".into(),
        "NULL".into(),
        lit("w"),
        "NULL".into(),
        "60000000".into(),
        "NULL".into(),
        "NULL".into(),
        "false".into(),
        lit("00000000-0000-7000-9000-000000000100"),
        "0".into(),
        "0".into(),
    ];
    assert_eq!(placeholders(&lease_run), args.len(), "{lease_run}");
    let p = plan(&mut conn, &lease_run, &args).await;
    assert_no_big_scan("lease_run", &p);
    assert!(p.contains("flowstate_runs_pkey"), "{p}");
    support::drop_database(&url).await;
}

/// The highest `$n` in `sql`.
fn placeholders(sql: &str) -> usize {
    sql.split('$')
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
        .unwrap_or(0)
}
