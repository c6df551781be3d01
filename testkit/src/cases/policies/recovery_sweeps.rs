//! `flowstate-recovery`'s relay and stalled sweep over the store: one
//! dispatch per run per backoff window whichever sweep finds it, a failing
//! dispatch backed off like a good one, settled runs never re-driven; and
//! the [`Sweeper`] pass that wakes, reaps, relays and sweeps in one go.
//!
//! The translated cases of the seed engine's stalled-recovery tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::ports::{
    RecoveryStore, RunLeaseStore, RunRecoveryStore, RunStore, RunWaitStore, StepStore,
};
use flowstate_core::{
    Clock, RedispatchBackoff, RunId, RunStatus, StepStatus, StepTransition, SystemClock, Wait,
};
use flowstate_recovery::{
    Reason, RedriveReport, SweepOptions, Sweeper, relay_undispatched, sweep_stalled,
};

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, PAST_LEASE};
use crate::cases::recovery::queries::{IDLE, PAST_IDLE};
use crate::cases::support::{new_run, new_step, step_in};

/// What the cases sweep with: [`IDLE`] for both thresholds.
const OPTIONS: SweepOptions = SweepOptions {
    relay_after: IDLE,
    stalled_after: IDLE,
    limit: 0,
};

/// The backoff of the sweepers the cases spawn, which read the system
/// clock: longer than any case runs.
const HOUR: Duration = Duration::from_secs(3600);

/// Every dispatch the engine was asked for, in order.
type Sent = Arc<Mutex<Vec<(RunId, Reason)>>>;

/// A dispatch callback that records what it is asked and answers `fails`.
fn recorder(
    fails: bool,
) -> (
    Sent,
    impl FnMut(RunId, Reason) -> std::future::Ready<Result<(), String>> + Send + 'static,
) {
    let sent: Sent = Arc::default();
    let log = Arc::clone(&sent);
    let dispatch = move |run, reason| {
        log.lock().unwrap().push((run, reason));
        std::future::ready(if fails {
            Err("queue unavailable".to_owned())
        } else {
            Ok(())
        })
    };
    (sent, dispatch)
}

fn sent(sent: &Sent) -> Vec<(RunId, Reason)> {
    sent.lock().unwrap().clone()
}

/// A run that reads both as undispatched (an idle pending step) and as
/// stalled (running, nothing moving): the seed's "Wait 15s" run, backdated.
async fn wedged_run<H: LeaseHarness>(h: &H) -> RunId {
    let run = new_run(h).await;
    new_step(h, run.id, "Wait 15s", 0).await;
    run.id
}

/// The relay re-drives a run once however many of its steps are idle, and
/// the stalled sweep run right after adds nothing.
pub async fn relay_then_sweep_dispatches_once<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = wedged_run(h).await;
    new_step(h, run, "second", 0).await;
    h.clock().advance(PAST_IDLE);
    let (log, mut dispatch) = recorder(false);
    let mut backoff = RedispatchBackoff::default();
    let now = h.clock().now();
    let relayed = relay_undispatched(&**h.store(), &mut backoff, &mut dispatch, now, OPTIONS)
        .await
        .unwrap();
    let swept = sweep_stalled(&**h.store(), &mut backoff, &mut dispatch, now, OPTIONS)
        .await
        .unwrap();
    assert_eq!(relayed.redispatched, [run], "the relay re-drives it");
    assert_eq!(
        swept.redispatched,
        [],
        "the sweep adds what the relay queued"
    );
    assert_eq!(swept.held_off, [run]);
    assert_eq!(
        sent(&log),
        [(run, Reason::Undispatched)],
        "one queue message"
    );
}

