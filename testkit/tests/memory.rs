//! The kit run against the in-memory reference backend: every family and
//! the hook cases over its full harness, and the crate doc's hookup over
//! `StoreHarness`.

use std::sync::Arc;

use flowstate_testkit::{ManualClock, MemoryHarness, MemoryStore, StoreHarness};

flowstate_testkit::suite!(memory, async { MemoryHarness::new() }, [all]);

/// A fresh, empty store that stamps times from `clock`.
async fn open(clock: Arc<ManualClock>) -> MemoryStore {
    MemoryStore::with_clock(clock)
}

flowstate_testkit::suite!(
    memory_hookup,
    StoreHarness::create(open),
    [
        runs,
        steps,
        versions,
        batch,
        definitions,
        events,
        virtual_users,
        pool,
        ticks,
        dispatch
    ]
);
