//! [`LeaseHarness`]: what the lease cases need beyond [`Harness`]: a way to
//! move the store's lease clock, and a second store on the same data whose
//! own clock is off, as a worker on another machine would be.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::RunLeaseStore;
use flowstate_core::{Clock, Timestamp};

use crate::clock::ManualClock;
use crate::harness::Harness;
use crate::memory::MemoryHarness;

/// A [`Harness`] whose store leases runs ([`RunLeaseStore`]), for
/// the lease families of [`suite!`](crate::suite) ([`family`](crate::family)).
pub trait LeaseHarness: Harness<Store: RunLeaseStore> {
    /// Moves the store's lease clock (the one every expiry is measured on,
    /// for every store on the same data) `by` later: for a database, an
    /// offset every store of the harness adds to the server's clock.
    fn advance_lease_clock(&self, by: Duration) -> impl Future<Output = ()> + Send;

    /// Another store on the same data whose own clock (the one it stamps
    /// rows with) reads the harness clock moved by `skew_micros`, earlier
    /// if negative.
    fn skewed_store(&self, skew_micros: i64) -> impl Future<Output = Arc<Self::Store>> + Send;
}

/// A clock `skew_micros` off another: a worker's clock that is wrong.
#[derive(Debug)]
pub struct SkewedClock {
    base: Arc<ManualClock>,
    skew_micros: i64,
}

impl SkewedClock {
    /// `base` moved by `skew_micros` (earlier if negative).
    pub fn new(base: Arc<ManualClock>, skew_micros: i64) -> Self {
        Self { base, skew_micros }
    }
}

impl Clock for SkewedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.base.now().as_micros().saturating_add(self.skew_micros))
    }
}

impl LeaseHarness for MemoryHarness {
    fn advance_lease_clock(&self, by: Duration) -> impl Future<Output = ()> + Send {
        // The memory store measures leases on the harness clock.
        self.clock_arc().advance(by);
        async {}
    }

    fn skewed_store(&self, skew_micros: i64) -> impl Future<Output = Arc<Self::Store>> + Send {
        let clock = Arc::new(SkewedClock::new(self.clock_arc(), skew_micros));
        let store = Arc::new(self.store().sharing_with_clock(clock));
        async move { store }
    }
}
