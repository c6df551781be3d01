//! Step claims that expire: the deadline a claim puts on a running step,
//! the fence a claimer's writes carry, and what recovery does with a claim
//! whose holder is gone.
//!
//! A claim hands one worker one attempt of a step. If that worker dies, the
//! step would stay `running` for ever: nothing else may claim it. So every
//! claim carries a *deadline* ([`Step::claimed_until`]), measured on the
//! store's lease clock (the database's clock, as for run leases: see
//! [`lease`](crate::lease#one-clock-for-leases)): the step's own
//! [`claim_timeout`](Step::claim_timeout) or the store's default
//! ([`DEFAULT_CLAIM_TIMEOUT`]) after the claim. A holder that is still
//! working extends it ([`StepStore::renew_step_claim`], a heartbeat). Once
//! the deadline has passed, recovery
//! ([`RecoveryStore::expire_step_claims`]) fails the attempt with
//! [`claim_expired_error`], and the step is retried or failed for good by
//! its [`RetryPolicy`], like any failed attempt.
//!
//! The old holder may not be dead, only slow. Its late writes must not
//! overwrite the retry, so a claimer's writes carry its [`StepClaim`]: the
//! step and the attempt it was given. The attempt is a fencing token: a
//! claim either moves a step to running in its current attempt (pending,
//! scheduled) or starts the next one (a retry), and an expired attempt is
//! failed, so the attempt it held is never handed out again
//! ([`StepStore::transition_claimed`], [`BatchStepStore::complete_batch`]).
//!
//! Every running step has a deadline and no other step has one: a store
//! sets it whenever a step moves to running (a claim, a batch claim, a
//! transition or a retry to running) and clears it on every move away.
//!
//! [`StepStore::renew_step_claim`]: crate::ports::StepStore::renew_step_claim
//! [`StepStore::transition_claimed`]: crate::ports::StepStore::transition_claimed
//! [`BatchStepStore::complete_batch`]: crate::ports::BatchStepStore::complete_batch
//! [`RecoveryStore::expire_step_claims`]: crate::ports::RecoveryStore::expire_step_claims

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::ids::{RunId, StepId};
use crate::records::{NewStep, Step, StepTransition};
use crate::retry::RetryPolicy;
use crate::status::StepStatus;
use crate::time::Timestamp;

/// How long a claim holds a step when neither the step
/// ([`NewStep::claim_timeout`](crate::NewStep::claim_timeout)) nor the
/// store says otherwise: ten minutes.
///
/// Long enough that a step doing real work (a payment, a model call) is
/// not taken back from a live worker that does not heartbeat; short enough
/// that a step held by a worker that died comes back within minutes, not
/// hours. A step that runs longer renews its claim
/// ([`StepStore::renew_step_claim`](crate::ports::StepStore::renew_step_claim))
/// or asks for a longer timeout.
pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The longest claim timeout a step or a store may ask for: one day.
pub const LONGEST_CLAIM_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// What a claimer's writes carry: the step and the attempt its claim was
/// given. A write carrying a claim that no longer holds the step (the
/// attempt expired and was taken back, or the step moved on) is
/// [`Error::ClaimLost`] and writes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepClaim {
    /// The step.
    pub step: StepId,
    /// The attempt the claim was given.
    pub attempt: u32,
}

impl StepClaim {
    /// The claim of `step` as a claim answered it: its id and its current
    /// attempt.
    pub const fn of(step: &Step) -> Self {
        Self {
            step: step.id,
            attempt: step.attempt,
        }
    }

    /// The refusal of a write carrying this claim once it no longer holds
    /// the step.
    pub const fn lost(self) -> Error {
        Error::ClaimLost {
            step: self.step,
            attempt: self.attempt,
        }
    }

    /// Explains a fenced `transition` of this claim that moved nothing,
    /// from `step` as read during or after the move:
    ///
    /// | the step | answer |
    /// | --- | --- |
    /// | in this attempt, already in the transition's status (one a claimer moves to) with its payload | `Ok(())`: a repeat of a move that was written (a flush retried after an unknown outcome, say) |
    /// | in another attempt, not running, or moved with another payload | [`Error::ClaimLost`] |
    /// | running in this attempt | [`Error::IllegalStepTransition`] from running: not a move a claimer makes |
    pub fn explain_refusal(self, step: &Step, transition: &StepTransition) -> Result<(), Error> {
        let to = transition.target();
        let repeat = step.attempt == self.attempt
            && step.status == to
            && to != StepStatus::Running
            && Self::holds_payload(step, transition);
        if repeat {
            return Ok(());
        }
        if step.attempt != self.attempt || step.status != StepStatus::Running {
            return Err(self.lost());
        }
        Err(Error::IllegalStepTransition {
            step: self.step,
            from: step.status,
            to,
        })
    }

