//! Batches for worker pools: the claim of the next N claimable steps across
//! runs ([`BatchClaim`]), completions and failures written many at a time
//! ([`Completion`]), and the pure rules both follow, so every backend takes
//! the same steps and answers the same per-item outcomes.
//!
//! The port is [`BatchStepStore`](crate::ports::BatchStepStore): a new
//! trait beside [`StepStore`](crate::ports::StepStore), so a backend that
//! has no batches keeps compiling.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::claim::ClaimDecision;
use crate::error::Error;
use crate::ids::StepId;
use crate::limits::Dismantle;
use crate::records::{Step, StepTransition};
use crate::status::StepStatus;
use crate::step_claim::StepClaim;
use crate::time::Timestamp;

/// What a batch claim takes: at most `limit` steps, optionally only those
/// pinned to `function`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchClaim {
    /// At most this many steps (`0` claims none; more than
    /// [`BatchClaim::MAX_LIMIT`] reads as that).
    pub limit: u32,
    /// Only steps pinned to this function; `None` takes steps pinned to any
    /// function or to none.
    pub function: Option<String>,
}

impl BatchClaim {
    /// The most steps one batch claim takes.
    pub const MAX_LIMIT: u32 = 1_000;

    /// Up to `limit` steps of any function.
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            function: None,
        }
    }

    /// The same claim, only of steps pinned to `function`.
    #[must_use]
    pub fn for_function(mut self, function: impl Into<String>) -> Self {
        self.function = Some(function.into());
        self
    }

    /// The limit a store applies: `limit`, capped at [`Self::MAX_LIMIT`].
    pub fn effective_limit(&self) -> u32 {
        self.limit.min(Self::MAX_LIMIT)
    }

    /// The statuses a batch claim takes a step from, as
    /// [`ClaimDecision`] would claim it: fresh from pending, as a retry
    /// from failed (with attempts left, once its delay has passed; see
    /// [`Self::is_due`]). A scheduled step is left alone: it waits for a
    /// time or a signal the store does not know, and the engine claims it
    /// by name when it wakes.
    pub fn statuses() -> Vec<StepStatus> {
        let fresh = ClaimDecision::ClaimFresh.statuses();
        let retry = ClaimDecision::ClaimRetry.statuses();
        fresh
            .into_iter()
            .filter(|s| *s != StepStatus::Scheduled)
            .chain(retry)
            .collect()
    }

    /// Whether a batch claim at `now` takes `step`: a pending step, or a
    /// failed one with attempts left whose retry delay has passed since it
    /// failed (its `updated_at`), pinned to the claim's function if it names
    /// one. Backends order what this admits by `(created_at, id)`, oldest
    /// first.
    pub fn takes(&self, step: &Step, now: Timestamp) -> bool {
        let pinned = match &self.function {
            Some(function) => step.function.as_deref() == Some(function.as_str()),
            None => true,
        };
        pinned
            && match step.status {
                StepStatus::Pending => true,
                StepStatus::Failed => {
                    step.retry.has_attempts_left(step.attempt)
                        && Self::is_due(step.updated_at, step.retry.retry_delay, now)
                }
                StepStatus::Scheduled | StepStatus::Running | StepStatus::Succeeded => false,
            }
    }

    /// Whether a step that failed at `failed_at` with `delay` is due at
    /// `now` (no delay: at once).
    pub fn is_due(failed_at: Timestamp, delay: Option<Duration>, now: Timestamp) -> bool {
        let delay = delay.map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        failed_at.as_micros().saturating_add(delay) <= now.as_micros()
    }
}

/// The outcome a worker writes for the current attempt of a step it ran.
#[derive(Clone, Debug, PartialEq)]
pub enum Completion {
    /// It finished with this result.
    Succeeded(Value),
    /// It failed with this error.
    Failed(Value),
}

impl Completion {
    /// The status the step moves to.
    pub const fn target(&self) -> StepStatus {
        match self {
            Self::Succeeded(_) => StepStatus::Succeeded,
            Self::Failed(_) => StepStatus::Failed,
        }
    }

    /// The same outcome as a [`StepTransition`].
    pub fn into_transition(self) -> StepTransition {
        match self {
            Self::Succeeded(result) => StepTransition::Succeeded(result),
            Self::Failed(error) => StepTransition::Failed(error),
        }
    }

    /// The same outcome as a [`StepTransition`], borrowed.
    pub fn to_transition(&self) -> StepTransition {
        self.clone().into_transition()
    }
}

