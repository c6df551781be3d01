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
//! | family | traits | also run by the testkit's policy families |
//! | --- | --- | --- |
//! | `runs` | [`RunStore`] | |
//! | `steps` | [`StepStore`] | |
//! | `versions` | [`VersionStore`] | |
//! | `batch` | [`BatchStepStore`] | `pool` (with `recovery`) |
//! | `leases` | [`RunLeaseStore`], [`FencedWrites`] | |
//! | `waits` | [`RunWaitStore`] | `sweeps`, `guard` |
//! | `children` | [`ChildRunStore`] | |
//! | `effects` | [`EffectJournal`] | |
//! | `definitions` | [`DefinitionStore`] | |
//! | `events` | [`EventStore`], [`EventQueueStore`] | `dispatch` |
//! | `recovery` | [`RecoveryStore`], [`RunRecoveryStore`] | `sweeps`, `guard` |
//! | `virtual_users` | [`ScheduleStore`], [`VirtualUserRunStore`] | `ticks` |
//! | `retention` | [`RetentionStore`] | |
//!
//! # Running the kit
//!
//! `flowstate-testkit` proves a backend keeps these guarantees: one
//! `suite!` call, in a test file of the backend's crate, names the
//! families the backend has (a family whose port the store lacks is one
//! compile error naming it):
//!
//! ```text
//! flowstate_testkit::suite!(my_backend, StoreHarness::create(open), [runs, steps, versions, batch]);
//! ```
//!
//! The testkit's crate doc shows the whole hook-up and the harnesses (a
//! harness with hooks gets the hook cases, one without does not get them
//! at all); `testkit/tests/memory.rs` runs every family over the
//! reference backend, `MemoryStore`.

mod batch;
pub mod checks;
mod children;
mod definitions;
mod effects;
mod events;
mod leases;
mod recovery;
mod retention;
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
pub use retention::RetentionStore;
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
