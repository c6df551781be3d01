//! Every metric name and label key flowstate records, written once: the
//! [`Metered`](crate::Metered) store and `flowstate-recovery`'s sweeps
//! read them from here, and the crate doc's table lists them.
//!
//! Counters end in `_total`, histograms (seconds) in `_seconds`; label keys
//! and values are lower_snake.

/// Counter: step claims that took the step (`claim_step`,
/// `claim_step_outcome`, and each step of a `claim_batch`). Label
/// [`VIA`]: `step` or `batch`.
pub const CLAIMS_WON: &str = "flowstate_claims_won_total";

/// Counter: step claims that took nothing. Label [`REASON`]: `running`,
/// `succeeded`, `retries_exhausted` (from `claim_step_outcome`) or
/// `unknown` (`claim_step`, which does not say why).
pub const CLAIMS_LOST: &str = "flowstate_claims_lost_total";

/// Counter: step claims answered with an error. Label [`REASON`]: the
/// error's kind ([`error_kind`](crate::error_kind): `function_mismatch`,
/// `run_settled`, `step_name_not_found`, `invalid_input`, `backend`, ...).
pub const CLAIMS_REFUSED: &str = "flowstate_claims_refused_total";

/// Counter: step transitions written (`transition_step`,
/// `transition_claimed`, each `Ok` item of `complete_batch`). Label
/// [`STATUS`]: the step status moved to.
pub const TRANSITIONS: &str = "flowstate_transitions_total";

/// Counter: run status moves written (`set_run_status*`, `finish*`).
/// Label [`STATUS`]: the run status moved to.
pub const RUN_TRANSITIONS: &str = "flowstate_run_transitions_total";

/// Counter: attempts after the first that started running: a claim (single
/// or batch) answering an attempt above 1, or `create_retry_attempt` /
/// `retry_step` starting one running.
pub const RETRIES: &str = "flowstate_retries_total";

/// Counter: run leases taken (`claim_run`, each run of `claim_runs`,
/// `lease_run`).
pub const LEASES_TAKEN: &str = "flowstate_leases_taken_total";

/// Counter: run leases renewed (`renew` answered `Ok`).
pub const LEASES_RENEWED: &str = "flowstate_leases_renewed_total";

/// Counter: renewals refused because the lease was gone (`renew` answered
/// `LeaseLost`).
pub const LEASES_LOST: &str = "flowstate_leases_lost_total";

/// Counter: expired run leases freed (`reap_expired_leases`, per run).
pub const LEASES_REAPED: &str = "flowstate_leases_reaped_total";

/// Counter: calls refused by a fence, other than `renew`: `LeaseLost`
/// (finish, release, wait, take_signal, the fenced writes) or `ClaimLost`
/// (`transition_claimed`, `renew_step_claim`, each `complete_batch` item).
/// Label [`FENCE`]: `lease` or `claim`.
pub const FENCING_REFUSALS: &str = "flowstate_fencing_refusals_total";

/// Counter: step claims that ran out and were taken back
/// (`expire_step_claims`, per step).
pub const CLAIMS_EXPIRED: &str = "flowstate_claims_expired_total";

/// Counter: events recorded (`emit` of a new dedupe key).
pub const EVENTS_EMITTED: &str = "flowstate_events_emitted_total";

/// Counter: emits that recorded nothing, the key already recorded
/// (`emit` answered `duplicate: true`).
pub const EVENTS_DEDUPLICATED: &str = "flowstate_events_deduplicated_total";

/// Counter: events dispatched into their runs (`dispatch_event` answered
/// runs, `dispatch_next` answered `Dispatched`, and each `Dispatched` of a
/// `dispatch_next_batch`).
pub const EVENTS_DISPATCHED: &str = "flowstate_events_dispatched_total";

/// Counter: failed dispatch attempts recorded (`record_dispatch_failure`
/// answered `true`), dead-lettering ones included.
pub const EVENTS_FAILED: &str = "flowstate_events_failed_total";

/// Counter: events dead-lettered (`record_dispatch_failure` answered
/// `true` with the outcome `DeadLetter`).
pub const EVENTS_DEAD_LETTERED: &str = "flowstate_events_dead_lettered_total";

/// Counter: dead letters put back in line (`redrive` answered `true`).
pub const EVENTS_REDRIVEN: &str = "flowstate_events_redriven_total";

/// Counter: runs a recovery sweep found (re-driven, held off by the
/// backoff, or whose dispatch failed). Label [`REASON`]: `undispatched`,
/// `stalled` or `claim_expired`. Recorded by `flowstate-recovery`.
pub const SWEEP_FINDS: &str = "flowstate_sweep_finds_total";

/// Counter: runs a recovery sweep re-drove (the dispatch answered `Ok`).
/// Label [`REASON`] as [`SWEEP_FINDS`]. Recorded by `flowstate-recovery`.
pub const SWEEP_REDRIVES: &str = "flowstate_sweep_redrives_total";

/// Counter: records a prune deleted (`prune`, each record of its batch;
/// the rows that went with a record are not counted). Label [`KIND`]:
/// `runs`, `events`, `dead_letters` or `virtual_user_runs`.
pub const PRUNES: &str = "flowstate_prunes_total";

/// Histogram, seconds: one step claim (`claim_step`, `claim_step_outcome`).
pub const CLAIM_SECONDS: &str = "flowstate_claim_seconds";

/// Histogram, seconds: one step transition (`transition_step`,
/// `transition_claimed`).
pub const TRANSITION_SECONDS: &str = "flowstate_transition_seconds";

/// Histogram, seconds: one batch claim (`claim_batch`).
pub const BATCH_CLAIM_SECONDS: &str = "flowstate_batch_claim_seconds";

/// Histogram, seconds: one flush of completions (`complete_batch`, what
/// `flowstate-pool`'s group commit sends).
pub const FLUSH_SECONDS: &str = "flowstate_flush_seconds";

/// Histogram, seconds: one batched dispatch of events
/// (`dispatch_next_batch`, a batch of `flowstate-events`'
/// `dispatch_queued`).
pub const DISPATCH_BATCH_SECONDS: &str = "flowstate_dispatch_batch_seconds";

/// Label key: why (a claim's loss or refusal, a sweep's finding).
pub const REASON: &str = "reason";

/// Label key: a status moved to.
pub const STATUS: &str = "status";

/// Label key: which fence refused a write (`lease` or `claim`).
pub const FENCE: &str = "fence";

/// Label key: what a prune deleted (a `PruneKind`'s name).
pub const KIND: &str = "kind";

/// Label key: which call a claim came through (`step` or `batch`).
pub const VIA: &str = "via";