/// The answers to the items of `completions` that name a step an earlier
/// item of the same batch already names, by index. A batch applies its
/// items in order, so such an item finds the step already moved by the
/// first: it is [`Error::IllegalStepTransition`] from the first item's
/// target, and a backend writes only the first.
pub fn repeated_items(completions: &[(StepClaim, Completion)]) -> HashMap<usize, Error> {
    let mut first: HashMap<StepId, StepStatus> = HashMap::new();
    let mut repeated = HashMap::new();
    for (index, (claim, completion)) in completions.iter().enumerate() {
        let id = &claim.step;
        match first.get(id) {
            Some(&from) => {
                let error = Error::IllegalStepTransition {
                    step: *id,
                    from,
                    to: completion.target(),
                };
                repeated.insert(index, error);
            }
            None => {
                first.insert(*id, completion.target());
            }
        }
    }
    repeated
}

impl Dismantle for Completion {
    fn dismantle(self) {
        self.into_transition().dismantle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RunId;
    use crate::retry::RetryPolicy;
    use serde_json::json;

    fn step(status: StepStatus, attempt: u32, retry: RetryPolicy) -> Step {
        Step {
            id: StepId::generate(),
            run: RunId::generate(),
            name: "s".to_owned(),
            function: Some("f".to_owned()),
            status,
            input: json!({}),
            result: None,
            error: None,
            attempt,
            retry,
            claim_timeout: None,
            claimed_until: None,
            branch: None,
            created_at: Timestamp::from_micros(0),
            updated_at: Timestamp::from_micros(1_000_000),
        }
    }

    #[test]
    fn takes_pending_and_due_retries_only() {
        let claim = BatchClaim::new(10);
        let now = Timestamp::from_micros(1_000_000);
        let none = RetryPolicy::with_retries(0);
        let one = RetryPolicy::with_retries(1);
        assert!(claim.takes(&step(StepStatus::Pending, 1, none), now));
        assert!(claim.takes(&step(StepStatus::Failed, 1, one), now));
        assert!(!claim.takes(&step(StepStatus::Failed, 2, one), now));
        for status in [
            StepStatus::Scheduled,
            StepStatus::Running,
            StepStatus::Succeeded,
        ] {
            assert!(!claim.takes(&step(status, 1, one), now), "{status}");
        }
        let delayed = RetryPolicy {
            retries: 1,
            retry_delay: Some(Duration::from_secs(2)),
        };
        let failed = step(StepStatus::Failed, 1, delayed);
        assert!(!claim.takes(&failed, now));
        assert!(!claim.takes(&failed, Timestamp::from_micros(2_999_999)));
        assert!(claim.takes(&failed, Timestamp::from_micros(3_000_000)));
    }

    #[test]
    fn the_function_filter_is_exact() {
        let now = Timestamp::from_micros(5);
        let pending = step(StepStatus::Pending, 1, RetryPolicy::with_retries(0));
        assert!(BatchClaim::new(1).for_function("f").takes(&pending, now));
        assert!(!BatchClaim::new(1).for_function("F").takes(&pending, now));
        let unpinned = Step {
            function: None,
            ..pending
        };
        assert!(BatchClaim::new(1).takes(&unpinned, now));
        assert!(!BatchClaim::new(1).for_function("f").takes(&unpinned, now));
    }

    #[test]
    fn statuses_are_pending_and_failed() {
        assert_eq!(
            BatchClaim::statuses(),
            [StepStatus::Pending, StepStatus::Failed]
        );
        assert_eq!(
            BatchClaim::new(5_000).effective_limit(),
            BatchClaim::MAX_LIMIT
        );
    }

    #[test]
    fn repeated_items_are_the_later_ones() {
        let claim = |attempt| StepClaim {
            step: StepId::generate(),
            attempt,
        };
        let (a, b) = (claim(1), claim(1));
        // The same step in another attempt is still the same step.
        let a2 = StepClaim { attempt: 2, ..a };
        let done = Completion::Succeeded(json!(1));
        let failed = Completion::Failed(json!(2));
        let items = vec![
            (a, done.clone()),
            (b, done.clone()),
            (a, failed),
            (a2, done),
        ];
        let repeated = repeated_items(&items);
        let mut indexes: Vec<usize> = repeated.keys().copied().collect();
        indexes.sort_unstable();
        assert_eq!(indexes, [2, 3]);
        assert!(matches!(
            repeated[&2],
            Error::IllegalStepTransition {
                from: StepStatus::Succeeded,
                to: StepStatus::Failed,
                ..
            }
        ));
    }
}