/// Two sweeps in a row send one message: a resume does not clear what
/// wedged the run, and the backoff holds the second off. After the window
/// the run is re-driven again.
pub async fn two_sweeps_dispatch_once<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = wedged_run(h).await;
    h.clock().advance(PAST_IDLE);
    let (log, mut dispatch) = recorder(false);
    let mut backoff = RedispatchBackoff::default();
    let store = &**h.store();
    let first = sweep_stalled(store, &mut backoff, &mut dispatch, h.clock().now(), OPTIONS);
    assert_eq!(
        first.await.unwrap().redispatched,
        [run],
        "the first sweep resumes it"
    );
    h.clock().advance(Duration::from_secs(1));
    let second = sweep_stalled(store, &mut backoff, &mut dispatch, h.clock().now(), OPTIONS);
    assert_eq!(
        second.await.unwrap().held_off,
        [run],
        "the next sweep is held off"
    );
    assert_eq!(
        sent(&log),
        [(run, Reason::Stalled)],
        "only one queue message"
    );
    h.clock().advance(RedispatchBackoff::DEFAULT_BASE);
    let later = sweep_stalled(store, &mut backoff, &mut dispatch, h.clock().now(), OPTIONS);
    assert_eq!(
        later.await.unwrap().redispatched,
        [run],
        "the window passed"
    );
}

/// A dispatch that fails is reported and still backs the run off: the run
/// whose dispatch throws is the one most likely to be found again.
pub async fn a_failing_dispatch_still_backs_off<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = wedged_run(h).await;
    h.clock().advance(PAST_IDLE);
    let (log, mut dispatch) = recorder(true);
    let mut backoff = RedispatchBackoff::default();
    let store = &**h.store();
    let now = h.clock().now();
    let relayed = relay_undispatched(store, &mut backoff, &mut dispatch, now, OPTIONS)
        .await
        .unwrap();
    assert_eq!(relayed.failed, [(run, "queue unavailable".to_owned())]);
    assert_eq!(relayed.redispatched, []);
    for _ in 0..3 {
        let relay = relay_undispatched(store, &mut backoff, &mut dispatch, now, OPTIONS);
        assert_eq!(relay.await.unwrap().held_off, [run]);
        let sweep = sweep_stalled(store, &mut backoff, &mut dispatch, now, OPTIONS);
        assert_eq!(sweep.await.unwrap().held_off, [run]);
    }
    assert_eq!(
        sent(&log).len(),
        1,
        "a failing run was re-driven every tick"
    );
}

/// A run that just moved is not swept, and a finished one is left alone:
/// over settled runs, the sweeps send nothing.
pub async fn moving_and_settled_runs_are_not_redriven<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let moving = wedged_run(h).await;
    let mut settled = Vec::new();
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let run = wedged_run(h).await;
        h.store().set_run_status(run, status).await.unwrap();
        settled.push(run);
    }
    h.clock().advance(PAST_IDLE);
    let step = step_in(h, moving, "just now", StepStatus::Running).await;
    let (log, mut dispatch) = recorder(false);
    let mut backoff = RedispatchBackoff::default();
    let store = &**h.store();
    let now = h.clock().now();
    let swept = sweep_stalled(store, &mut backoff, &mut dispatch, now, OPTIONS).await;
    assert_eq!(
        swept.unwrap(),
        RedriveReport::default(),
        "a run that just moved was swept"
    );
    h.store()
        .transition_step(step.id, StepTransition::Succeeded(serde_json::json!(1)))
        .await
        .unwrap();
    h.store()
        .set_run_status(moving, RunStatus::Completed)
        .await
        .unwrap();
    h.clock().advance(PAST_IDLE);
    let now = h.clock().now();
    let relayed = relay_undispatched(store, &mut backoff, &mut dispatch, now, OPTIONS).await;
    let swept = sweep_stalled(store, &mut backoff, &mut dispatch, now, OPTIONS).await;
    assert_eq!(relayed.unwrap(), RedriveReport::default());
    assert_eq!(swept.unwrap(), RedriveReport::default());
    assert_eq!(sent(&log), [], "settled runs {settled:?} were re-driven");
}

