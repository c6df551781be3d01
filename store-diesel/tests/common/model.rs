//! The model test on one dialect: testkit's random operation sequences
//! ([`flowstate_testkit::model`]) on `MemoryStore`, the reference, and on a
//! `DieselStore`, every answer compared. Each sequence runs on a fresh
//! database of its own, dropped after it.

use std::sync::Arc;

use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::model::{ModelConfig, check};
use flowstate_testkit::{Harness, ManualClock, MemoryHarness};

use super::db::TestDb;

/// A `DieselStore` on a fresh database, stamping from its own
/// [`ManualClock`], its lease clock following that clock (claim deadlines
/// and expiry move with it), with a pool of two: a sequence runs one op at
/// a time.
pub struct ModelHarness {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    db: TestDb,
}

impl ModelHarness {
    /// A fresh migrated database of `dialect` and a store on it.
    pub async fn create(dialect: Dialect) -> Self {
        let db = TestDb::migrated(dialect).await;
        let clock = Arc::new(ManualClock::new());
        let config = StoreConfig::default()
            .pool_size(2)
            .clock(clock.clone())
            .lease_clock_offset(LeaseClockOffset::following(clock.clone()));
        let store = Arc::new(db.store(config).await);
        Self { store, clock, db }
    }
}

impl Harness for ModelHarness {
    type Store = DieselStore;

    fn store(&self) -> &Arc<DieselStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    async fn teardown(self) {
        drop(self.store);
        self.db.drop_database().await;
    }
}

/// Runs `cases` sequences of up to `max_ops` ops on `MemoryStore` and on
/// `dialect`, panicking with the shortest sequence whose answers differ.
pub fn memory_and_dialect_agree(dialect: Dialect, cases: u32, max_ops: usize) {
    let config = ModelConfig {
        cases,
        max_ops,
        // SQL deadlines are the database's clock plus the offset: the
        // harness clock plus the real time since the offset was made.
        real_time_lease_clock: true,
        ..ModelConfig::default()
    };
    check(
        &config,
        || async { MemoryHarness::new() },
        || ModelHarness::create(dialect),
    );
}
