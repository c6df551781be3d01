//! [`RecoveryStore`]: which steps the relay finds (claimable, idle, in
//! unsettled runs) and which runs the stalled sweep finds (running, quiet,
//! unleased, not waiting), in their order and up to their limit.
//!
//! "Idle" is measured on the store's row clock, the harness clock, which
//! the cases move to age rows; leases expire on the lease clock
//! ([`LeaseHarness::advance_lease_clock`]).

use std::time::Duration;

use flowstate_core::ports::{RecoveryStore, RunLeaseStore, RunStore, RunWaitStore, StepStore};
use flowstate_core::{NewStep, RetryPolicy, RunId, RunStatus, StepStatus, StepTransition, Wait};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::support::{FUNCTION, new_run, new_step, run_in, step_in};

/// How long a row must be untouched to be idle, in these cases.
pub(crate) const IDLE: Duration = Duration::from_secs(60);

/// Longer than [`IDLE`]: moving the row clock this far ages every row.
pub(crate) const PAST_IDLE: Duration = Duration::from_secs(10 * 60);

/// The runs of the relay's answer, in order, one per step.
async fn relayed_runs<H: LeaseHarness>(h: &H) -> Vec<RunId>
where
    H::Store: RecoveryStore,
{
    let steps = h.store().undispatched_steps(IDLE, 0).await.unwrap();
    steps.into_iter().map(|step| step.run).collect()
}

/// The runs of the stalled sweep's answer, in order.
pub(crate) async fn stalled<H: LeaseHarness>(h: &H) -> Vec<RunId>
where
    H::Store: RecoveryStore,
{
    let runs = h.store().stalled_runs(IDLE, 0).await.unwrap();
    runs.into_iter().map(|stalled| stalled.run).collect()
}

/// The relay finds pending steps and failed steps with a retry due, idle
/// for the threshold, in runs that are not settled, oldest first; every
/// other status, a settled run and a step touched since are left out.
pub async fn undispatched_steps_are_idle_claimable_steps<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = new_run(h).await;
    let pending = new_step(h, run.id, "pending", 0).await;
    h.clock().advance(Duration::from_millis(1));
    let failed = {
        let step = new_step(h, run.id, "failed", 1).await;
        for t in [
            StepTransition::Running,
            StepTransition::Failed(json!({"e": 1})),
        ] {
            h.store().transition_step(step.id, t).await.unwrap();
        }
        step
    };
    h.clock().advance(Duration::from_millis(1));
    for status in [
        StepStatus::Scheduled,
        StepStatus::Running,
        StepStatus::Succeeded,
    ] {
        step_in(h, run.id, status.as_str(), status).await;
    }
    // Failed with no attempt left: nothing to dispatch.
    step_in(h, run.id, "spent", StepStatus::Failed).await;
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let settled = new_run(h).await;
        new_step(h, settled.id, "orphan", 0).await;
        h.store().set_run_status(settled.id, status).await.unwrap();
    }
    let suspended = run_in(h, RunStatus::Suspended).await;
    let waiting = new_step(h, suspended.id, "pending", 0).await;
    assert_eq!(relayed_runs(h).await, [], "nothing is idle yet");
    h.clock().advance(PAST_IDLE);
    let fresh = new_step(h, run.id, "fresh", 0).await;
    let found = h.store().undispatched_steps(IDLE, 0).await.unwrap();
    let found: Vec<_> = found
        .iter()
        .map(|s| (s.step, s.run, s.name.as_str(), s.status))
        .collect();
    assert_eq!(
        found,
        [
            (pending.id, run.id, "pending", StepStatus::Pending),
            (failed.id, run.id, "failed", StepStatus::Failed),
            (waiting.id, suspended.id, "pending", StepStatus::Pending),
        ],
        "a fresh step {} was found, or an idle one missed",
        fresh.id
    );
}

/// A failed step whose retry delay has not passed is not owed a dispatch
/// yet; once it has, it is.
pub async fn undispatched_steps_wait_for_the_retry_delay<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = new_run(h).await;
    let policy = RetryPolicy {
        retries: 1,
        retry_delay: Some(Duration::from_secs(3600)),
    };
    let step = NewStep::new(run.id, "slow", FUNCTION, json!({})).with_retry(policy);
    let step = h.store().insert_step(step).await.unwrap().record;
    for t in [
        StepTransition::Running,
        StepTransition::Failed(json!({"e": 1})),
    ] {
        h.store().transition_step(step.id, t).await.unwrap();
    }
    h.clock().advance(PAST_IDLE);
    assert_eq!(relayed_runs(h).await, [], "a retry not due yet was relayed");
    h.clock().advance(Duration::from_secs(3600));
    assert_eq!(relayed_runs(h).await, [run.id]);
}