/// One [`Sweeper::pass`]: a sleeping run whose time came is woken and
/// claimable in the same pass, an expired lease is reaped and its run
/// claimed elsewhere, and the relay and the sweep share one backoff.
pub async fn a_pass_wakes_reaps_relays_and_sweeps<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore + RunRecoveryStore + RunWaitStore + 'static,
{
    let store = Arc::clone(h.store());
    let sleeper = new_run(h).await;
    let nap = store.claim_run("w1", LEASE).await.unwrap().unwrap();
    store
        .wait(sleeper.id, nap.token, Wait::For(IDLE))
        .await
        .unwrap();
    h.clock().advance(Duration::from_millis(1));
    let dead = new_run(h).await;
    let lost = store.claim_run("dies", LEASE).await.unwrap().unwrap();
    assert_eq!(lost.run.id, dead.id);
    h.clock().advance(Duration::from_millis(1));
    let wedged = wedged_run(h).await;
    h.advance_lease_clock(PAST_LEASE).await;
    h.clock().advance(PAST_IDLE);
    let (log, dispatch) = recorder(false);
    let mut sweeper = Sweeper::new(Arc::clone(&store), dispatch, Arc::new(SystemClock))
        .with_options(OPTIONS)
        .with_backoff(RedispatchBackoff::new(HOUR));
    let pass = sweeper.pass().await.unwrap();
    assert_eq!(pass.woken, 1, "the sleeper's wait was not ended");
    assert_eq!(pass.reaped, [dead.id]);
    assert_eq!(pass.relay.redispatched, [wedged]);
    assert_eq!(pass.stalled.redispatched, [sleeper.id, dead.id]);
    assert_eq!(pass.stalled.held_off, [wedged]);
    assert_eq!(sent(&log).len(), 3);
    let state = store.lease_state(sleeper.id).await.unwrap();
    assert_eq!((state.wake_at, state.waiting_on), (None, None));
    let again = sweeper.pass().await.unwrap();
    assert_eq!(
        (again.woken, again.reaped.len(), sent(&log).len()),
        (0, 0, 3)
    );
    let mut claimed = vec![
        store.claim_run("w2", LEASE).await.unwrap().unwrap().run.id,
        store.claim_run("w2", LEASE).await.unwrap().unwrap().run.id,
    ];
    claimed.sort();
    let mut expected = vec![sleeper.id, dead.id];
    expected.sort();
    assert_eq!(
        claimed, expected,
        "the woken and the reaped run are claimable"
    );
}

/// A spawned sweeper passes until shut down, and its report sums the
/// passes: the one wedged run is relayed once however many passes ran.
pub async fn a_spawned_sweeper_stops_on_shutdown<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore + RunRecoveryStore + RunWaitStore + 'static,
{
    let wedged = wedged_run(h).await;
    h.clock().advance(PAST_IDLE);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let dispatch = move |run: RunId, reason: Reason| {
        let sent = tx.send((run, reason)).is_ok();
        std::future::ready(if sent { Ok(()) } else { Err("closed") })
    };
    let handle = Sweeper::new(Arc::clone(h.store()), dispatch, Arc::new(SystemClock))
        .with_options(OPTIONS)
        .with_backoff(RedispatchBackoff::new(HOUR))
        .with_interval(Duration::from_millis(5))
        .spawn();
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
    assert_eq!(
        first.expect("no dispatch in 30 s"),
        Some((wedged, Reason::Undispatched))
    );
    // Let a few more passes run: the backoff holds the run off in each.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let report = handle.shutdown().await;
    assert!(report.passes >= 1);
    assert_eq!(
        (report.relayed, report.resumed, report.failed_passes),
        (1, 0, 0)
    );
    assert_eq!(report.held_off, 2 * (report.passes - 1) + 1);
    assert!(rx.try_recv().is_err(), "a run was dispatched twice");
}
