//! [`SqliteHarness`]: the conformance suite's view of a SQLite store, on a
//! fresh database file per case.

use std::future::Future;
use std::sync::Arc;

use diesel::sql_query;
use diesel::sql_types::{BigInt, Text};
use flowstate_core::StepId;
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::sqlite::SqliteStore;
use flowstate_testkit::{Harness, ManualClock};

use crate::support::TestDb;

/// A store on a database file of its own, reading a manual clock.
#[derive(Debug)]
pub struct SqliteHarness {
    store: Arc<SqliteStore>,
    clock: Arc<ManualClock>,
    // Dropped last: removes the file once the store is gone.
    _db: TestDb,
}

impl SqliteHarness {
    /// A migrated, empty database and a store on it with the default limits
    /// and pool (the race cases need many connections at once).
    pub async fn create() -> Self {
        let db = TestDb::migrated().await;
        let clock = Arc::new(ManualClock::new());
        let store = db.store(StoreConfig::default().clock(clock.clone())).await;
        Self {
            store: Arc::new(store),
            clock,
            _db: db,
        }
    }
}

impl Harness for SqliteHarness {
    type Store = SqliteStore;

    fn store(&self) -> &Arc<SqliteStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let store = Arc::clone(&self.store);
        async move {
            let mut conn = store.pool().get("delete_history_row").await.unwrap();
            let query =
                sql_query("DELETE FROM flowstate_step_history WHERE step_id = ?1 AND attempt = ?2")
                    .bind::<Text, _>(step.to_string())
                    .bind::<BigInt, _>(i64::from(attempt));
            let deleted = diesel_async::RunQueryDsl::execute(query, &mut *conn)
                .await
                .unwrap();
            assert_eq!(
                deleted, 1,
                "no history row for attempt {attempt} of step {step}"
            );
        }
    }
}
