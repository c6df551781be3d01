//! The run claim's pick on MariaDB when settled runs outnumber runnable
//! ones, as in any queue that has run for a while: it must walk
//! `flowstate_runs_leasable` from the first runnable run, not the
//! creation-order index through every settled run before it (which the
//! optimizer chose, at 77 ms a claim, until the pick named its index).

use flowstate_core::ports::RunLeaseStore;

use crate::explain::{assert_indexed, plan};
use crate::support;

/// 20,000 completed runs, created first, then 4,000 running ones: the
/// optimizer, taking runnable runs to be spread evenly, expects to meet one
/// every six rows of the creation-order index.
const SEED: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, created_at, updated_at)
  WITH digit AS (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
                 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
                 UNION ALL SELECT 8 UNION ALL SELECT 9),
       n AS (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS i
             FROM digit a, digit b, digit c, digit e, digit f)
  SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), 'wf',
         IF(i < 20000, 'completed', 'running'), '{}', i, i
  FROM n WHERE i < 24000;
ANALYZE TABLE flowstate_runs;
";

#[tokio::test]
async fn the_run_claim_walks_the_leasable_index_past_settled_runs() {
    let (db, mut conn, log, store) = support::seeded(SEED).await;
    let lease_for = std::time::Duration::from_secs(60);
    let (leased, statements) = log.capture(store.claim_runs("w", 2, lease_for)).await;
    let leased = leased.unwrap();
    assert_eq!(leased.len(), 2);
    assert_eq!(
        leased[0].run.id.to_string(),
        "00000000-0000-7000-8000-000000020000",
        "the oldest runnable run first"
    );
    let picks: Vec<&String> = statements
        .iter()
        .filter(|s| s.starts_with("SELECT id, lease_token FROM flowstate_runs"))
        .collect();
    assert_eq!(
        picks.len(),
        2,
        "a pick of cancelled runs, then of runnable ones: {statements:#?}"
    );
    for pick in picks {
        let rows = plan(&mut conn, pick, &["0".into(), "0".into(), "2".into()]).await;
        assert_indexed(
            "the run claim's pick",
            &rows,
            Some("flowstate_runs_leasable"),
            true,
        );
        assert_eq!(rows[0].access.as_deref(), Some("ref"), "{rows:#?}");
    }
    db.drop_database().await;
}
