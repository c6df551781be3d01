//! The kit's cases: one `pub async fn` per guarantee of the store ports,
//! each taking a [`Harness`](crate::Harness) and panicking if the backend
//! breaks the guarantee, in one folder per port family of
//! [`flowstate_core::ports`] and one, [`policies`], for the policy crates
//! driven over the ports.
//!
//! Each case starts from the harness's empty store and asserts exact values.
//! Race cases spawn real tokio tasks, released together by a barrier, so
//! they need a multi-threaded runtime and a backend that serves many callers
//! at once. Run them through [`suite!`](crate::suite); the list of cases it
//! stamps is [`CASES`](crate::CASES). A case that takes `H: Hooks` reaches
//! behind the store ([`Hooks`](crate::Hooks)) and is stamped only for a
//! suite that lists `hooks`.

pub mod batch;
pub mod children;
pub mod definitions;
pub mod effects;
pub mod events;
pub mod leases;
pub mod policies;
pub mod recovery;
pub mod retention;
pub mod runs;
pub mod steps;
pub mod versions;
pub mod virtual_users;
pub mod waits;

pub(crate) mod support;
