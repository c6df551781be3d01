//! [`RunWaitStore`]: sleeping runs are left alone until their time, a
//! signal wakes a waiting run (even one sent before it waits), a deadline
//! wakes it without one, and `wake_expired` clears waits past their time.

use std::time::Duration;

use flowstate_core::ports::{RunLeaseStore, RunWaitStore};
use flowstate_core::{Error, RunId, RunOutcome, Wait};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, claim};
use crate::cases::support::{assert_err, new_run};

/// Ten minutes: how long the cases sleep and wait.
const NAP: Duration = Duration::from_secs(10 * 60);

/// Whether some worker can claim a run now.
async fn claimable<H: LeaseHarness>(h: &H) -> bool {
    let lease = h.store().claim_run("probe", LEASE).await.unwrap();
    if let Some(lease) = &lease {
        h.store()
            .release(lease.run.id, lease.token, flowstate_core::Release::Yield)
            .await
            .unwrap();
    }
    lease.is_some()
}

/// A sleeping run is not claimed before its time, then is, with its wait
/// cleared; the sleep freed the lease.
pub async fn sleeping_run_is_left_alone_until_its_time<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.store()
        .wait(run.id, lease.token, Wait::For(NAP))
        .await
        .unwrap();
    let state = h.store().lease_state(run.id).await.unwrap();
    assert_eq!((state.worker, state.waiting_on), (None, None));
    assert!(state.wake_at.is_some());
    assert!(!claimable(h).await, "a sleeping run was claimed");
    h.advance_lease_clock(Duration::from_secs(9 * 60)).await;
    assert!(!claimable(h).await, "a run was claimed before it woke");
    h.advance_lease_clock(Duration::from_secs(120)).await;
    let woke = claim(h, "w2").await;
    assert_eq!((woke.run.id, woke.token), (run.id, lease.token + 1));
    let state = h.store().lease_state(run.id).await.unwrap();
    assert_eq!((state.wake_at, state.waiting_on), (None, None));
}

/// A run waiting on a signal with no deadline waits for ever; the signal
/// wakes it, and its holder takes the payload once.
pub async fn signal_wakes_a_waiting_run<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.store()
        .wait(run.id, lease.token, Wait::signal("approved"))
        .await
        .unwrap();
    h.advance_lease_clock(Duration::from_secs(30 * 24 * 60 * 60))
        .await;
    assert!(!claimable(h).await, "a run waiting on a signal was claimed");
    h.store().signal(run.id, "other", &json!(1)).await.unwrap();
    assert!(!claimable(h).await, "another signal woke the run");
    h.store()
        .signal(run.id, "approved", &json!({"by": "ann"}))
        .await
        .unwrap();
    let woke = claim(h, "w2").await;
    assert_eq!(woke.run.id, run.id);
    let taken = h.store().take_signal(run.id, woke.token, "approved").await;
    assert_eq!(taken.unwrap(), Some(json!({"by": "ann"})));
    assert_eq!(
        h.store()
            .take_signal(run.id, woke.token, "approved")
            .await
            .unwrap(),
        None
    );
    assert_err!(
        h.store().take_signal(run.id, lease.token, "other").await,
        Error::LeaseLost { .. }
    );
}

/// A signal sent before the run waits is kept: the wait finds it and the
/// run is claimable at once.
pub async fn signal_before_wait_is_not_lost<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let run = new_run(h).await;
    h.store()
        .signal(run.id, "paid", &json!([1, 2]))
        .await
        .unwrap();
    let lease = claim(h, "w1").await;
    h.store()
        .wait(run.id, lease.token, Wait::signal("paid"))
        .await
        .unwrap();
    let woke = claim(h, "w2").await;
    assert_eq!(woke.run.id, run.id);
    let taken = h.store().take_signal(run.id, woke.token, "paid").await;
    assert_eq!(taken.unwrap(), Some(json!([1, 2])));
}

/// A wait with a deadline ends at the deadline without its signal.
pub async fn wait_deadline_wakes_the_run<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    let wait = Wait::Signal {
        name: "approved".into(),
        timeout: Some(NAP),
    };
    h.store().wait(run.id, lease.token, wait).await.unwrap();
    assert!(!claimable(h).await);
    h.advance_lease_clock(NAP + Duration::from_secs(60)).await;
    let woke = claim(h, "w2").await;
    assert_eq!(woke.run.id, run.id);
    let taken = h.store().take_signal(run.id, woke.token, "approved").await;
    assert_eq!(taken.unwrap(), None);
}

