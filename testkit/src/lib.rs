//! flowstate-testkit: the conformance kit every flowstate backend must
//! pass, and [`MemoryStore`], the in-memory reference backend that passes it.
//!
//! The kit is one `pub async fn` per guarantee of the store ports in
//! [`flowstate_core::ports`], in [`cases`], one folder per port family
//! (`cases/runs/`, `cases/steps/`, ... named as core names them) and one,
//! `cases/policies/`, for the policy crates driven over the ports (the
//! worker pool, the recovery sweeps and guard, the virtual-user ticks, the
//! event dispatchers). Each case runs against a fresh [`Harness`]: the
//! store under test and the [`ManualClock`] it reads. [`suite!`] stamps the
//! cases of the families it is given into multi-threaded tokio tests.
//!
//! # Testing your own backend
//!
//! A backend that can open a fresh, empty store for a given clock gets the
//! kit from one function and one macro call, in a test file of its crate
//! (with `flowstate-testkit` as a dev-dependency under that name), listing
//! the families its store has:
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
//! flowstate_testkit::suite!(my_backend, StoreHarness::create(open), [
//!     runs, steps, versions, batch, definitions, events, virtual_users, pool, ticks, dispatch,
//! ]);
//! // hookup: end
//! # fn main() {}
//! ```
//!
//! That is every case of those families as `my_backend::<family>::<group>::<case>`,
//! so `cargo test claim_races` runs one group. A store without a family's
//! port is one compile error naming the family ([`family`]).
//!
//! Two things need more than a store, each a trait the harness implements
//! and the compiler checks, so nothing is skipped at run time:
//!
//! - [`Hooks`]: reaching behind the store (delete a history row, make
//!   history writes fail, abort a claim's transaction between its pick and
//!   its write, count a deleted run's rows). List `hooks` in the
//!   families and the hook cases of every other family listed are stamped
//!   too; [`StoreHarness`] has no hooks, so it leaves `hooks` out and gets
//!   no test for them rather than a test that passes without checking.
//! - [`LeaseHarness`]: moving the store's lease clock and opening a second
//!   store with a skewed clock, for `leases`, `waits`, `children`,
//!   `effects`, `recovery`, `sweeps` and `guard`.
//!
//! A [`Harness`] of your own implements both and runs the whole kit; the
//! docs of [`Harness`] show one, and `store-diesel/tests/common/harness.rs`
//! is the one over `DieselStore`. `testkit/tests/memory.rs` runs every
//! family and the hooks over [`MemoryHarness`], and the hookup above over
//! [`StoreHarness`]. Race cases run tens of real tokio tasks at once and
//! assert exactly-once outcomes; a backend must serve them concurrently,
//! not one at a time behind a lock it takes for the test's sake.
//!
//! [`model`] is a model-based test beside the cases: random sequences of
//! operations run on [`MemoryStore`] and on your store, every answer
//! compared ([`model::check`], with two harness factories).
//!
//! This crate does not hold per-dialect checks (statement counts, indexes,
//! query plans): those belong to the backend's own tests.

pub mod cases;
mod clock;
pub mod family;
mod harness;
mod lease_harness;
mod memory;
pub mod model;
mod store_harness;
mod suite;

pub use cases::support::events::{EventBackend, EventQueueBackend};
pub use clock::ManualClock;
pub use harness::{Harness, Hooks, Pick, RowCounts};
pub use lease_harness::{LeaseHarness, SkewedClock};
pub use memory::{MemoryHarness, MemoryStore};
pub use store_harness::StoreHarness;

/// Every family [`suite!`] stamps, with its cases as `folder::group::case`
/// (a function `cases::folder::group::case`; the hook cases too), in
/// stamping order.
pub const CASES: &[(&str, &[&str])] = &[
    ("runs", crate::__family!(runs names)),
    ("steps", crate::__family!(steps names)),
    ("versions", crate::__family!(versions names)),
    ("batch", crate::__family!(batch names)),
    ("leases", crate::__family!(leases names)),
    ("waits", crate::__family!(waits names)),
    ("children", crate::__family!(children names)),
    ("effects", crate::__family!(effects names)),
    ("definitions", crate::__family!(definitions names)),
    ("events", crate::__family!(events names)),
    ("recovery", crate::__family!(recovery names)),
    ("virtual_users", crate::__family!(virtual_users names)),
    ("retention", crate::__family!(retention names)),
    ("pool", crate::__family!(pool names)),
    ("sweeps", crate::__family!(sweeps names)),
    ("guard", crate::__family!(guard names)),
    ("ticks", crate::__family!(ticks names)),
    ("dispatch", crate::__family!(dispatch names)),
];

/// What the macros' expansions use; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use flowstate_core as core;
    pub use tokio;
}
