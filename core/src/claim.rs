//! The claim decision: what claiming a step for execution does, for each step
//! status.
//!
//! Dispatch is at-least-once (a relay re-dispatches, a queue redelivers), so
//! the claim is the one thing between a duplicate delivery and a second
//! execution. This module only *decides*; a backend carries the decision out
//! as one status-guarded write whose affected rows pick the single winner.

use crate::error::Error;
use crate::records::Step;
use crate::retry::RetryPolicy;
use crate::status::StepStatus;

/// What a claim needs to know about the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimInput<'a> {
    /// The step's current status.
    pub status: StepStatus,
    /// The function the step was dispatched with, if it was pinned to one.
    pub function: Option<&'a str>,
    /// The step's current attempt (1-based).
    pub attempt: u32,
    /// The step's retry policy.
    pub retry: RetryPolicy,
}

/// Why a claim takes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotClaimable {
    /// Another worker holds it: it is running, or another claim took it
    /// first.
    Running,
    /// It has already succeeded: settled, nothing left to run.
    Succeeded,
    /// It failed and its retry policy allows no further attempt.
    RetriesExhausted,
}

/// What a claim did: took the step, or why it took nothing
/// ([`StepStore::claim_step_outcome`](crate::ports::StepStore::claim_step_outcome)).
///
/// The outcomes of a claim of an existing step, with the step pinned to the
/// claiming function (or to none):
///
/// | the step | outcome |
/// | --- | --- |
/// | pending, scheduled, or failed with attempts left | [`Claimed`](Self::Claimed), unless another claim took it first |
/// | taken by another claim first, or running | [`NotClaimed`](Self::NotClaimed)`(`[`NotClaimable::Running`]`)` |
/// | succeeded | [`NotClaimed`](Self::NotClaimed)`(`[`NotClaimable::Succeeded`]`)` |
/// | failed with no attempt left | [`NotClaimed`](Self::NotClaimed)`(`[`NotClaimable::RetriesExhausted`]`)` |
///
/// Not outcomes but errors, as for
/// [`claim_step`](crate::ports::StepStore::claim_step): no such step
/// ([`Error::StepNameNotFound`]) and a step pinned to another function
/// ([`Error::FunctionMismatch`]), so a misrouted job is reported, never
/// mistaken for one that has nothing to do.
// As large as the `Option<Step>` a claim answers anyway, and consumed at
// once: not worth a box the caller would have to open.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    /// This claim took the step: the step as it is after the claim (running,
    /// its attempt raised by one if the claim started a retry).
    Claimed(Step),
    /// Nothing was claimed, and why.
    NotClaimed(NotClaimable),
}

impl ClaimOutcome {
    /// The claimed step, if this claim took it: what
    /// [`claim_step`](crate::ports::StepStore::claim_step) answers.
    pub fn claimed(self) -> Option<Step> {
        match self {
            Self::Claimed(step) => Some(step),
            Self::NotClaimed(_) => None,
        }
    }

    /// Why nothing was claimed; `None` if the step was.
    pub const fn reason(&self) -> Option<NotClaimable> {
        match self {
            Self::Claimed(_) => None,
            Self::NotClaimed(reason) => Some(*reason),
        }
    }

    /// Explains a claim by `function` that took nothing, from `step` as read
    /// during or after that claim: the reason [`ClaimDecision::decide`]
    /// gives, or [`Error::FunctionMismatch`] if the step is pinned to another
    /// function. A step that reads as claimable was taken by another claim
    /// in between (a claim only takes nothing from a claimable step when it
    /// loses to another), so it answers [`NotClaimable::Running`]: held by
    /// another worker.
    pub fn not_claimed(step: &Step, function: &str) -> Result<Self, Error> {
        let input = ClaimInput {
            status: step.status,
            function: step.function.as_deref(),
            attempt: step.attempt,
            retry: step.retry,
        };
        match ClaimDecision::decide(input, function) {
            ClaimDecision::Refuse => Err(Error::FunctionMismatch {
                run: step.run,
                name: step.name.clone(),
                expected: step.function.clone().unwrap_or_default(),
                claimed: function.to_owned(),
            }),
            ClaimDecision::Nothing(reason) => Ok(Self::NotClaimed(reason)),
            ClaimDecision::ClaimFresh | ClaimDecision::ClaimRetry => {
                Ok(Self::NotClaimed(NotClaimable::Running))
            }
        }
    }
}

/// The outcome of a claim, before anything is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimDecision {
    /// A pending or scheduled step: move it to running in its current attempt.
    ClaimFresh,
    /// A failed step with attempts left: start the next attempt, running.
    ClaimRetry,
    /// Nothing to do: the caller gets no step.
    Nothing(NotClaimable),
    /// The claim names another function than the step was dispatched with:
    /// an error, and the step is not touched.
    Refuse,
}

impl ClaimDecision {
    /// Decides a claim of `step` by a worker running `function`.
    ///
    /// The function check comes first: a mismatched claim is refused whatever
    /// the status, so a misrouted job is reported rather than silently dropped.
    pub fn decide(step: ClaimInput<'_>, function: &str) -> Self {
        if step.function.is_some_and(|pinned| pinned != function) {
            return Self::Refuse;
        }
        match step.status {
            StepStatus::Pending | StepStatus::Scheduled => Self::ClaimFresh,
            StepStatus::Running => Self::Nothing(NotClaimable::Running),
            StepStatus::Succeeded => Self::Nothing(NotClaimable::Succeeded),
            StepStatus::Failed if step.retry.has_attempts_left(step.attempt) => Self::ClaimRetry,
            StepStatus::Failed => Self::Nothing(NotClaimable::RetriesExhausted),
        }
    }