    /// Whether `step` holds the payload `transition` writes (a move without
    /// one always does).
    fn holds_payload(step: &Step, transition: &StepTransition) -> bool {
        match transition {
            StepTransition::Succeeded(result) => step.result.as_ref() == Some(result),
            StepTransition::Failed(error) => step.error.as_ref() == Some(error),
            StepTransition::Running | StepTransition::Scheduled => true,
        }
    }
}

impl Step {
    /// This step's claim as the claim that took it answered it (see
    /// [`StepClaim::of`]).
    pub const fn claim(&self) -> StepClaim {
        StepClaim::of(self)
    }
}

/// The statuses a claimer may move its running step to: a sleep
/// (scheduled), a success or a failure. Everything
/// [`StepStatus::TRANSITIONS`] allows from running.
pub fn claimed_targets() -> Vec<StepStatus> {
    StepStatus::ALL
        .iter()
        .copied()
        .filter(|&to| StepStatus::Running.can_transition_to(to))
        .collect()
}

/// Checks a claim timeout: longer than zero and at most
/// [`LONGEST_CLAIM_TIMEOUT`], in whole milliseconds as stores keep it.
pub fn check_claim_timeout(timeout: Duration) -> Result<(), Error> {
    if timeout < Duration::from_millis(1) || timeout > LONGEST_CLAIM_TIMEOUT {
        return Err(Error::InvalidInput(InvalidInput::OutOfRange {
            field: field::CLAIM_TIMEOUT,
            detail: format!(
                "{timeout:?} is not between 1 ms and {} ms",
                LONGEST_CLAIM_TIMEOUT.as_millis()
            ),
        }));
    }
    Ok(())
}

