//! What a status-guarded write that matched no row means.
//!
//! Every dialect writes first and reads only when the write matched nothing,
//! on the error path; these functions turn what that read found into the
//! same typed answer on every backend.

use flowstate_core::{
    ClaimDecision, ClaimInput, ClaimOutcome, Error, RunId, RunStatus, Step, StepId, StepStatus,
};

use crate::rows::{StepRow, parse_status};

/// What a dialect's status-guarded step write did.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// The guard matched: the step and its history row are written.
    Moved,
    /// The guard matched nothing; the step's status as the same statement
    /// or transaction saw it (`None`: no such step).
    #[cfg(feature = "postgres")]
    Refused(Option<String>),
    /// The guard matched nothing and the dialect did not look why: the
    /// caller reads the status (error path only).
    Unseen,
}

#[cfg(any(feature = "mysql", feature = "sqlite"))]
impl Guarded {
    /// What a write that does not look why it matched nothing did: whether
    /// its guard `moved` the step.
    pub(crate) fn written(moved: bool) -> Self {
        if moved { Self::Moved } else { Self::Unseen }
    }
}

/// The error for a step transition to `to` that matched no row, given the
/// step's status as read afterwards (`None`: no such step).
pub(crate) fn step_transition_refused(
    step: StepId,
    current: Option<&str>,
    to: StepStatus,
) -> Error {
    match current {
        None => Error::StepNotFound(step),
        Some(text) => match parse_status::<StepStatus>(&step.to_string(), text) {
            Ok(from) => Error::IllegalStepTransition { step, from, to },
            Err(corrupt) => corrupt,
        },
    }
}

/// The error for a run status change to `to` that matched no row.
pub(crate) fn run_transition_refused(run: RunId, current: Option<&str>, to: RunStatus) -> Error {
    match current {
        None => Error::RunNotFound(run),
        Some(text) => match parse_status::<RunStatus>(&run.to_string(), text) {
            Ok(from) => Error::IllegalRunTransition { run, from, to },
            Err(corrupt) => corrupt,
        },
    }
}

/// The answer to a claim whose guarded write matched nothing, given the step
/// and its run's status as the claim's own statement or transaction read
/// them: no such step, a refused function, a settled run
/// ([`Error::RunSettled`]), or why nothing was claimed
/// ([`ClaimOutcome::not_claimed`]: running, succeeded, out of retries, or
/// another worker won).
pub(crate) fn claim_lost(
    run: RunId,
    name: &str,
    function: &str,
    found: Option<(&Step, Option<&str>)>,
) -> Result<ClaimOutcome, Error> {
    let Some((step, run_status)) = found else {
        return Err(Error::StepNameNotFound {
            run,
            name: name.to_owned(),
        });
    };
    let outcome = ClaimOutcome::not_claimed(step, function)?;
    // Only a step the claim would have taken is refused for its run: one
    // with nothing to claim answers why, as in any run, so a duplicate
    // delivery of a finished step stays a no-op after its run settled.
    let claimable = ClaimDecision::decide(
        ClaimInput {
            status: step.status,
            function: step.function.as_deref(),
            attempt: step.attempt,
            retry: step.retry,
        },
        function,
    )
    .claims();
    if let Some(text) = run_status.filter(|_| claimable) {
        let status = parse_status::<RunStatus>(&run.to_string(), text)?;
        if status.is_settled() {
            return Err(Error::RunSettled { run, status });
        }
    }
    Ok(outcome)
}

/// What a dialect's step insert did.
#[derive(Debug)]
pub(crate) enum Inserting {
    /// This call inserted the step, with its first history row.
    Inserted,
    /// A step already held the name (in a run that admits the write): it,
    /// unchanged.
    Held(Box<StepRow>),
    /// Nothing: the run is missing, settled, or (fenced) its lease is not
    /// the token's, or the name's holder was deleted meanwhile.
    Refused,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_what_was_found() {
        let step = StepId::generate();
        assert!(
            matches!(step_transition_refused(step, None, StepStatus::Running), Error::StepNotFound(s) if s == step)
        );
        assert!(matches!(
            step_transition_refused(step, Some("succeeded"), StepStatus::Running),
            Error::IllegalStepTransition {
                from: StepStatus::Succeeded,
                ..
            }
        ));
        assert!(matches!(
            step_transition_refused(step, Some("bogus"), StepStatus::Running),
            Error::Corrupt { .. }
        ));
        let run = RunId::generate();
        assert!(matches!(
            run_transition_refused(run, None, RunStatus::Failed),
            Error::RunNotFound(_)
        ));
    }
}
