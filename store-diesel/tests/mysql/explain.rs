//! Query plans on MySQL: the hot statements find their rows through an
//! index (never a full scan), on tables with enough rows that the optimizer
//! has a choice.

use diesel::sql_types::Nullable;
use diesel::sql_types::Text;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};

use crate::support::TestDb;

/// One row of `EXPLAIN`.
#[derive(Debug, diesel::QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = Nullable<Text>)]
    table: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "type")]
    access: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    key: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "Extra")]
    extra: Option<String>,
}

async fn plan(conn: &mut AsyncMysqlConnection, sql: &str) -> Vec<PlanRow> {
    diesel::sql_query(format!("EXPLAIN {sql}"))
        .load::<PlanRow>(conn)
        .await
        .expect(sql)
}

/// 2,000 runs (half of them children of the first), 4 steps each, one
/// history row per step.
const SEED: &str = "
INSERT INTO flowstate_runs (id, workflow, status, input, parent_id, created_at, updated_at)
  VALUES ('00000000-0000-7000-8000-000000000000', 'wf0', 'running', '{}', NULL, 0, 0);
INSERT INTO flowstate_runs (id, workflow, status, input, parent_id, created_at, updated_at)
  SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), CONCAT('wf', i % 10),
         ELT(1 + i % 5, 'running', 'suspended', 'completed', 'failed', 'cancelled'), '{}',
         IF(i % 2 = 0, '00000000-0000-7000-8000-000000000000', NULL), i, i
  FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS i
        FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c
        CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1) e) n
  WHERE i > 0;
INSERT INTO flowstate_steps (id, run_id, name, function_name, status, input, retries, created_at, updated_at)
  SELECT CONCAT(SUBSTRING(r.id, 1, 24), LPAD(k.j, 4, '0'), SUBSTRING(r.id, 29)), r.id, CONCAT('s', k.j), 'f',
         'pending', '{}', 0, r.created_at, r.created_at
  FROM flowstate_runs r CROSS JOIN (SELECT 1 AS j UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) k;
INSERT INTO flowstate_step_history (id, step_id, attempt, status, created_at)
  SELECT CONCAT('f', SUBSTRING(id, 2)), id, 1, 'pending', created_at FROM flowstate_steps;
ANALYZE TABLE flowstate_runs, flowstate_steps, flowstate_step_history;
";

const RUN: &str = "00000000-0000-7000-8000-000000000042";
const PARENT: &str = "00000000-0000-7000-8000-000000000000";

#[tokio::test]
async fn hot_statements_use_indexes() {
    let db = TestDb::migrated().await;
    let mut conn = db.connection().await;
    conn.batch_execute(SEED).await.expect("seed");
    let statements = [
        (
            "claim",
            format!(
                "UPDATE flowstate_steps SET status = 'running' WHERE run_id = '{RUN}' AND name = 's1' \
                 AND (function_name IS NULL OR function_name = 'f') AND status IN ('pending', 'scheduled')"
            ),
        ),
        ("find_step", format!("SELECT * FROM flowstate_steps s WHERE s.run_id = '{RUN}' AND s.name = 's2'")),
        (
            "transition",
            "UPDATE flowstate_steps SET status = 'running' WHERE id = '00000000-0000-7000-8000-000000420001' \
             AND status IN ('pending')"
                .to_owned(),
        ),
        (
            "list_steps",
            format!(
                "SELECT s.* FROM flowstate_runs r LEFT JOIN flowstate_steps s ON s.run_id = r.id \
                 WHERE r.id = '{RUN}' ORDER BY s.created_at, s.name"
            ),
        ),
        (
            "step_history",
            format!(
                "SELECT h.*, s.name FROM flowstate_runs r LEFT JOIN flowstate_steps s ON s.run_id = r.id \
                 LEFT JOIN flowstate_step_history h ON h.step_id = s.id WHERE r.id = '{RUN}' \
                 ORDER BY h.created_at, h.attempt, h.id"
            ),
        ),
        (
            "count_children",
            format!(
                "SELECT c.status, COUNT(c.id) FROM flowstate_runs p LEFT JOIN flowstate_runs c \
                 ON c.parent_id = p.id WHERE p.id = '{PARENT}' GROUP BY c.status"
            ),
        ),
        (
            "list_runs by status",
            "SELECT * FROM flowstate_runs r WHERE r.status = 'failed' AND (r.created_at < 1500 OR \
             (r.created_at = 1500 AND r.id < 'z')) ORDER BY r.created_at DESC, r.id DESC LIMIT 50"
                .to_owned(),
        ),
        (
            "list_runs",
            "SELECT * FROM flowstate_runs r WHERE (r.created_at < 1500 OR (r.created_at = 1500 AND r.id < 'z')) \
             ORDER BY r.created_at DESC, r.id DESC LIMIT 50"
                .to_owned(),
        ),
        (
            "list_runs by workflow",
            "SELECT * FROM flowstate_runs r WHERE r.workflow = 'wf3' \
             ORDER BY r.created_at DESC, r.id DESC LIMIT 50"
                .to_owned(),
        ),
        (
            "list_runs by parent",
            "SELECT * FROM flowstate_runs r WHERE r.parent_id = 'p' \
             ORDER BY r.created_at DESC, r.id DESC LIMIT 50"
                .to_owned(),
        ),
        (
            "list_runs by workflow and status",
            "SELECT * FROM flowstate_runs r WHERE r.workflow = 'wf3' AND r.status = 'suspended' \
             ORDER BY r.created_at DESC, r.id DESC LIMIT 50"
                .to_owned(),
        ),
    ];
    for (what, sql) in statements {
        let rows = plan(&mut conn, &sql).await;
        assert!(!rows.is_empty(), "{what}: no plan");
        for row in &rows {
            assert!(
                row.access.as_deref() != Some("ALL") && row.key.is_some(),
                "{what} scans {:?} without an index: {rows:#?}",
                row.table
            );
        }
        if what.starts_with("list_runs") {
            let extra = rows[0].extra.as_deref().unwrap_or_default();
            assert!(
                !extra.contains("filesort"),
                "{what} sorts instead of reading the index in order: {rows:#?}"
            );
        }
    }
    db.drop_database().await;
}
