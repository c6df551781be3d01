//! The recovery ports ([`RecoveryStore`], [`RunRecoveryStore`]) checked
//! directly on each dialect: what the relay and the stalled sweep find,
//! leasing one named run, reaping expired leases, and the races of both,
//! each against core's rules.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{
    RecoveryStore, RunLeaseStore, RunRecoveryStore, RunStore, RunWaitStore, StepStore,
};
use flowstate_core::recovery::{is_stalled, is_undispatched};
use flowstate_core::{
    Clock, Error, NewRun, NewStep, Release, RetryPolicy, RunId, RunStatus, StepStatus,
    StepTransition, Timestamp, Wait,
};
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::ManualClock;
use serde_json::json;

use super::db::TestDb;

const MINUTE: Duration = Duration::from_secs(60);

/// A store on a fresh database with a hand-moved row clock and lease clock.
struct Setup {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    offset: LeaseClockOffset,
    db: TestDb,
}

impl Setup {
    async fn new(dialect: Dialect) -> Self {
        let db = TestDb::migrated(dialect).await;
        let clock = Arc::new(ManualClock::new());
        let offset = LeaseClockOffset::following(clock.clone());
        let config = StoreConfig::default()
            .pool_size(10)
            .clock(clock.clone())
            .lease_clock_offset(offset.clone());
        let store = Arc::new(db.warm_store(config, 10).await);
        Self {
            store,
            clock,
            offset,
            db,
        }
    }

    async fn run(&self) -> RunId {
        self.store
            .create_run(NewRun::new("wf", json!({})))
            .await
            .expect("create_run")
            .record
            .id
    }

    async fn step(&self, run: RunId, name: &str, retry: RetryPolicy) -> flowstate_core::Step {
        self.store
            .insert_step(NewStep::new(run, name, "f", json!({})).with_retry(retry))
            .await
            .expect("insert_step")
            .record
    }

    async fn failed(&self, run: RunId, name: &str, retry: RetryPolicy) {
        let step = self.step(run, name, retry).await;
        self.store
            .claim_step(run, name, "f")
            .await
            .expect("claim")
            .expect("claimed");
        self.store
            .transition_step(step.id, StepTransition::Failed(json!("boom")))
            .await
            .expect("fail");
    }

    async fn done(self) {
        drop(self.store);
        self.db.drop_database().await;
    }
}

/// The relay answers the pending steps and the failed ones with a retry
/// due, idle for `idle_for`, of unsettled runs, oldest first; nothing else.
pub async fn the_relay_finds_idle_claimable_steps(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    let store = &s.store;
    let run = s.run().await;
    let old = s.step(run, "old", RetryPolicy::NONE).await;
    s.failed(run, "retrying", RetryPolicy::with_retries(1))
        .await;
    s.failed(run, "spent", RetryPolicy::NONE).await;
    let delayed = RetryPolicy {
        retries: 1,
        retry_delay: Some(Duration::from_secs(3600)),
    };
    s.failed(run, "delayed", delayed).await;
    s.step(run, "running", RetryPolicy::NONE).await;
    store.claim_step(run, "running", "f").await.unwrap();
    let scheduled = s.step(run, "scheduled", RetryPolicy::NONE).await;
    store
        .transition_step(scheduled.id, StepTransition::Scheduled)
        .await
        .unwrap();
    let settled = s.run().await;
    s.step(settled, "orphan", RetryPolicy::NONE).await;
    store
        .set_run_status(settled, RunStatus::Completed)
        .await
        .unwrap();
    let suspended = s.run().await;
    s.step(suspended, "paused", RetryPolicy::NONE).await;
    store
        .set_run_status(suspended, RunStatus::Suspended)
        .await
        .unwrap();
    s.clock.advance(MINUTE);
    s.step(run, "fresh", RetryPolicy::NONE).await;
    s.clock.advance(Duration::from_secs(1));

    let found = store.undispatched_steps(MINUTE, 0).await.unwrap();
    // Core's rule over every step, in the port's order.
    let now = s.clock_now();
    let cutoff = flowstate_core::recovery::idle_cutoff(now, MINUTE);
    let mut expected = Vec::new();
    for (id, status) in [
        (run, RunStatus::Running),
        (settled, RunStatus::Completed),
        (suspended, RunStatus::Suspended),
    ] {
        for step in store.list_steps(id).await.unwrap() {
            if is_undispatched(&step, status, cutoff, now) {
                expected.push(step);
            }
        }
    }
    expected.sort_by_key(|step| (step.created_at, step.id));
    let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
    let expected_names: Vec<&str> = expected.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, expected_names);
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["old", "paused", "retrying"], "{dialect}");
    let first = &found[0];
    assert_eq!(
        (first.run, first.step, first.status),
        (expected[0].run, expected[0].id, expected[0].status)
    );
    let old_row = found.iter().find(|f| f.step == old.id).unwrap();
    assert_eq!(old_row.status, StepStatus::Pending);
    assert_eq!(old_row.updated_at, old.updated_at);
    let retrying = found.iter().find(|f| f.name == "retrying").unwrap();
    assert_eq!(retrying.status, StepStatus::Failed);

    assert_eq!(store.undispatched_steps(MINUTE, 1).await.unwrap().len(), 1);
    // Nothing is idle for an hour; everything but `fresh`'s second is idle
    // for none.
    assert!(
        store
            .undispatched_steps(Duration::from_secs(3600), 0)
            .await
            .unwrap()
            .is_empty()
    );
    let all = store.undispatched_steps(Duration::ZERO, 0).await.unwrap();
    assert_eq!(all.len(), 4, "{all:?}");
    s.done().await;
}

