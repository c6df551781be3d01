//! flowstate-metrics: counters and histograms of what the state layer does,
//! through the [`metrics`] facade.
//!
//! [`Metered`] wraps any store (`flowstate-store-diesel`'s `DieselStore`,
//! testkit's `MemoryStore`, your own) and implements the store ports it
//! implements, recording each call's outcome before answering exactly what
//! the store answered. Counting at the ports, not inside a backend, makes
//! every backend report the same numbers for the same calls, and the
//! policy crates over a `Metered` store (`flowstate-events`' dispatchers,
//! `flowstate-pool`'s batch claims and group-commit flushes) are counted
//! with no code of their own. What only a policy knows (why a recovery
//! sweep found a run) `flowstate-recovery` records itself, under the
//! names of [`names`].
//!
//! No recorder installed, no cost beyond a call into the facade's no-op
//! recorder: install one (`metrics-exporter-prometheus`, ...) to read
//! them (`cargo run -p flowstate-metrics --example counts` prints them
//! with metrics-util's `DebuggingRecorder`). Core stays without a clock: the latencies are timed here, with
//! [`std::time::Instant`].
//!
//! ```
//! use flowstate_core::ports::StepStore;
//! use flowstate_metrics::Metered;
//!
//! fn worker<S: StepStore>(store: S) -> Metered<S> {
//!     // Use the wrapper wherever the store was used.
//!     Metered::new(store)
//! }
//! ```
//!
//! # Metrics
//!
//! Every name is a constant of [`names`]. Counters end in `_total`,
//! histograms are in seconds and end in `_seconds`; labels are lower_snake.
//!
//! | name | kind | labels | what is counted |
//! | --- | --- | --- | --- |
//! | `flowstate_claims_won_total` | counter | `via`: `step`, `batch` | step claims that took the step (each step of a batch claim) |
//! | `flowstate_claims_lost_total` | counter | `reason`: `running`, `succeeded`, `retries_exhausted`, `unknown` | step claims that took nothing (`unknown`: `claim_step`, which does not say why) |
//! | `flowstate_claims_refused_total` | counter | `reason`: the error's kind ([`error_kind`]) | step and batch claims answered with an error |
//! | `flowstate_transitions_total` | counter | `status`: the step status moved to | step transitions written, claimed or not, and each batch completion written |
//! | `flowstate_run_transitions_total` | counter | `status`: the run status moved to | run status moves written (`set_run_status*`, `finish*`) |
//! | `flowstate_retries_total` | counter | | attempts after the first that started running (a claim of attempt 2 or later, a retry started running by hand) |
//! | `flowstate_leases_taken_total` | counter | | run leases taken (`claim_run`, `claim_runs`, `lease_run`) |
//! | `flowstate_leases_renewed_total` | counter | | run leases renewed |
//! | `flowstate_leases_lost_total` | counter | | renewals that found the lease gone (`LeaseLost`) |
//! | `flowstate_leases_reaped_total` | counter | | expired leases freed by `reap_expired_leases` |
//! | `flowstate_fencing_refusals_total` | counter | `fence`: `lease`, `claim` | calls other than `renew` refused by a fence: `LeaseLost` (finish, release, wait, fenced writes), `ClaimLost` (`transition_claimed`, `renew_step_claim`, a batch completion) |
//! | `flowstate_claims_expired_total` | counter | | step claims that ran out and were taken back (`expire_step_claims`) |
//! | `flowstate_events_emitted_total` | counter | | events recorded |
//! | `flowstate_events_deduplicated_total` | counter | | emits of a key already recorded (`duplicate: true`) |
//! | `flowstate_events_dispatched_total` | counter | | events materialised into their runs (at emit, `dispatch_event`, `dispatch_next`, each of a `dispatch_next_batch`) |
//! | `flowstate_events_failed_total` | counter | | failed dispatch attempts recorded (`record_dispatch_failure`) |
//! | `flowstate_events_dead_lettered_total` | counter | | of those, the ones that dead-lettered their event |
//! | `flowstate_events_redriven_total` | counter | | dead letters put back in line (`redrive`) |
//! | `flowstate_sweep_finds_total` | counter | `reason`: `undispatched`, `stalled`, `claim_expired` | runs a recovery sweep found (recorded by `flowstate-recovery`) |
//! | `flowstate_sweep_redrives_total` | counter | `reason`: as above | runs a recovery sweep re-drove, the dispatch answering `Ok` (recorded by `flowstate-recovery`) |
//! | `flowstate_prunes_total` | counter | `kind`: `runs`, `events`, `dead_letters`, `virtual_user_runs` | records a prune deleted (`prune`; not the rows that went with them) |
//! | `flowstate_claim_seconds` | histogram | | one step claim (`claim_step`, `claim_step_outcome`) |
//! | `flowstate_transition_seconds` | histogram | | one step transition (`transition_step`, `transition_claimed`) |
//! | `flowstate_batch_claim_seconds` | histogram | | one `claim_batch` |
//! | `flowstate_flush_seconds` | histogram | | one `complete_batch` (a pool's group-commit flush) |
//! | `flowstate_dispatch_batch_seconds` | histogram | | one `dispatch_next_batch` (a batch of `dispatch_queued`) |
//!
//! The virtual-user ports are not wrapped ([`Metered::inner`] reaches
//! them).

pub mod metered;
pub mod names;
mod record;

pub use metered::Metered;
pub use record::error_kind;

/// The facade this crate records through, for a host that installs a
/// recorder without naming the crate itself.
pub use metrics;
