//! What recovery looks for: steps nobody dispatched and runs nobody moves,
//! as pure rules over the records, so every backend finds the same ones.
//!
//! Two observations, one remedy. A step that is claimable but untouched for
//! a while ([`is_undispatched`]) was most likely owed a dispatch message that
//! was lost; a running run with no activity for a while ([`is_stalled`]) was
//! most likely being driven by a worker that died. Both are answered by
//! re-driving the *run* (the engine's one orchestrator message), which is
//! safe because claims are exclusive: a duplicate dispatch finds its step
//! already claimed and does nothing. How often a run may be re-driven is
//! [`RedispatchBackoff`](crate::RedispatchBackoff)'s to say.
//!
//! The ports that answer these queries from an index are
//! [`RecoveryStore`](crate::ports::RecoveryStore) and
//! [`RunRecoveryStore`](crate::ports::RunRecoveryStore).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::batch::BatchClaim;
use crate::ids::{RunId, StepId};
use crate::lease::LeaseState;
use crate::records::{Run, Step};
use crate::status::{RunStatus, StepStatus};
use crate::time::Timestamp;

/// How many rows one recovery query answers when asked for `0`.
pub const DEFAULT_RECOVERY_LIMIT: u32 = 100;
/// The most rows one recovery query answers.
pub const MAX_RECOVERY_LIMIT: u32 = 1_000;

/// The limit a store applies to a recovery query: `0` reads as
/// [`DEFAULT_RECOVERY_LIMIT`], more than [`MAX_RECOVERY_LIMIT`] as that.
pub fn effective_limit(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_RECOVERY_LIMIT,
        n => n.min(MAX_RECOVERY_LIMIT),
    }
}

/// The time `idle_for` before `now`: what a row must be older than to be
/// idle, saturating at the epoch.
pub fn idle_cutoff(now: Timestamp, idle_for: Duration) -> Timestamp {
    let micros = i64::try_from(idle_for.as_micros()).unwrap_or(i64::MAX);
    Timestamp::from_micros(now.as_micros().saturating_sub(micros).max(0))
}

/// A step the relay found: claimable, untouched since before the cutoff,
/// in a run that is not settled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndispatchedStep {
    /// The step's run: what the relay re-drives.
    pub run: RunId,
    /// The step.
    pub step: StepId,
    /// The step's name.
    pub name: String,
    /// Pending, or failed with a retry due.
    pub status: StepStatus,
    /// When the step last changed.
    pub updated_at: Timestamp,
}

impl UndispatchedStep {
    /// The relay's row for `step`.
    pub fn of(step: &Step) -> Self {
        Self {
            run: step.run,
            step: step.id,
            name: step.name.clone(),
            status: step.status,
            updated_at: step.updated_at,
        }
    }
}

/// A run the stalled sweep found: running, with nothing moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StalledRun {
    /// The run.
    pub run: RunId,
    /// When the run or one of its steps last changed, whichever is later.
    pub last_activity: Timestamp,
}

/// Whether the relay re-drives the run of `step`: the step is one a claim
/// would take at `now` ([`BatchClaim::takes`]: pending, or failed with an
/// attempt left and its retry delay passed), it has not changed since
/// `cutoff` (`updated_at < cutoff`), and its run (in `run_status`) is not
/// settled.
///
/// A *scheduled* step is left out: it waits for a time or a signal that the
/// step store does not hold, and is woken by whoever holds it (for runs
/// under leases, [`RunWaitStore::wake_expired`](crate::ports::RunWaitStore::wake_expired)
/// and the run claim; a run sleeping on one is not stalled either).
pub fn is_undispatched(
    step: &Step,
    run_status: RunStatus,
    cutoff: Timestamp,
    now: Timestamp,
) -> bool {
    !run_status.is_settled() && step.updated_at < cutoff && BatchClaim::new(1).takes(step, now)
}

/// Whether the stalled sweep re-drives `run`, whose steps are `steps` and
/// whose lease bookkeeping is `lease` (`None` for a backend without leases,
/// or a run never leased), at `cutoff` on the row clock and `lease_now` on
/// the lease clock:
///
/// - the run is [`RunStatus::Running`] and has not changed since `cutoff`;
/// - none of its steps has changed since `cutoff`, and none is running
///   (a worker has it) or scheduled (the run sleeps on it);
/// - no worker holds an unexpired lease on it, and it is not waiting: no
///   signal awaited, no wake-up time still ahead.
///
/// Suspended runs are not stalled: they wait for an outside approval or
/// signal, and re-driving them changes nothing.
pub fn is_stalled(
    run: &Run,
    steps: &[Step],
    lease: Option<&LeaseState>,
    cutoff: Timestamp,
    lease_now: Timestamp,
) -> bool {
    let quiet_steps = steps.iter().all(|step| {
        step.updated_at < cutoff
            && !matches!(step.status, StepStatus::Running | StepStatus::Scheduled)
    });
    let free = lease.is_none_or(|lease| {
        lease.expires_at.is_none_or(|at| at <= lease_now)
            && lease.waiting_on.is_none()
            && lease.wake_at.is_none_or(|at| at <= lease_now)
    });
    run.status == RunStatus::Running && run.updated_at < cutoff && quiet_steps && free
}