impl Setup {
    fn clock_now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// The stalled sweep answers running runs with nothing moving, no live
/// lease and no wait, least recently moved first, with their last activity.
pub async fn the_stalled_sweep_finds_quiet_free_running_runs(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    let store = &s.store;
    let bare = s.run().await;
    let done_steps = s.run().await;
    let done = s.step(done_steps, "a", RetryPolicy::NONE).await;
    store.claim_step(done_steps, "a", "f").await.unwrap();
    let busy = s.run().await;
    s.step(busy, "a", RetryPolicy::NONE).await;
    store.claim_step(busy, "a", "f").await.unwrap();
    let suspended = s.run().await;
    store
        .set_run_status(suspended, RunStatus::Suspended)
        .await
        .unwrap();
    let leased = s.run().await;
    store
        .lease_run(leased, "w", Duration::from_secs(600))
        .await
        .unwrap()
        .expect("leased");
    let waiting = s.run().await;
    let held = store
        .lease_run(waiting, "w", MINUTE)
        .await
        .unwrap()
        .unwrap();
    store
        .wait(
            waiting,
            held.token,
            Wait::Signal {
                name: "go".into(),
                timeout: None,
            },
        )
        .await
        .unwrap();
    let sleeping = s.run().await;
    let held = store
        .lease_run(sleeping, "w", MINUTE)
        .await
        .unwrap()
        .unwrap();
    store
        .wait(sleeping, held.token, Wait::For(Duration::from_secs(600)))
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(30));
    store
        .transition_step(done.id, StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(40));
    let recent = s.run().await;

    let found = store.stalled_runs(MINUTE, 0).await.unwrap();
    let ids: Vec<RunId> = found.iter().map(|f| f.run).collect();
    assert_eq!(ids, [bare], "{dialect}: {found:?}");
    let bare_run = store.get_run(bare).await.unwrap();
    assert_eq!(found[0].last_activity, bare_run.updated_at);
    let found = store
        .stalled_runs(Duration::from_secs(20), 0)
        .await
        .unwrap();
    let ids: Vec<RunId> = found.iter().map(|f| f.run).collect();
    let mut expected = [
        store.get_run(bare).await.unwrap(),
        store.get_run(done_steps).await.unwrap(),
    ];
    expected.sort_by_key(|run| (run.updated_at, run.id));
    let expected: Vec<RunId> = expected.iter().map(|run| run.id).collect();
    assert_eq!(ids, expected, "{dialect}: {found:?}");
    let done_now = store.get_step(done.id).await.unwrap();
    let of_done = found.iter().find(|f| f.run == done_steps).unwrap();
    assert_eq!(of_done.last_activity, done_now.updated_at);
    assert!(!ids.contains(&recent));

