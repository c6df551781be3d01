//! The few ways a port call is recorded, shared by every file of
//! [`metered`](crate::metered): a count, a count under one label, a timed
//! call, the fencing refusals an answer carries, and [`error_kind`], the
//! label an error is counted under.

use std::future::Future;
use std::time::Instant;

use flowstate_core::{Error, Result, Step};

use crate::names;

/// Adds `n` to counter `name`.
pub(crate) fn count(name: &'static str, n: u64) {
    if n > 0 {
        metrics::counter!(name).increment(n);
    }
}

/// Adds `n` to counter `name` under the label `key = value`.
pub(crate) fn count_as(name: &'static str, key: &'static str, value: &'static str, n: u64) {
    if n > 0 {
        metrics::counter!(name, key => value).increment(n);
    }
}

/// Awaits `call` and records how long it took in histogram `name`.
pub(crate) async fn timed<F: Future>(name: &'static str, call: F) -> F::Output {
    let started = Instant::now();
    let answer = call.await;
    metrics::histogram!(name).record(started.elapsed().as_secs_f64());
    answer
}

/// Counts `answer` as a fencing refusal if a fence refused it.
pub(crate) fn fenced<T>(answer: &Result<T>) {
    if let Err(err) = answer {
        refused(err);
    }
}

/// Counts `err` as a fencing refusal if a fence refused it.
pub(crate) fn refused(err: &Error) {
    match err {
        Error::LeaseLost { .. } => count_as(names::FENCING_REFUSALS, names::FENCE, "lease", 1),
        Error::ClaimLost { .. } => count_as(names::FENCING_REFUSALS, names::FENCE, "claim", 1),
        _ => {}
    }
}

/// Counts a step a claim took (through `via`), and its retry if its
/// attempt is past the first.
pub(crate) fn won(step: &Step, via: &'static str) {
    count_as(names::CLAIMS_WON, names::VIA, via, 1);
    if step.attempt > 1 {
        count(names::RETRIES, 1);
    }
}

/// Counts a claim answered with `err`, under its kind.
pub(crate) fn claim_refused(err: &Error) {
    count_as(names::CLAIMS_REFUSED, names::REASON, error_kind(err), 1);
}

/// The lower_snake name of an error's kind, the label
/// [`CLAIMS_REFUSED`](names::CLAIMS_REFUSED) counts it under: the
/// variant's name (`function_mismatch`, `run_settled`, `lease_lost`,
/// `backend`, ...), `other` for a variant added after this list.
pub fn error_kind(err: &Error) -> &'static str {
    match err {
        Error::RunNotFound(_) => "run_not_found",
        Error::StepNotFound(_) => "step_not_found",
        Error::StepNameNotFound { .. } => "step_name_not_found",
        Error::IllegalRunTransition { .. } => "illegal_run_transition",
        Error::IllegalStepTransition { .. } => "illegal_step_transition",
        Error::FunctionMismatch { .. } => "function_mismatch",
        Error::VirtualUserRunNotFound(_) => "virtual_user_run_not_found",
        Error::VirtualUserRunSettled { .. } => "virtual_user_run_settled",
        Error::ScheduleNotFound(_) => "schedule_not_found",
        Error::VersionNotFound(_) => "version_not_found",
        Error::IllegalVersionTransition { .. } => "illegal_version_transition",
        Error::WorkflowNotFound(_) => "workflow_not_found",
        Error::PublishedVersionNotFound { .. } => "published_version_not_found",
        Error::ActivationNotFound(_) => "activation_not_found",
        Error::EventNotFound(_) => "event_not_found",
        Error::LeaseLost { .. } => "lease_lost",
        Error::ClaimLost { .. } => "claim_lost",
        Error::RunSettled { .. } => "run_settled",
        Error::EffectNotFound { .. } => "effect_not_found",
        Error::InvalidInput(_) => "invalid_input",
        Error::Corrupt { .. } => "corrupt",
        Error::PoolTimeout { .. } => "pool_timeout",
        Error::Backend { .. } => "backend",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use flowstate_core::{Error, RunId, StepId};

    use super::error_kind;

    #[test]
    fn kinds_are_lower_snake_names_of_the_variants() {
        assert_eq!(
            error_kind(&Error::RunNotFound(RunId::generate())),
            "run_not_found"
        );
        assert_eq!(
            error_kind(&Error::ClaimLost {
                step: StepId::generate(),
                attempt: 2
            }),
            "claim_lost"
        );
        assert_eq!(
            error_kind(&Error::backend("claim_step", true, "reset")),
            "backend"
        );
    }
}
