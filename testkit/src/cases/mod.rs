//! The conformance cases: one `pub async fn` per guarantee of the store
//! ports, each taking a [`Harness`](crate::Harness) and panicking if the
//! backend breaks the guarantee.
//!
//! Each case starts from the harness's empty store and asserts exact values.
//! Race cases spawn real tokio tasks, released together by a barrier, so
//! they need a multi-threaded runtime and a backend that serves many callers
//! at once. Run them all through
//! [`conformance_suite!`](crate::conformance_suite); the list of cases it
//! stamps is [`CASES`](crate::CASES).

pub mod atomicity;
pub mod bad_input;
pub mod bad_names;
pub mod batch;
pub mod batch_atomicity;
pub mod batch_races;
pub mod claim;
pub mod claim_expiry;
pub mod claim_outcomes;
pub mod claim_races;
pub mod definitions;
pub mod deletion;
pub mod dense_claims;
pub mod dense_expiry;
pub mod dense_moves;
pub mod dense_races;
pub(crate) mod dense_support;
pub mod effects;
pub mod event_dispatch;
pub mod event_queue;
pub mod event_races;
pub(crate) mod event_support;
pub mod events;
pub mod exactness;
pub mod expiry_atomicity;
pub mod fenced_writes;
pub mod graph;
pub mod history;
pub mod lease_children;
pub mod lease_races;
pub mod lease_releases;
pub mod lease_waits;
pub mod leases;
pub mod pool_commit;
pub mod pool_faults;
pub mod pool_outages;
pub mod pool_retries;
pub(crate) mod pool_support;
pub(crate) mod pool_watched;
pub mod pool_workers;
pub mod recovery_guard;
pub mod recovery_leases;
pub mod recovery_queries;
pub mod recovery_sweeps;
pub mod retries;
pub mod run_list;
pub mod run_races;
pub mod run_state;
pub mod runs;
pub mod settled_runs;
pub mod step_claims;
pub mod steps;
pub mod summary;
pub mod transitions;
pub mod unknown_ids;
pub mod versions;
pub mod virtual_user_races;
pub mod virtual_user_runs;
pub mod virtual_user_schedules;
pub mod virtual_user_ticks;
pub mod virtual_user_transcripts;
pub mod wide_races;

mod support;
