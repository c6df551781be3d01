//! The store ports: the async traits a backend implements, the whole
//! contract in one place. Each trait has one path, `flowstate_core::ports::X`.
//!
//! Each method is one atomic unit of work with the guarantee its doc states;
//! `flowstate-testkit` has a case for every one of them. Futures are `Send`,
//! so logic generic over a port runs on a multi-threaded runtime.
//!
//! Every method that takes JSON or a key checks it with the backend's
//! [`InputLimits`](crate::InputLimits) first and writes nothing if it is
//! refused ([`Error::InvalidInput`]). Unknown ids are typed errors
//! ([`Error::RunNotFound`], [`Error::StepNotFound`],
//! [`Error::StepNameNotFound`]), never an empty success, except where a
//! method says it answers `None` or is a filter (`list_runs` with a parent
//! that does not exist is an empty page).
//!
//! Names used to *look up* are checked like names written: an empty name,
//! one holding a NUL or one over the key limit is [`Error::InvalidInput`]
//! for `find_step`, `claim_step` (name and function), `get_version` and the
//! workflow filter of `list_runs`, so a lookup never sends what no write
//! could have stored.
//!
//! JSON `null` is a value: a step that succeeded with `null` reads back
//! `Some(Value::Null)`, distinct from a step with no result (`None`).
//!
//! # The families
//!
//! One file per family, named as the testkit and `flowstate-store-diesel`
//! name them. [`Store`] is the core three; every other family is a trait of
//! its own, so a backend without it still compiles.
//!
//! | family | traits | testkit suite |
//! | --- | --- | --- |
//! | runs | [`RunStore`] | `conformance_suite!` |
//! | steps | [`StepStore`] | `conformance_suite!` |
//! | versions | [`VersionStore`] | `conformance_suite!` |
//! | batch | [`BatchStepStore`] | `batch_suite!`, `pool_suite!` |
//! | leases | [`RunLeaseStore`], [`FencedWrites`] | `lease_suite!` |
//! | waits | [`RunWaitStore`] | `lease_suite!` |
//! | children | [`ChildRunStore`] | `lease_suite!` |
//! | effects | [`EffectJournal`] | `lease_suite!` |
//! | definitions | [`DefinitionStore`] | `events_suite!` |
//! | events | [`EventStore`], [`EventQueueStore`] | `events_suite!`, `event_queue_suite!` |
//! | recovery | [`RecoveryStore`], [`RunRecoveryStore`] | `recovery_suite!` |
//! | virtual users | [`ScheduleStore`], [`VirtualUserRunStore`] | `virtual_users_suite!` |
//!
//! # Running the kit
//!
//! `flowstate-testkit` proves a backend keeps these guarantees. With a
//! function that opens a fresh, empty store for a clock, one macro call per
//! family the backend has, in a test file of the backend's crate:
//!
//! ```text
//! flowstate_testkit::conformance_suite!(my_backend, StoreHarness::create(open));
//! flowstate_testkit::batch_suite!(my_backend_batch, StoreHarness::create(open));
//! ```
//!
//! The testkit's crate doc shows the whole hook-up, the harnesses and what
//! a harness without hooks skips; `testkit/tests/memory.rs` runs every
//! suite over the reference backend, `MemoryStore`.

mod batch;
pub mod checks;
mod children;
mod definitions;
mod effects;
mod events;
mod leases;
mod recovery;
mod runs;
mod steps;
mod versions;
mod virtual_users;
mod waits;

pub use batch::BatchStepStore;
pub use children::ChildRunStore;
pub use definitions::DefinitionStore;
pub use effects::EffectJournal;
pub use events::{EventQueueStore, EventStore};
pub use leases::{FencedWrites, RunLeaseStore};
pub use recovery::{RecoveryStore, RunRecoveryStore};
pub use runs::RunStore;
pub use steps::StepStore;
pub use versions::VersionStore;
pub use virtual_users::{ScheduleStore, VirtualUserRunStore};
pub use waits::RunWaitStore;

// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these traits.
#[allow(unused_imports)]
use crate::error::Error;

/// Every port at once: what a full backend implements.
pub trait Store: RunStore + StepStore + VersionStore {}

impl<T: RunStore + StepStore + VersionStore> Store for T {}