    /// Whether the claim moves the step (and so wins, if it is first).
    pub const fn claims(self) -> bool {
        matches!(self, Self::ClaimFresh | Self::ClaimRetry)
    }

    /// The step statuses for which a claim decides `self`, for a step pinned
    /// to the claiming function with attempts left: the `status IN (...)`
    /// list a backend's guard carries out (a retry guards on attempts left
    /// as well, `current_attempt < retries + 1`). Backends ask this rather
    /// than restate the table.
    pub fn statuses(self) -> Vec<StepStatus> {
        StepStatus::ALL
            .iter()
            .copied()
            .filter(|&status| {
                let input = ClaimInput {
                    status,
                    function: None,
                    attempt: RetryPolicy::FIRST_ATTEMPT,
                    retry: RetryPolicy::with_retries(1),
                };
                Self::decide(input, "") == self
            })
            .collect()
    }

    /// The attempt the step is in after this claim is carried out.
    pub const fn attempt_after(self, attempt: u32) -> u32 {
        match self {
            Self::ClaimRetry => attempt.saturating_add(1),
            _ => attempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StepStatus::{Failed, Pending, Running, Scheduled, Succeeded};

    fn check(
        status: StepStatus,
        pinned: Option<&str>,
        attempt: u32,
        retries: u32,
        expected: ClaimDecision,
    ) {
        let input = ClaimInput {
            status,
            function: pinned,
            attempt,
            retry: RetryPolicy::with_retries(retries),
        };
        assert_eq!(
            ClaimDecision::decide(input, "rpc.fn"),
            expected,
            "{status} pinned {pinned:?} attempt {attempt} retries {retries}"
        );
    }

    #[test]
    fn decision_table() {
        use ClaimDecision::{ClaimFresh, ClaimRetry, Nothing, Refuse};
        let f = Some("rpc.fn");
        let other = Some("rpc.other");
        check(Pending, f, 1, 0, ClaimFresh);
        check(Pending, None, 1, 0, ClaimFresh);
        check(Scheduled, f, 1, 0, ClaimFresh);
        check(Scheduled, f, 2, 3, ClaimFresh);
        check(Running, f, 1, 3, Nothing(NotClaimable::Running));
        check(Succeeded, f, 1, 3, Nothing(NotClaimable::Succeeded));
        check(Failed, f, 1, 1, ClaimRetry);
        check(Failed, f, 3, 3, ClaimRetry);
        check(Failed, f, 4, 3, Nothing(NotClaimable::RetriesExhausted));
        check(Failed, f, 1, 0, Nothing(NotClaimable::RetriesExhausted));
        check(Pending, other, 1, 0, Refuse);
        check(Running, other, 1, 0, Refuse);
        check(Succeeded, other, 1, 0, Refuse);
        check(Failed, other, 1, 5, Refuse);
    }

    #[test]
    fn statuses_per_decision() {
        assert_eq!(ClaimDecision::ClaimFresh.statuses(), [Pending, Scheduled]);
        assert_eq!(ClaimDecision::ClaimRetry.statuses(), [Failed]);
        assert_eq!(ClaimDecision::Refuse.statuses(), []);
    }

    #[test]
    fn only_fresh_and_retry_claim() {
        assert!(ClaimDecision::ClaimFresh.claims());
        assert!(ClaimDecision::ClaimRetry.claims());
        assert!(!ClaimDecision::Refuse.claims());
        assert!(!ClaimDecision::Nothing(NotClaimable::Running).claims());
    }

    #[test]
    fn a_claim_that_took_nothing_is_explained() {
        use crate::ids::{RunId, StepId};
        use crate::records::NewStep;
        use crate::time::Timestamp;
        let at = Timestamp::from_micros(1);
        let mut step = NewStep::new(RunId::generate(), "s", "rpc.fn", serde_json::json!({}))
            .with_retry(RetryPolicy::with_retries(1))
            .into_step(StepId::generate(), at)
            .unwrap();
        let reason = |step: &Step| ClaimOutcome::not_claimed(step, "rpc.fn").unwrap().reason();
        // Claimable as read: another claim took it in between.
        assert_eq!(reason(&step), Some(NotClaimable::Running));
        step.status = Running;
        assert_eq!(reason(&step), Some(NotClaimable::Running));
        step.status = Succeeded;
        assert_eq!(reason(&step), Some(NotClaimable::Succeeded));
        step.status = Failed;
        step.attempt = 2;
        assert_eq!(reason(&step), Some(NotClaimable::RetriesExhausted));
        assert!(matches!(
            ClaimOutcome::not_claimed(&step, "rpc.other"),
            Err(Error::FunctionMismatch { expected, claimed, .. })
                if expected == "rpc.fn" && claimed == "rpc.other"
        ));
        assert_eq!(ClaimOutcome::Claimed(step.clone()).claimed(), Some(step));
    }

    #[test]
    fn a_retry_raises_the_attempt_by_exactly_one() {
        assert_eq!(ClaimDecision::ClaimRetry.attempt_after(1), 2);
        assert_eq!(ClaimDecision::ClaimFresh.attempt_after(1), 1);
        assert_eq!(ClaimDecision::ClaimRetry.attempt_after(u32::MAX), u32::MAX);
    }
}