/// `wake_expired` clears exactly the waits whose time has come.
pub async fn wake_expired_clears_waits_past_their_time<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let short = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.store()
        .wait(short.id, lease.token, Wait::For(NAP))
        .await
        .unwrap();
    let long = new_run(h).await;
    let lease = claim(h, "w1").await;
    assert_eq!(lease.run.id, long.id);
    h.store()
        .wait(long.id, lease.token, Wait::For(NAP * 3))
        .await
        .unwrap();
    assert_eq!(h.store().wake_expired().await.unwrap(), 0);
    h.advance_lease_clock(NAP * 2).await;
    assert_eq!(h.store().wake_expired().await.unwrap(), 1);
    assert_eq!(h.store().wake_expired().await.unwrap(), 0);
    assert_eq!(h.store().lease_state(short.id).await.unwrap().wake_at, None);
    assert!(
        h.store()
            .lease_state(long.id)
            .await
            .unwrap()
            .wake_at
            .is_some()
    );
}

/// A batch claim beside sleeping runs takes the ones whose time has come
/// and the free runs, oldest first, with a run woken by its signal among
/// them, and leaves a run still asleep alone until its time (on the
/// databases a sleeping run is in no range a claim reads before then).
pub async fn claim_runs_takes_woken_and_free_runs_past_sleeping_ones<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let mut runs = Vec::new();
    for _ in 0..6 {
        runs.push(new_run(h).await.id);
        h.clock().advance(Duration::from_millis(1));
    }
    let held = h.store().claim_runs("w1", 3, LEASE).await.unwrap();
    let held: Vec<RunId> = held.iter().map(|l| l.run.id).collect();
    assert_eq!(held, runs[..3]);
    // runs[0] sleeps ten minutes, runs[1] thirty, runs[2] waits on a
    // signal for thirty.
    let waits = [
        Wait::For(NAP),
        Wait::For(NAP * 3),
        Wait::Signal {
            name: "go".into(),
            timeout: Some(NAP * 3),
        },
    ];
    for (run, wait) in runs[..3].iter().zip(waits) {
        h.store().wait(*run, 1, wait).await.unwrap();
    }
    h.advance_lease_clock(NAP + Duration::from_secs(60)).await;
    h.store().signal(runs[2], "go", &json!(true)).await.unwrap();

    let batch = h.store().claim_runs("w2", 3, LEASE).await.unwrap();
    let ids: Vec<RunId> = batch.iter().map(|l| l.run.id).collect();
    assert_eq!(
        ids,
        [runs[0], runs[2], runs[3]],
        "oldest first, none asleep"
    );
    let tokens: Vec<u64> = batch.iter().map(|l| l.token).collect();
    assert_eq!(tokens, [2, 2, 1]);
    let rest = h.store().claim_runs("w2", 5, LEASE).await.unwrap();
    let ids: Vec<RunId> = rest.iter().map(|l| l.run.id).collect();
    assert_eq!(ids, runs[4..], "the sleeper is not due");
    let state = h.store().lease_state(runs[1]).await.unwrap();
    assert_eq!((state.worker, state.token), (None, 1));
    assert!(state.wake_at.is_some(), "still asleep");
    for lease in batch.iter().chain(&rest) {
        h.store()
            .finish(lease.run.id, lease.token, RunOutcome::Completed)
            .await
            .unwrap();
    }

    h.advance_lease_clock(NAP * 2).await;
    let woke = h.store().claim_runs("w3", 5, LEASE).await.unwrap();
    let ids: Vec<(RunId, u64)> = woke.iter().map(|l| (l.run.id, l.token)).collect();
    assert_eq!(ids, [(runs[1], 2)], "woken at its time, and only it");
}

/// A wait under a stale token is [`Error::LeaseLost`]; a signal to a run
/// that does not exist is [`Error::RunNotFound`]; bad names are refused.
pub async fn wait_and_signal_refusals<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    assert_err!(
        h.store()
            .wait(run.id, lease.token + 1, Wait::For(NAP))
            .await,
        Error::LeaseLost { .. }
    );
    assert_eq!(h.store().lease_state(run.id).await.unwrap().wake_at, None);
    let missing = RunId::generate();
    assert_err!(
        h.store().signal(missing, "s", &json!(1)).await,
        Error::RunNotFound(r) if r == missing
    );
    assert_err!(
        h.store().signal(run.id, "", &json!(1)).await,
        Error::InvalidInput(_)
    );
    assert_err!(
        h.store().wait(run.id, lease.token, Wait::signal("")).await,
        Error::InvalidInput(_)
    );
}
