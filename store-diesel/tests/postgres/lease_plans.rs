//! The run claim's plan on 100k runs, 99% of them settled: the statement
//! the store really sends (from its `StatementLog`) is prepared and
//! `EXPLAIN EXECUTE`d, and both of its scans must walk their partial
//! indexes in order: no `Seq Scan` of the runs, no `Sort` of the unsettled
//! runs.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_core::RunId;
use flowstate_core::ports::RunLeaseStore;

use crate::support;

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text)]
    #[diesel(column_name = "QUERY PLAN")]
    line: String,
}

/// 100k runs: one in a hundred running (a tenth of those with a cancel
/// requested), the rest completed, failed or cancelled; some running runs
/// leased until far in the future, some waiting on a signal; 10k signals.
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

    for (sql, args, indexes) in [
        (
            &sent[0],
            "(0, 0, 1, 'w', 300000000)",
            &[
                "flowstate_runs_claimable_idx",
                "flowstate_runs_cancel_requested_idx",
            ][..],
        ),
        (
            &sent[0],
            "(0, 0, 100, 'w', 300000000)",
            &[
                "flowstate_runs_claimable_idx",
                "flowstate_runs_cancel_requested_idx",
            ][..],
        ),
        (
            &renew[0],
            "(300000000, 'run-00000100', 1, '{running,suspended}', 0)",
            &["flowstate_runs_pkey"][..],
        ),
    ] {
        conn.batch_execute("DEALLOCATE ALL").await.unwrap();
        conn.batch_execute(&format!("PREPARE q AS {sql}"))
            .await
            .unwrap();
        let lines: Vec<PlanLine> =
            diesel::sql_query(format!("EXPLAIN (FORMAT TEXT) EXECUTE q{args}"))
                .load(&mut conn)
                .await
                .unwrap();
        let plan = lines
            .into_iter()
            .map(|l| l.line)
            .collect::<Vec<_>>()
            .join("\n");
        if std::env::var_os("FLOWSTATE_PRINT_PLANS").is_some() {
            eprintln!("{sql}\n{plan}\n");
        }
        // The runs table is never scanned whole. The pending signals (taken
        // ones are deleted) may be read once into a hash when the planner
        // expects many waiting runs to check: its choice, by cost.
        assert!(
            !plan.contains("Seq Scan on flowstate_runs "),
            "a scan of the whole runs table:\n{plan}"
        );
        assert!(
            !plan.contains("Sort"),
            "the unsettled runs are sorted:\n{plan}"
        );
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