    // Ten minutes on (one clock: idleness, leases and sleeps alike): the
    // lease runs out and the sleep ends, so both are stalled again, and so
    // is every quiet run; the run waiting on a signal is not, nor the one
    // whose step a worker holds.
    s.clock.advance(Duration::from_secs(601));
    let found = store.stalled_runs(MINUTE, 0).await.unwrap();
    let ids: HashSet<RunId> = found.iter().map(|f| f.run).collect();
    assert_eq!(
        ids,
        HashSet::from([bare, done_steps, leased, sleeping, recent]),
        "{dialect}: {found:?}"
    );
    // Core's rule agrees on every run.
    for run in [
        bare, done_steps, busy, suspended, leased, waiting, sleeping, recent,
    ] {
        let record = store.get_run(run).await.unwrap();
        let steps = store.list_steps(run).await.unwrap();
        let state = store.lease_state(run).await.unwrap();
        // The database's clock is this machine's (to well within the
        // lease lengths here), plus the offset.
        let lease_now = Timestamp::from_micros(
            flowstate_core::SystemClock.now().as_micros() + s.offset.micros(),
        );
        let cutoff = flowstate_core::recovery::idle_cutoff(lease_now, MINUTE);
        assert_eq!(
            is_stalled(&record, &steps, Some(&state), cutoff, lease_now),
            ids.contains(&run),
            "{dialect}: {run} ({state:?})"
        );
    }
    assert_eq!(store.stalled_runs(MINUTE, 1).await.unwrap().len(), 1);
    s.done().await;
}

/// `lease_run` leases only a runnable run, raises its token, settles a
/// cancelled one instead, and tells a missing run and bad input apart.
pub async fn lease_run_leases_one_runnable_run(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    let store = &s.store;
    assert!(matches!(
        store.lease_run(RunId::generate(), "w", MINUTE).await,
        Err(Error::RunNotFound(_))
    ));
    let run = s.run().await;
    assert!(matches!(
        store.lease_run(run, "", MINUTE).await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        store.lease_run(run, "w", Duration::ZERO).await,
        Err(Error::InvalidInput(_))
    ));
    let lease = store.lease_run(run, "w1", MINUTE).await.unwrap().unwrap();
    assert_eq!(
        (lease.run.id, lease.token, lease.worker.as_str()),
        (run, 1, "w1")
    );
    assert_eq!(lease.run.status, RunStatus::Running);
    assert!(store.lease_run(run, "w2", MINUTE).await.unwrap().is_none());
    let state = store.lease_state(run).await.unwrap();
    assert_eq!(state.worker.as_deref(), Some("w1"));
    assert_eq!(state.expires_at, Some(lease.expires_at));
    // The lease runs out on the database's clock: the next call takes it.
    s.offset.advance(MINUTE);
    let again = store.lease_run(run, "w2", MINUTE).await.unwrap().unwrap();
    assert_eq!((again.token, again.worker.as_str()), (2, "w2"));
    store
        .release(run, again.token, Release::failure("x"))
        .await
        .unwrap();
    let third = store.lease_run(run, "w3", MINUTE).await.unwrap().unwrap();
    assert_eq!((third.token, third.failures), (3, 1));
    // A run waiting on a signal is not runnable until the signal is there.
    store
        .wait(
            run,
            third.token,
            Wait::Signal {
                name: "go".into(),
                timeout: None,
            },
        )
        .await
        .unwrap();
    assert!(store.lease_run(run, "w", MINUTE).await.unwrap().is_none());
    store.signal(run, "go", &json!(1)).await.unwrap();
    let woken = store.lease_run(run, "w", MINUTE).await.unwrap().unwrap();
    assert_eq!(woken.token, 4);
    let state = store.lease_state(run).await.unwrap();
    assert_eq!((state.waiting_on, state.wake_at), (None, None));
    // A cancel requested: the run is settled as cancelled, not leased.
    store.request_cancel(run).await.unwrap();
    assert!(store.lease_run(run, "w", MINUTE).await.unwrap().is_none());
    s.offset.advance(MINUTE);
    s.clock.advance(MINUTE);
    assert!(store.lease_run(run, "w", MINUTE).await.unwrap().is_none());
    let settled = store.get_run(run).await.unwrap();
    assert_eq!(settled.status, RunStatus::Cancelled);
    assert_eq!(settled.updated_at, s.clock_now());
    let state = store.lease_state(run).await.unwrap();
    assert_eq!(
        (state.token, state.worker, state.cancel_requested),
        (5, None, false)
    );
    assert!(store.lease_run(run, "w", MINUTE).await.unwrap().is_none());
    s.done().await;
}

