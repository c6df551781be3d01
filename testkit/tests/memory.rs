//! The conformance suite, run against the in-memory reference backend: with
//! its full harness, and hooked up as the crate doc shows a backend of
//! one's own, through `StoreHarness`.

use std::sync::Arc;

use flowstate_testkit::{ManualClock, MemoryHarness, MemoryStore, StoreHarness};

flowstate_testkit::conformance_suite!(memory, async { MemoryHarness::new() });

flowstate_testkit::batch_suite!(memory_batch, async { MemoryHarness::new() });
flowstate_testkit::virtual_users_suite!(memory_virtual_users, async { MemoryHarness::new() });
flowstate_testkit::events_suite!(memory_events, async { MemoryHarness::new() });
flowstate_testkit::event_queue_suite!(memory_event_queue, async { MemoryHarness::new() });
flowstate_testkit::lease_suite!(memory_leases, async { MemoryHarness::new() });
flowstate_testkit::recovery_suite!(memory_recovery, async { MemoryHarness::new() });
flowstate_testkit::pool_suite!(memory_pool, async { MemoryHarness::new() });

/// A fresh, empty store that stamps times from `clock`.
async fn open(clock: Arc<ManualClock>) -> MemoryStore {
    MemoryStore::with_clock(clock)
}

flowstate_testkit::conformance_suite!(memory_hookup, StoreHarness::create(open));
flowstate_testkit::batch_suite!(memory_hookup_batch, StoreHarness::create(open));