/// Each recovery query answers at most its limit, oldest first.
pub async fn recovery_queries_honour_their_limit<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let mut runs = Vec::new();
    for _ in 0..5 {
        let run = new_run(h).await;
        new_step(h, run.id, "s", 0).await;
        runs.push(run.id);
        h.clock().advance(Duration::from_millis(1));
    }
    h.clock().advance(PAST_IDLE);
    let steps = h.store().undispatched_steps(IDLE, 3).await.unwrap();
    let steps: Vec<_> = steps.into_iter().map(|s| s.run).collect();
    assert_eq!(steps, runs[..3]);
    let quiet = h.store().stalled_runs(IDLE, 2).await.unwrap();
    let quiet: Vec<_> = quiet.into_iter().map(|s| s.run).collect();
    assert_eq!(quiet, runs[..2]);
}

/// A running run with nothing moving is stalled, least recently moved
/// first; a step that moved since the cutoff, a step running or scheduled,
/// a suspended or settled run are not.
pub async fn stalled_runs_are_running_and_quiet<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let bare = new_run(h).await;
    h.clock().advance(Duration::from_millis(1));
    let with_steps = new_run(h).await;
    step_in(h, with_steps.id, "done", StepStatus::Succeeded).await;
    new_step(h, with_steps.id, "next", 0).await;
    let busy = new_run(h).await;
    step_in(h, busy.id, "busy", StepStatus::Running).await;
    let sleeping = new_run(h).await;
    step_in(h, sleeping.id, "nap", StepStatus::Scheduled).await;
    let moved = new_run(h).await;
    let moving = new_step(h, moved.id, "moving", 0).await;
    let mut others = Vec::new();
    for status in [
        RunStatus::Suspended,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        others.push(run_in(h, status).await.id);
    }
    assert_eq!(stalled(h).await, [], "nothing is quiet yet");
    h.clock().advance(PAST_IDLE);
    h.store()
        .transition_step(moving.id, StepTransition::Running)
        .await
        .unwrap();
    h.store()
        .transition_step(moving.id, StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    let found = h.store().stalled_runs(IDLE, 0).await.unwrap();
    let ids: Vec<_> = found.iter().map(|s| s.run).collect();
    assert_eq!(ids, [bare.id, with_steps.id], "others: {others:?}");
    assert_eq!(found[0].last_activity, bare.updated_at);
}

/// A run under a live lease is being worked on, and a waiting run waits:
/// neither is stalled. Once the lease runs out, the run is.
pub async fn leased_and_waiting_runs_are_not_stalled<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore + RunWaitStore,
{
    // Longer than the rows are aged by, on a store whose lease clock is
    // its row clock.
    let hour = Duration::from_secs(3600);
    let leased = new_run(h).await;
    let lease = h.store().claim_run("w1", hour).await.unwrap().unwrap();
    assert_eq!(lease.run.id, leased.id);
    let waiting = new_run(h).await;
    let wait = h.store().claim_run("w2", hour).await.unwrap().unwrap();
    assert_eq!(wait.run.id, waiting.id);
    h.store()
        .wait(waiting.id, wait.token, Wait::signal("approval"))
        .await
        .unwrap();
    h.clock().advance(PAST_IDLE);
    assert_eq!(
        stalled(h).await,
        [],
        "a leased or waiting run read as stalled"
    );
    h.advance_lease_clock(hour + PAST_IDLE).await;
    assert_eq!(
        stalled(h).await,
        [leased.id],
        "an expired lease still shields its run"
    );
}

/// A table of settled runs holds nothing to recover.
pub async fn settled_runs_hold_nothing_to_recover<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        for _ in 0..3 {
            let run = new_run(h).await;
            new_step(h, run.id, "left", 0).await;
            h.store().set_run_status(run.id, status).await.unwrap();
        }
    }
    h.clock().advance(PAST_IDLE);
    assert_eq!(relayed_runs(h).await, []);
    assert_eq!(stalled(h).await, []);
}
