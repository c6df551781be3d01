//! The claim decision: what claiming a step for execution does, for each step
//! status.
//!
//! Dispatch is at-least-once (a relay re-dispatches, a queue redelivers), so
//! the claim is the one thing between a duplicate delivery and a second
//! execution. This module only *decides*; a backend carries the decision out
//! as one status-guarded write whose affected rows pick the single winner.

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
    /// Another worker is executing it.
    Running,
    /// It has already succeeded.
    Succeeded,
    /// It failed and its retry policy allows no further attempt.
    RetriesExhausted,
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
    fn a_retry_raises_the_attempt_by_exactly_one() {
        assert_eq!(ClaimDecision::ClaimRetry.attempt_after(1), 2);
        assert_eq!(ClaimDecision::ClaimFresh.attempt_after(1), 1);
        assert_eq!(ClaimDecision::ClaimRetry.attempt_after(u32::MAX), u32::MAX);
    }
}
