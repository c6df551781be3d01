//! flowstate-testkit: the conformance suite every flowstate backend must
//! pass, and [`MemoryStore`], the in-memory reference backend that passes it.
//!
//! The suite is one `pub async fn` per guarantee of the store ports in
//! [`flowstate_core::ports`], in [`cases`], each run against a fresh
//! [`Harness`]: the store under test, the [`ManualClock`] it reads, and one
//! hook to delete a history row behind the store's back.
//! [`conformance_suite!`] stamps every case into a multi-threaded tokio test,
//! so a backend gets the whole suite with a harness and one line:
//!
//! ```
//! use flowstate_testkit::MemoryHarness;
//!
//! flowstate_testkit::conformance_suite!(memory, async { MemoryHarness::new() });
//! # fn main() {}
//! ```
//!
//! (`testkit/tests/memory.rs` is exactly that, plus [`events_suite!`] for
//! the event ports.) Race cases run tens of real
//! tokio tasks at once and assert exactly-once outcomes; a backend must
//! serve them concurrently, not one at a time behind a lock it takes for
//! the test's sake.
//!
//! A backend that also implements the virtual-user ports
//! ([`ScheduleStore`](flowstate_core::ScheduleStore),
//! [`VirtualUserRunStore`](flowstate_core::VirtualUserRunStore)) adds
//! [`virtual_users_suite!`] with the same two arguments: its cases drive
//! `flowstate_virtual_users::tick` and its runner through the store.
//!
//! This crate does not hold per-dialect checks (statement counts, indexes,
//! query plans): those belong to the backend's own tests.

pub mod cases;
mod clock;
mod harness;
mod lease_harness;
mod lease_suite;
mod memory;
mod recovery_suite;
mod suite;
mod suite_events;
mod virtual_users_suite;

pub use cases::event_support::EventBackend;
pub use clock::ManualClock;
pub use harness::{Harness, MemoryHarness, RowCounts};
pub use lease_harness::{LeaseHarness, SkewedClock};
pub use memory::MemoryStore;

/// Every case the suite stamps, as `group::case` (a function
/// `cases::group::case`), in stamping order.
pub const CASES: &[&str] = crate::__cases!(names);

/// Every case [`batch_suite!`] stamps, as `group::case`.
pub const BATCH_CASES: &[&str] = crate::__batch_cases!(names);
/// Every case [`virtual_users_suite!`] stamps, as `group::case`.
pub const VIRTUAL_USER_CASES: &[&str] = crate::__virtual_user_cases!(names);
/// Every case [`events_suite!`] stamps, as `group::case`: the cases of
/// [`DefinitionStore`](flowstate_core::DefinitionStore) and
/// [`EventStore`](flowstate_core::EventStore), for a backend with those
/// ports too.
pub const EVENT_CASES: &[&str] = crate::__event_cases!(names);
/// Every case [`lease_suite!`] stamps, as `group::case`.
pub const LEASE_CASES: &[&str] = crate::__lease_cases!(names);
/// Every case [`recovery_suite!`] stamps, as `group::case`.
pub const RECOVERY_CASES: &[&str] = crate::__recovery_cases!(names);

/// What the macros' expansions use; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;

    pub use tokio;

    /// Awaits a harness factory, naming the trait a factory must produce.
    pub async fn make_harness<H: crate::Harness>(factory: impl Future<Output = H>) -> H {
        factory.await
    }
}