/// A claim timeout as stores keep it: whole milliseconds, checked by
/// [`check_claim_timeout`]. `None` (the store's default) stays `None`.
pub fn claim_timeout_millis(timeout: Option<Duration>) -> Result<Option<i64>, Error> {
    timeout
        .map(|t| {
            check_claim_timeout(t)?;
            Ok(i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
        })
        .transpose()
}

/// Written here, beside the claim timeout it checks, so that `records`
/// (the rows) needs nothing of the claim rules.
impl NewStep {
    /// The step as a store inserts it: pending, attempt 1, nothing recorded
    /// yet, its retry policy as stores keep it
    /// ([`RetryPolicy::as_stored`], which refuses an over-long delay) and
    /// its claim timeout in whole milliseconds
    /// ([`claim_timeout_millis`],
    /// which refuses one out of range).
    pub fn into_step(self, id: StepId, now: Timestamp) -> Result<Step, Error> {
        let claim_timeout = claim_timeout_millis(self.claim_timeout)?
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        Ok(Step {
            id,
            run: self.run,
            name: self.name,
            function: self.function,
            status: StepStatus::Pending,
            input: self.input,
            result: None,
            error: None,
            attempt: RetryPolicy::FIRST_ATTEMPT,
            retry: self.retry.as_stored()?,
            claim_timeout,
            claimed_until: None,
            branch: None,
            created_at: now,
            updated_at: now,
        })
    }
}

/// The claim timeout a claim of `step` applies: the step's own, or
/// `default` (the store's).
pub fn effective_timeout(step_timeout: Option<Duration>, default: Duration) -> Duration {
    step_timeout.unwrap_or(default)
}

/// Whether `step`'s claim has run out at `lease_now` (on the store's lease
/// clock): it is running and its deadline is not after `lease_now` (a claim
/// is gone at the instant its deadline comes, as a lease is).
pub fn is_expired(step: &Step, lease_now: Timestamp) -> bool {
    step.status == StepStatus::Running && step.claimed_until.is_some_and(|at| at <= lease_now)
}

/// The error an expired attempt fails with, the same from every store, so
/// an engine and an operator tell it from a failure the step reported.
pub fn claim_expired_error() -> Value {
    json!({
        "reason": "claim_expired",
        "detail": "the claim ran out before its holder completed the attempt; recovery took it back",
    })
}

/// A claim recovery took back
/// ([`RecoveryStore::expire_step_claims`](crate::ports::RecoveryStore::expire_step_claims)):
/// the attempt is failed with [`claim_expired_error`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredClaim {
    /// The step's run: what recovery re-drives when the step has an
    /// attempt left.
    pub run: RunId,
    /// The step.
    pub step: StepId,
    /// The step's name.
    pub name: String,
    /// The attempt that expired (now failed).
    pub attempt: u32,
    /// When the claim ran out, on the store's lease clock.
    pub claimed_until: Timestamp,
    /// Whether the step's retry policy allows another attempt: a claim
    /// retries it; otherwise it is failed for good.
    pub retrying: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::NewStep;

    fn step() -> Step {
        NewStep::new(RunId::generate(), "s", "f", json!({}))
            .into_step(StepId::generate(), Timestamp::from_micros(1))
            .unwrap()
    }

    #[test]
    fn a_claimer_moves_its_step_only_where_running_may_go() {
        assert_eq!(
            claimed_targets(),
            [
                StepStatus::Scheduled,
                StepStatus::Succeeded,
                StepStatus::Failed
            ]
        );
    }

    #[test]
    fn a_refused_fenced_move_is_explained() {
        let mut step = step();
        step.status = StepStatus::Running;
        step.attempt = 2;
        let claim = StepClaim::of(&step);
        let lost = |r: Result<(), Error>| matches!(r, Err(Error::ClaimLost { attempt: 2, .. }));
        let done = StepTransition::Succeeded(json!({"n": 1}));
        // A repeat of a move that was written.
        step.status = StepStatus::Succeeded;
        step.result = Some(json!({"n": 1}));
        assert!(claim.explain_refusal(&step, &done).is_ok());
        // The same status with another payload: another writer's move.
        let other = StepTransition::Succeeded(json!({"n": 2}));
        assert!(lost(claim.explain_refusal(&step, &other)));
        // Expired and failed by recovery: a late success is lost, and so is
        // a late failure (the attempt's error is the expiry's).
        step.status = StepStatus::Failed;
        step.result = None;
        step.error = Some(claim_expired_error());
        assert!(lost(claim.explain_refusal(&step, &done)));
        let boom = StepTransition::Failed(json!("boom"));
        assert!(lost(claim.explain_refusal(&step, &boom)));
        // Retried: the next attempt is another claim's.
        step.status = StepStatus::Running;
        step.attempt = 3;
        assert!(lost(claim.explain_refusal(&step, &done)));
        // Still ours, asked for a move no claimer makes.
        step.attempt = 2;
        assert!(matches!(
            claim.explain_refusal(&step, &StepTransition::Running),
            Err(Error::IllegalStepTransition {
                from: StepStatus::Running,
                to: StepStatus::Running,
                ..
            })
        ));
    }

    #[test]
    fn claim_timeouts_are_bounded_and_kept_in_millis() {
        assert!(check_claim_timeout(Duration::from_millis(1)).is_ok());
        assert!(check_claim_timeout(LONGEST_CLAIM_TIMEOUT).is_ok());
        for bad in [
            Duration::ZERO,
            Duration::from_micros(999),
            LONGEST_CLAIM_TIMEOUT + Duration::from_millis(1),
        ] {
            assert!(matches!(
                check_claim_timeout(bad),
                Err(Error::InvalidInput(InvalidInput::OutOfRange { .. }))
            ));
        }
        assert_eq!(
            claim_timeout_millis(Some(Duration::from_micros(2_500))).unwrap(),
            Some(2)
        );
        assert_eq!(claim_timeout_millis(None).unwrap(), None);
        assert_eq!(
            effective_timeout(None, DEFAULT_CLAIM_TIMEOUT),
            DEFAULT_CLAIM_TIMEOUT
        );
    }

    #[test]
    fn a_claim_is_gone_at_its_deadline() {
        let mut step = step();
        let deadline = Timestamp::from_micros(100);
        step.claimed_until = Some(deadline);
        assert!(
            !is_expired(&step, Timestamp::from_micros(999)),
            "not running"
        );
        step.status = StepStatus::Running;
        assert!(!is_expired(&step, Timestamp::from_micros(99)));
        assert!(is_expired(&step, deadline));
        step.claimed_until = None;
        assert!(!is_expired(&step, Timestamp::from_micros(999)));
    }
}
