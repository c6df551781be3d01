//! [`StoreHarness`]: the harness of any backend that can open a fresh store
//! for a given clock, so hooking a backend up is one function and one macro
//! call.

use std::future::Future;
use std::sync::Arc;

use flowstate_core::ports::Store;

use crate::clock::ManualClock;
use crate::harness::Harness;

/// A [`Harness`] made from one async function that opens a fresh, empty
/// store reading the clock it is handed: for a database, one made for this
/// call alone (the suite makes one harness per case, and cases run in
/// parallel).
///
/// It has none of the harness's [`Hooks`](crate::Hooks) (a history row
/// deleted behind the store's back, history writes made to fail, rows
/// counted behind the ports) and is no [`LeaseHarness`](crate::LeaseHarness),
/// so a suite over it lists neither `hooks` nor the lease families, and
/// those cases are not stamped; write a [`Harness`] of your own to run
/// them too. The store is dropped when the
/// case ends, which is where a backend releases its database.
///
/// ```
/// use std::sync::Arc;
/// use flowstate_core::Clock as _;
/// use flowstate_testkit::{Harness, ManualClock, MemoryStore, StoreHarness};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let harness = StoreHarness::create(async |clock: Arc<ManualClock>| {
///     MemoryStore::with_clock(clock)
/// })
/// .await;
/// assert_eq!(harness.clock().now(), flowstate_testkit::ManualClock::START);
/// # }
/// ```
#[derive(Debug)]
pub struct StoreHarness<S> {
    store: Arc<S>,
    clock: Arc<ManualClock>,
}

impl<S: Store + 'static> StoreHarness<S> {
    /// A fresh [`ManualClock`] at [`ManualClock::START`], and the store
    /// `open` makes for it.
    pub async fn create<F, Fut>(open: F) -> Self
    where
        F: FnOnce(Arc<ManualClock>) -> Fut,
        Fut: Future<Output = S>,
    {
        let clock = Arc::new(ManualClock::new());
        let store = Arc::new(open(Arc::clone(&clock)).await);
        Self { store, clock }
    }
}

impl<S: Store + 'static> Harness for StoreHarness<S> {
    type Store = S;

    fn store(&self) -> &Arc<S> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}