/// Of many concurrent `lease_run`s of one run, one wins.
pub async fn concurrent_lease_runs_lease_once(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    for _ in 0..3 {
        let run = s.run().await;
        let calls = (0..8).map(|i| {
            let store = s.store.clone();
            tokio::spawn(async move { store.lease_run(run, &format!("w{i}"), MINUTE).await })
        });
        let mut won = 0;
        for call in futures_util::future::join_all(calls).await {
            if call.unwrap().unwrap().is_some() {
                won += 1;
            }
        }
        assert_eq!(won, 1, "{dialect}");
        assert_eq!(s.store.lease_state(run).await.unwrap().token, 1);
    }
    s.done().await;
}

/// The reaper frees the leases that ran out, first expired first, keeps
/// token and failures, leaves live leases alone, and answers each once.
pub async fn the_reaper_frees_expired_leases_first_expired_first(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    let store = &s.store;
    let (late, early, live) = (s.run().await, s.run().await, s.run().await);
    store
        .lease_run(late, "w", Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    let first = store
        .lease_run(early, "w", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    store
        .release(early, first.token, Release::failure("x"))
        .await
        .unwrap();
    store
        .lease_run(early, "w", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    store
        .lease_run(live, "w", Duration::from_secs(3600))
        .await
        .unwrap()
        .unwrap();
    assert!(store.reap_expired_leases(0).await.unwrap().is_empty());
    s.offset.advance(Duration::from_secs(30));
    assert_eq!(store.reap_expired_leases(1).await.unwrap(), [early]);
    assert_eq!(store.reap_expired_leases(0).await.unwrap(), [late]);
    assert!(store.reap_expired_leases(0).await.unwrap().is_empty());
    let state = store.lease_state(early).await.unwrap();
    assert_eq!(
        (state.worker, state.expires_at, state.token, state.failures),
        (None, None, 2, 1)
    );
    assert_eq!(
        store.lease_state(live).await.unwrap().worker.as_deref(),
        Some("w")
    );
    // A reaped run is claimed like any free one.
    let next = store.lease_run(early, "w2", MINUTE).await.unwrap().unwrap();
    assert_eq!(next.token, 3);
    // A run settled under its lease (not by its holder) keeps the lease
    // until it runs out; then it is freed like any other.
    store
        .set_run_status(live, RunStatus::Completed)
        .await
        .unwrap();
    s.offset.advance(Duration::from_secs(7200));
    assert_eq!(store.reap_expired_leases(0).await.unwrap(), [early, live]);
    assert_eq!(store.lease_state(live).await.unwrap().worker, None);
    s.done().await;
}

/// Concurrent reapers answer disjoint runs that together are every
/// expired lease.
pub async fn concurrent_reapers_answer_each_run_once(dialect: Dialect) {
    let s = Setup::new(dialect).await;
    let mut leased = HashSet::new();
    for _ in 0..12 {
        let run = s.run().await;
        s.store
            .lease_run(run, "w", Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        leased.insert(run);
    }
    s.offset.advance(MINUTE);
    let calls = (0..6).map(|_| {
        let store = s.store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store.reap_expired_leases(2).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got);
            }
        })
    });
    let mut seen = Vec::new();
    for call in futures_util::future::join_all(calls).await {
        seen.extend(call.unwrap());
    }
    let unique: HashSet<RunId> = seen.iter().copied().collect();
    assert_eq!(seen.len(), unique.len(), "{dialect}: a run reaped twice");
    assert_eq!(unique, leased, "{dialect}");
    s.done().await;
}