/// The stalled-sweep row for `run` and its `steps`: its latest activity.
pub fn stalled_run(run: &Run, steps: &[Step]) -> StalledRun {
    let last_activity = steps
        .iter()
        .map(|step| step.updated_at)
        .fold(run.updated_at, Timestamp::max);
    StalledRun {
        run: run.id,
        last_activity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryPolicy;
    use serde_json::json;

    const SECOND: i64 = 1_000_000;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_micros(secs * SECOND)
    }

    fn step(status: StepStatus, updated: i64) -> Step {
        Step {
            id: StepId::generate(),
            run: RunId::generate(),
            name: "s".to_owned(),
            function: None,
            status,
            input: json!({}),
            result: None,
            error: None,
            attempt: 1,
            retry: RetryPolicy::with_retries(1),
            claim_timeout: None,
            claimed_until: None,
            branch: None,
            created_at: at(0),
            updated_at: at(updated),
        }
    }

    fn run(status: RunStatus, updated: i64) -> Run {
        Run {
            id: RunId::generate(),
            workflow: "w".to_owned(),
            status,
            input: json!({}),
            graph_hash: None,
            parent: None,
            idempotency_key: None,
            output: None,
            created_at: at(0),
            updated_at: at(updated),
        }
    }

    #[test]
    fn the_relay_takes_idle_claimable_steps_of_unsettled_runs() {
        let (cutoff, now) = (at(10), at(100));
        assert!(is_undispatched(
            &step(StepStatus::Pending, 9),
            RunStatus::Running,
            cutoff,
            now
        ));
        assert!(is_undispatched(
            &step(StepStatus::Failed, 9),
            RunStatus::Suspended,
            cutoff,
            now
        ));
        assert!(!is_undispatched(
            &step(StepStatus::Pending, 10),
            RunStatus::Running,
            cutoff,
            now
        ));
        for settled in [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert!(!is_undispatched(
                &step(StepStatus::Pending, 1),
                settled,
                cutoff,
                now
            ));
        }
        for busy in [
            StepStatus::Running,
            StepStatus::Scheduled,
            StepStatus::Succeeded,
        ] {
            assert!(!is_undispatched(
                &step(busy, 1),
                RunStatus::Running,
                cutoff,
                now
            ));
        }
        let mut spent = step(StepStatus::Failed, 1);
        spent.attempt = 2;
        assert!(!is_undispatched(&spent, RunStatus::Running, cutoff, now));
    }

    #[test]
    fn a_stalled_run_is_running_quiet_unleased_and_not_waiting() {
        let (cutoff, lease_now) = (at(10), at(50));
        let quiet = run(RunStatus::Running, 5);
        let done = [step(StepStatus::Succeeded, 5), step(StepStatus::Pending, 9)];
        assert!(is_stalled(&quiet, &done, None, cutoff, lease_now));
        assert!(!is_stalled(
            &run(RunStatus::Suspended, 5),
            &done,
            None,
            cutoff,
            lease_now
        ));
        assert!(!is_stalled(
            &run(RunStatus::Running, 10),
            &done,
            None,
            cutoff,
            lease_now
        ));
        assert!(!is_stalled(
            &quiet,
            &[step(StepStatus::Succeeded, 10)],
            None,
            cutoff,
            lease_now
        ));
        for busy in [StepStatus::Running, StepStatus::Scheduled] {
            assert!(!is_stalled(
                &quiet,
                &[step(busy, 1)],
                None,
                cutoff,
                lease_now
            ));
        }
        let held = LeaseState {
            expires_at: Some(at(51)),
            ..LeaseState::default()
        };
        assert!(!is_stalled(&quiet, &done, Some(&held), cutoff, lease_now));
        let expired = LeaseState {
            expires_at: Some(at(50)),
            ..LeaseState::default()
        };
        assert!(is_stalled(&quiet, &done, Some(&expired), cutoff, lease_now));
        let waiting = LeaseState {
            waiting_on: Some("approval".to_owned()),
            ..LeaseState::default()
        };
        assert!(!is_stalled(
            &quiet,
            &done,
            Some(&waiting),
            cutoff,
            lease_now
        ));
        let sleeping = LeaseState {
            wake_at: Some(at(60)),
            ..LeaseState::default()
        };
        assert!(!is_stalled(
            &quiet,
            &done,
            Some(&sleeping),
            cutoff,
            lease_now
        ));
        let woken = LeaseState {
            wake_at: Some(at(50)),
            ..LeaseState::default()
        };
        assert!(is_stalled(&quiet, &done, Some(&woken), cutoff, lease_now));
        assert_eq!(stalled_run(&quiet, &done).last_activity, at(9));
    }

    #[test]
    fn limits_default_and_cap() {
        assert_eq!(effective_limit(0), DEFAULT_RECOVERY_LIMIT);
        assert_eq!(effective_limit(7), 7);
        assert_eq!(effective_limit(u32::MAX), MAX_RECOVERY_LIMIT);
    }

    #[test]
    fn the_cutoff_is_idle_for_before_now_and_never_before_the_epoch() {
        let now = Timestamp::from_micros(10_000_000);
        assert_eq!(
            idle_cutoff(now, Duration::from_secs(4)),
            Timestamp::from_micros(6_000_000)
        );
        assert_eq!(idle_cutoff(now, Duration::MAX), Timestamp::from_micros(0));
    }
}
