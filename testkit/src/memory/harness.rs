//! [`MemoryHarness`]: the harness of the reference backend, with every
//! hook, reaching into [`MemoryStore`]'s maps.

use std::future::Future;
use std::sync::Arc;

use flowstate_core::{RunId, StepId};

use super::MemoryStore;
use crate::clock::ManualClock;
use crate::harness::{Harness, Hooks, Pick, RowCounts};

/// The harness of [`MemoryStore`]: a fresh store reading a fresh
/// [`ManualClock`].
#[derive(Debug)]
pub struct MemoryHarness {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

impl MemoryHarness {
    /// An empty store on a clock standing at [`ManualClock::START`].
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new());
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        Self { store, clock }
    }
}

impl MemoryHarness {
    /// The clock the store reads, shared.
    pub(crate) fn clock_arc(&self) -> Arc<ManualClock> {
        Arc::clone(&self.clock)
    }
}

impl Default for MemoryHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness for MemoryHarness {
    type Store = MemoryStore;

    fn store(&self) -> &Arc<MemoryStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Hooks for MemoryHarness {
    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let store = Arc::clone(&self.store);
        async move {
            let removed = store.remove_history_row(step, attempt);
            assert!(
                removed,
                "no history row for attempt {attempt} of step {step}"
            );
        }
    }

    async fn fail_history_writes(&self, fail: bool) {
        self.store.fail_history_writes(fail);
    }

    async fn fail_history_writes_of(&self, step: Option<StepId>) {
        self.store.fail_history_writes_of(step);
    }

    async fn abort_after_pick(&self, pick: Option<Pick>) {
        self.store.abort_after_pick(pick);
    }

    async fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
        self.store.count_rows(run, steps)
    }
}
