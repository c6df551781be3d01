//! [`DieselHarness`]: the conformance suite's view of a [`DieselStore`] on a
//! database of its own, read through a `ManualClock`: the type users open
//! is the type the suite runs through, on every dialect.

use std::sync::Arc;

use flowstate_store_diesel::test_support::kit_hooks::HookDb;
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::{Harness, LeaseHarness, ManualClock, SkewedClock};

use super::db::TestDb;

/// Connections the race cases (32 tasks at once) need open so they race
/// rather than queue on connection setup.
const CONNECTIONS: usize = 34;

/// A store on a fresh database, its clock and the database.
pub struct DieselHarness {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    db: TestDb,
    /// The lease clock offset every store of this harness shares.
    lease_offset: LeaseClockOffset,
}

impl DieselHarness {
    /// A fresh migrated database of `dialect` and a store on it with every
    /// pooled connection already open.
    pub async fn create(dialect: Dialect) -> Self {
        let db = TestDb::migrated(dialect).await;
        let clock = Arc::new(ManualClock::new());
        // One clock, as the memory store has: leases, claim deadlines and
        // idleness are measured on the database's clock moved to read the
        // harness clock, so a case that moves the clock moves them too.
        let lease_offset = LeaseClockOffset::following(clock.clone());
        let config = StoreConfig::default()
            .pool_size(CONNECTIONS)
            .clock(clock.clone())
            .lease_clock_offset(lease_offset.clone());
        let store = db.store(config).await;
        let opening: Vec<_> = (0..CONNECTIONS)
            .map(|_| store.reserve_connection())
            .collect();
        for held in futures_util::future::join_all(opening).await {
            drop(held.expect("open a pooled connection"));
        }
        Self {
            store: Arc::new(store),
            clock,
            db,
            lease_offset,
        }
    }
}

impl Harness for DieselHarness {
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

/// The hooks reach behind the store through the test database's own
/// connections.
impl HookDb for TestDb {
    fn dialect(&self) -> Dialect {
        self.dialect
    }

    async fn execute(&self, sql: &str) -> usize {
        TestDb::execute(self, sql).await
    }

    async fn count(&self, sql: &str) -> u64 {
        u64::try_from(TestDb::count(self, sql).await).expect("a count")
    }
}

flowstate_store_diesel::impl_kit_hooks!(DieselHarness, db);

impl LeaseHarness for DieselHarness {
    async fn advance_lease_clock(&self, by: std::time::Duration) {
        self.lease_offset.advance(by);
    }

    async fn skewed_store(&self, skew_micros: i64) -> Arc<DieselStore> {
        let clock = Arc::new(SkewedClock::new(self.clock.clone(), skew_micros));
        let config = StoreConfig::default()
            .pool_size(4)
            .clock(clock)
            .lease_clock_offset(self.lease_offset.clone());
        Arc::new(self.db.store(config).await)
    }
}
