//! flowstate-testkit: the conformance suite every flowstate backend must
//! pass, and [`MemoryStore`], the in-memory reference backend that passes it.
//!
//! The suite is one `pub async fn` per guarantee of the store ports in
//! [`flowstate_core::ports`], in [`cases`], each run against a fresh
//! [`Harness`]: the store under test and the [`ManualClock`] it reads (plus,
//! if the backend has them, [`Hooks`] that reach behind the store).
//! [`conformance_suite!`] stamps every case into a multi-threaded tokio
//! test.
//!
//! # Testing your own backend
//!
//! A backend that can open a fresh, empty store for a given clock gets the
//! whole suite from one function and one macro call, in a test file of its
//! crate (with `flowstate-testkit` as a dev-dependency under that name):
//!
//! ```
//! // hookup: begin
//! use std::sync::Arc;
//! use flowstate_testkit::{ManualClock, MemoryStore, StoreHarness};
//!
//! /// A fresh, empty store that stamps times from `clock`.
//! async fn open(clock: Arc<ManualClock>) -> MemoryStore {
//!     MemoryStore::with_clock(clock) // yours: a database made for this call
//! }
//!
//! flowstate_testkit::conformance_suite!(my_backend, StoreHarness::create(open));
//! // hookup: end
//! # fn main() {}
//! ```
//!
//! That is every case of the suite as `my_backend::<group>::<case>`, so
//! `cargo test claim_races` runs one group. [`StoreHarness`] has no
//! [`Hooks`]: the nine cases that need one (a history row deleted behind
//! the store's back, history writes made to fail, rows counted after a
//! deletion) are skipped and say so. A [`Harness`] of your own runs them
//! too; its docs show one. A factory of the wrong type is one compile error
//! for the whole suite, naming what it must be.
//!
//! `testkit/tests/memory.rs` runs every suite over [`MemoryHarness`]. Race
//! cases run tens of real tokio tasks at once and assert exactly-once
//! outcomes; a backend must serve them concurrently, not one at a time
//! behind a lock it takes for the test's sake.
//!
//! The ports beyond the core three have suites of their own, with the same
//! two arguments: [`batch_suite!`] ([`BatchStepStore`](flowstate_core::ports::BatchStepStore)),
//! [`events_suite!`] ([`DefinitionStore`](flowstate_core::ports::DefinitionStore),
//! [`EventStore`](flowstate_core::ports::EventStore)), [`event_queue_suite!`]
//! ([`EventQueueStore`](flowstate_core::ports::EventQueueStore)), [`lease_suite!`] (for a
//! [`LeaseHarness`]), [`recovery_suite!`]
//! ([`RecoveryStore`](flowstate_core::ports::RecoveryStore),
//! [`RunRecoveryStore`](flowstate_core::ports::RunRecoveryStore), driving
//! `flowstate-recovery`'s sweeps, guard and sweeper) and
//! [`virtual_users_suite!`]
//! ([`ScheduleStore`](flowstate_core::ports::ScheduleStore),
//! [`VirtualUserRunStore`](flowstate_core::ports::VirtualUserRunStore), driving
//! `flowstate_virtual_users::tick` and its runner through the store).
//! [`pool_suite!`] drives `flowstate-pool`'s `GroupCommit` and
//! `WorkerPool` over a [`BatchStepStore`](flowstate_core::ports::BatchStepStore);
//! its faults come from a wrapper around the harness's store, not a hook.
//!
//! [`model`] is a model-based test beside the cases: random sequences of
//! operations run on [`MemoryStore`] and on your store, every answer
//! compared ([`model::check`], with two harness factories).
//!
//! This crate does not hold per-dialect checks (statement counts, indexes,
//! query plans): those belong to the backend's own tests.

pub mod cases;
mod clock;
mod harness;
mod lease_harness;
mod lease_suite;
mod memory;
pub mod model;
mod pool_suite;
mod recovery_suite;
mod store_harness;
mod suite;
mod suite_events;
mod virtual_users_suite;

pub use cases::event_support::{EventBackend, EventQueueBackend};
pub use clock::ManualClock;
pub use harness::{Harness, Hooks, MemoryHarness, RowCounts};
pub use lease_harness::{LeaseHarness, SkewedClock};
pub use memory::MemoryStore;
pub use store_harness::StoreHarness;

/// Every case the suite stamps, as `group::case` (a function
/// `cases::group::case`), in stamping order.
pub const CASES: &[&str] = crate::__cases!(names);

/// Every case [`batch_suite!`] stamps, as `group::case`.
pub const BATCH_CASES: &[&str] = crate::__batch_cases!(names);
/// Every case [`virtual_users_suite!`] stamps, as `group::case`.
pub const VIRTUAL_USER_CASES: &[&str] = crate::__virtual_user_cases!(names);
/// Every case [`events_suite!`] stamps, as `group::case`: the cases of
/// [`DefinitionStore`](flowstate_core::ports::DefinitionStore) and
/// [`EventStore`](flowstate_core::ports::EventStore), for a backend with those
/// ports too.
pub const EVENT_CASES: &[&str] = crate::__event_cases!(names);
/// Every case [`event_queue_suite!`] stamps, as `group::case`: the cases of
/// [`EventQueueStore`](flowstate_core::ports::EventQueueStore).
pub const EVENT_QUEUE_CASES: &[&str] = crate::__event_queue_cases!(names);
/// Every case [`lease_suite!`] stamps, as `group::case`.
pub const LEASE_CASES: &[&str] = crate::__lease_cases!(names);
/// Every case [`recovery_suite!`] stamps, as `group::case`.
pub const RECOVERY_CASES: &[&str] = crate::__recovery_cases!(names);
/// Every case [`pool_suite!`] stamps, as `group::case`.
pub const POOL_CASES: &[&str] = crate::__pool_cases!(names);

/// What the macros' expansions use; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use flowstate_core as core;
    pub use tokio;
}
