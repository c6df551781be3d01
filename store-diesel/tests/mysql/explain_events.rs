//! `dispatch_next`'s pick on MySQL/MariaDB, on 100k pending events, and
//! `dispatch_next_batch`'s (the same statement, 64 events): the pending
//! index read in the taking order, nothing sorted. A sort would
//! read, and under `FOR UPDATE` lock, every pending event for the one it
//! takes, and the other dispatchers would find them all held.

use flowstate_core::ports::EventQueueStore;

use crate::common::records::pick_of_dispatch_next;
use crate::explain::{assert_indexed, plan};
use crate::support;

/// 100k pending events (matched, no deliveries), due in the order of their
/// number.
const SEED: &str = "
CREATE TABLE digits (d INT NOT NULL);
INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
INSERT INTO flowstate_events (id, app_id, scope_id, event_type, data, context, authorization_snapshot,
    occurred_at, matched, attempts, dispatch_after)
SELECT CONCAT('00000000-0000-7000-8000-', LPAD(i, 12, '0')), 'app', 's', 'app.tick', '{}', '{}', '{}',
       i, 1, 0, i % 1000
FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS i
      FROM digits a CROSS JOIN digits b CROSS JOIN digits c CROSS JOIN digits e CROSS JOIN digits f) n;
DROP TABLE digits;
ANALYZE TABLE flowstate_events;
";

#[tokio::test]
async fn dispatch_next_takes_from_the_pending_index_without_sorting() {
    let (db, mut conn, log, store) = support::seeded(SEED).await;

    let pick = &pick_of_dispatch_next(&store, &log).await;
    let rows = plan(&mut conn, pick, &["0".into(), "1000000".into(), "1".into()]).await;
    assert_indexed(
        "dispatch_next",
        &rows,
        Some("flowstate_events_pending"),
        true,
    );

    // A batch's pick is the same statement with a larger bound limit, and
    // reads the same index for its 64.
    let (answers, sent) = log.capture(store.dispatch_next_batch(64)).await;
    assert_eq!(answers.unwrap().len(), 64);
    let batch_pick = sent
        .iter()
        .find(|s| s.contains("FOR UPDATE SKIP LOCKED"))
        .expect("the batch's pick");
    assert_eq!(batch_pick, pick, "one statement for one event and a batch");
    let rows = plan(
        &mut conn,
        batch_pick,
        &["0".into(), "1000000".into(), "64".into()],
    )
    .await;
    assert_indexed(
        "dispatch_next_batch",
        &rows,
        Some("flowstate_events_pending"),
        true,
    );
    drop(store);
    db.drop_database().await;
}
