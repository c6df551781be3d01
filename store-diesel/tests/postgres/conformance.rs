//! The conformance suite of flowstate-testkit, on PostgreSQL: every case on
//! a fresh database of its own, read through a `ManualClock`.

use std::future::Future;
use std::sync::Arc;

use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use flowstate_core::StepId;
use flowstate_store_diesel::StoreConfig;
use flowstate_store_diesel::postgres::PgStore;
use flowstate_testkit::{Harness, ManualClock};

use crate::support;

/// A migrated database of its own, a store on it reading a manual clock.
pub struct PgHarness {
    store: Arc<PgStore>,
    clock: Arc<ManualClock>,
    url: String,
}

impl PgHarness {
    /// A fresh database and a store with enough connections, all open, for
    /// the race cases (32 tasks at once) to really race rather than queue
    /// on connection setup.
    pub async fn create() -> Self {
        const CONNECTIONS: usize = 34;
        let url = support::migrated_database().await;
        let clock = Arc::new(ManualClock::new());
        let config = StoreConfig::default()
            .pool_size(CONNECTIONS)
            .clock(clock.clone());
        let store = PgStore::connect(&url, config).await.expect("connect");
        let opening: Vec<_> = (0..CONNECTIONS).map(|_| store.pool().get("warm")).collect();
        for conn in futures_util::future::join_all(opening).await {
            drop(conn.expect("open a pooled connection"));
        }
        Self {
            store: Arc::new(store),
            clock,
            url,
        }
    }
}

impl Harness for PgHarness {
    type Store = PgStore;

    fn store(&self) -> &Arc<PgStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let store = Arc::clone(&self.store);
        async move {
            let mut conn = store
                .pool()
                .get("delete_history_row")
                .await
                .expect("a connection");
            let deleted = diesel::sql_query(
                "DELETE FROM flowstate_step_history WHERE step_id = $1 AND attempt = $2",
            )
            .bind::<Text, _>(step.to_string())
            .bind::<BigInt, _>(i64::from(attempt))
            .execute(&mut *conn)
            .await
            .expect("delete a history row");
            assert_eq!(
                deleted, 1,
                "no history row for attempt {attempt} of step {step}"
            );
        }
    }

    async fn teardown(self) {
        drop(self.store);
        support::drop_database(&self.url).await;
    }
}

flowstate_testkit::conformance_suite!(postgres, PgHarness::create());
