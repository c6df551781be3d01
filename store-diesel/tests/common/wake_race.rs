//! The wake sweep racing a claimer, written once for PostgreSQL and
//! MySQL: a run's due wait is being replaced, in an open transaction,
//! by one not due (a claimer took the run and put it to wait again) when
//! the sweep's snapshot still sees the old one. The sweep picks the run
//! and waits for the row lock; once the transaction commits, the new wait
//! must stand. Ending it would wake the run before its time, without its
//! signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use flowstate_core::ports::RunWaitStore;
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use super::db::TestDb;
use super::records;

/// Runs the race on `dialect` with a holder connection of type `C`;
/// `blocked` is a count (`AS n`) of the sessions waiting for a row lock
/// in the sweep's statement, so the holder commits only once the sweep
/// waits on it.
pub async fn a_wait_begun_under_the_sweep_stands<C>(dialect: Dialect, blocked: &str)
where
    C: AsyncConnection + SimpleAsyncConnection + Send + 'static,
{
    let db = TestDb::migrated(dialect).await;
    let store = Arc::new(db.warm_store(StoreConfig::default(), 2).await);
    let run = records::run(&*store, json!({})).await;
    let asleep = format!(
        "UPDATE flowstate_runs SET status = 'running', wake_at = 1 WHERE id = '{}'",
        run.id
    );
    assert_eq!(db.execute(&asleep).await, 1, "the run asleep, long due");
    let mut holder = C::establish(&db.url).await.unwrap();
    // Two calls, so the update has run (and holds the row) before the
    // sweep starts, whatever a multi-statement batch returns after.
    holder.batch_execute("BEGIN").await.unwrap();
    holder
        .batch_execute(&format!(
            "UPDATE flowstate_runs SET wake_at = 9000000000000000, waiting_on = 'sig' \
             WHERE id = '{}'",
            run.id
        ))
        .await
        .unwrap();
    let sweep = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.wake_expired().await }
    });
    let started = Instant::now();
    while db.count(blocked).await == 0 {
        if sweep.is_finished() {
            // Say what it answered: a sweep that ended without the lock
            // (a read that skipped the row) differs from one that failed.
            let answered = sweep.await.unwrap();
            panic!("the sweep answered {answered:?} without waiting for the row");
        }
        if started.elapsed() > Duration::from_secs(30) {
            sweep.abort();
            panic!("the sweep neither waited for the row nor answered in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    holder.batch_execute("COMMIT").await.unwrap();
    let woken = sweep.await.unwrap().unwrap();
    assert_eq!(woken, 0, "the sweep ended a wait that is not due");
    let stands = format!(
        "SELECT COUNT(*) AS n FROM flowstate_runs WHERE id = '{}' \
         AND wake_at = 9000000000000000 AND waiting_on = 'sig'",
        run.id
    );
    assert_eq!(db.count(&stands).await, 1, "the new wait stands");
    db.drop_database().await;
}
