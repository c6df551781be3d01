//! The scenario both backends run under a `DebuggingRecorder`, and the
//! exact counts it must leave: claims won, lost and refused, transitions,
//! a retry, fencing refusals of both fences, leases taken, renewed, lost
//! and reaped, an event emitted and one deduplicated, a batch of events
//! (two recorded, one repeated within it) and one refused whole, a batch claim and its flush, a
//! relay's find and re-drive, the settled runs and the events pruned.

use std::future::Future;
use std::time::Duration;

use flowstate_core::backoff::RedispatchBackoff;
use flowstate_core::ports::{
    BatchStepStore, EventStore, FencedWrites, RecoveryStore, RetentionStore, RunLeaseStore,
    RunRecoveryStore, RunStore, StepStore, Store,
};
use flowstate_core::{
    BatchClaim, Clock, Completion, Dispatch, NewEvent, NewRun, NewStep, PruneKind, RetryPolicy,
    RunId, RunOutcome, StepClaim, StepTransition, SystemClock,
};
use flowstate_metrics::{Metered, names};
use flowstate_recovery::{Reason, SweepOptions, relay_undispatched};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;

/// Every port the scenario calls.
pub trait Full:
    Store
    + BatchStepStore
    + FencedWrites
    + RecoveryStore
    + RunRecoveryStore
    + EventStore
    + RetentionStore
{
}

impl<T> Full for T where
    T: Store
        + BatchStepStore
        + FencedWrites
        + RecoveryStore
        + RunRecoveryStore
        + EventStore
        + RetentionStore
{
}

/// A metric's labels, as `(key, value)` pairs.
type Labels = Vec<(String, String)>;

/// One expected count: the name, the labels, the count.
type Expected = (&'static str, &'static [(&'static str, &'static str)], u64);

/// The counters and histograms one scenario recorded.
pub struct Recorded(Vec<(String, Labels, DebugValue)>);

impl Recorded {
    fn read(snapshotter: &Snapshotter) -> Self {
        let rows = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let key = key.key();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (key.name().to_owned(), labels, value)
            })
            .collect();
        Self(rows)
    }

    /// Counter `name` with exactly `labels` (0 if never recorded).
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.find(name, labels).map_or(0, |value| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
    }

    /// How many values histogram `name` holds (0 if never recorded).
    pub fn observations(&self, name: &str) -> usize {
        self.find(name, &[]).map_or(0, |value| match value {
            DebugValue::Histogram(values) => {
                assert!(values.iter().all(|v| v.0 >= 0.0), "{name}: {values:?}");
                values.len()
            }
            other => panic!("{name} is not a histogram: {other:?}"),
        })
    }

    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && l.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, value)| value)
    }
}

/// Runs `scenario` on a current-thread runtime with a recorder local to
/// this thread, and answers what it recorded.
pub fn recorded<F: Future<Output = ()>>(scenario: impl FnOnce() -> F) -> Recorded {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(&recorder, || runtime.block_on(scenario()));
    Recorded::read(&snapshotter)
}

/// The scenario, on `store` wrapped in [`Metered`].
pub async fn scenario<S: Full>(store: S) {
    let store = Metered::new(store);
    let run = store
        .create_run(NewRun::new("metered", json!({})))
        .await
        .unwrap()
        .record
        .id;
    let step = |name: &str| NewStep::new(run, name, "f", json!({}));
    for name in ["a", "c", "d"] {
        store.insert_step(step(name)).await.unwrap();
    }
    store
        .insert_step(step("b").with_retry(RetryPolicy::with_retries(1)))
        .await
        .unwrap();

    // Three claims won, two lost, one refused.
    let a = store.claim_step(run, "a", "f").await.unwrap().unwrap();
    let b = store.claim_step(run, "b", "f").await.unwrap().unwrap();
    let c = store.claim_step(run, "c", "f").await.unwrap().unwrap();
    assert!(store.claim_step(run, "a", "f").await.unwrap().is_none());
    assert!(
        store
            .claim_step_outcome(run, "a", "f")
            .await
            .unwrap()
            .claimed()
            .is_none()
    );
    store.claim_step(run, "d", "g").await.unwrap_err();

    // Two transitions, one refused by the claim's fence.
    let done = StepTransition::Succeeded(json!(1));
    store
        .transition_claimed(a.claim(), done.clone())
        .await
        .unwrap();
    let failed = StepTransition::Failed(json!("boom"));
    store.transition_claimed(b.claim(), failed).await.unwrap();
    let stale = StepClaim {
        step: c.id,
        attempt: c.attempt + 1,
    };
    store.transition_claimed(stale, done).await.unwrap_err();

    // A retry, then a claim of a step that succeeded.
    let retried = store.claim_step(run, "b", "f").await.unwrap().unwrap();
    assert_eq!(retried.attempt, 2);
    assert!(
        store
            .claim_step_outcome(run, "a", "f")
            .await
            .unwrap()
            .claimed()
            .is_none()
    );

    // A lease taken and renewed; a renewal and two writes with a stale token.
    let lease = store
        .claim_run("w", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.run.id, run);
    let (token, stale) = (lease.token, lease.token + 5);
    store
        .renew(run, token, Duration::from_secs(30))
        .await
        .unwrap();
    store
        .renew(run, stale, Duration::from_secs(30))
        .await
        .unwrap_err();
    store
        .finish(run, stale, RunOutcome::Completed)
        .await
        .unwrap_err();
    store
        .write_state_fenced(run, stale, "k", &json!(1))
        .await
        .unwrap_err();
    store
        .finish(run, token, RunOutcome::Completed)
        .await
        .unwrap();

    // A batch claim of two steps and their flush.
    let batch_run = store
        .create_run(NewRun::new("metered", json!({})))
        .await
        .unwrap()
        .record
        .id;
    for name in ["e", "g"] {
        let step = NewStep::new(batch_run, name, "h", json!({}));
        store
            .insert_step(step.with_retry(RetryPolicy::with_retries(0)))
            .await
            .unwrap();
    }
    let claimed = store
        .claim_batch(&BatchClaim::new(10).for_function("h"))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let completions = vec![
        (claimed[0].claim(), Completion::Succeeded(json!(2))),
        (claimed[1].claim(), Completion::Failed(json!("no"))),
    ];
    let items = store.complete_batch(completions).await.unwrap();
    assert!(items.iter().all(Result::is_ok));

    // An event recorded, then the same key again.
    for _ in 0..2 {
        let event = NewEvent::new("app", "scope", "placed", json!({})).with_dedupe_key("k1");
        store.emit(event, Dispatch::Deferred).await.unwrap();
    }
    // A batch: two new keys and one repeated within it.
    let batch = ["k2", "k3", "k2"]
        .map(|key| NewEvent::new("app", "scope", "placed", json!({})).with_dedupe_key(key))
        .to_vec();
    let emitted = store.emit_batch(batch, Dispatch::Deferred).await.unwrap();
    assert_eq!(
        emitted.iter().map(|e| e.duplicate).collect::<Vec<_>>(),
        [false, false, true]
    );
    // A batch with a hostile key is refused whole through the wrapper
    // (forwarded, not the port's default body, which would record the
    // first event): its good event is then new to a plain emit.
    let good = NewEvent::new("app", "scope", "placed", json!({})).with_dedupe_key("k4");
    let hostile =
        NewEvent::new("app", "scope", "placed", json!({})).with_dedupe_key("k".repeat(100_000));
    assert!(
        store
            .emit_batch(vec![good.clone(), hostile], Dispatch::Deferred)
            .await
            .is_err()
    );
    assert!(
        !store
            .emit(good, Dispatch::Deferred)
            .await
            .unwrap()
            .duplicate
    );

    // The relay finds a run with an untouched step and re-drives it.
    let idle_run = store
        .create_run(NewRun::new("metered", json!({})))
        .await
        .unwrap()
        .record
        .id;
    store
        .insert_step(NewStep::new(idle_run, "z", "f", json!({})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let options = SweepOptions {
        relay_after: Duration::from_millis(1),
        ..SweepOptions::default()
    };
    let mut backoff = RedispatchBackoff::default();
    let mut dispatch = |_: RunId, _: Reason| async { Ok::<(), std::convert::Infallible>(()) };
    let relayed = relay_undispatched(
        &store,
        &mut backoff,
        &mut dispatch,
        SystemClock.now(),
        options,
    )
    .await
    .unwrap();
    assert_eq!(relayed.redispatched, vec![idle_run]);

    // A lease that runs out and is reaped.
    let short = store
        .claim_run("w2", Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        store.reap_expired_leases(10).await.unwrap(),
        vec![short.run.id]
    );

    // The settled runs pruned, counted by kind; a prune that deletes
    // nothing counts nothing.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let prunable = store
        .count_prunable(PruneKind::Runs, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        store
            .prune(PruneKind::Runs, Duration::ZERO, 100)
            .await
            .unwrap(),
        prunable
    );
    // The events matched nothing, so each was dispatched when recorded:
    // the two emitted alone and the batch's two (its repeat recorded
    // nothing, the refused batch nothing).
    assert_eq!(
        store
            .prune(PruneKind::Events, Duration::ZERO, 100)
            .await
            .unwrap(),
        4
    );
    assert_eq!(
        store
            .prune(PruneKind::DeadLetters, Duration::ZERO, 100)
            .await
            .unwrap(),
        0
    );
}

/// Asserts the counts [`scenario`] leaves, exactly.
pub fn assert_counts(got: &Recorded) {
    let expected: &[Expected] = &[
        (names::CLAIMS_WON, &[(names::VIA, "step")], 4),
        (names::CLAIMS_WON, &[(names::VIA, "batch")], 2),
        (names::CLAIMS_LOST, &[(names::REASON, "unknown")], 1),
        (names::CLAIMS_LOST, &[(names::REASON, "running")], 1),
        (names::CLAIMS_LOST, &[(names::REASON, "succeeded")], 1),
        (
            names::CLAIMS_REFUSED,
            &[(names::REASON, "function_mismatch")],
            1,
        ),
        (names::TRANSITIONS, &[(names::STATUS, "succeeded")], 2),
        (names::TRANSITIONS, &[(names::STATUS, "failed")], 2),
        (names::RUN_TRANSITIONS, &[(names::STATUS, "completed")], 1),
        (names::RETRIES, &[], 1),
        (names::FENCING_REFUSALS, &[(names::FENCE, "claim")], 1),
        (names::FENCING_REFUSALS, &[(names::FENCE, "lease")], 2),
        (names::LEASES_TAKEN, &[], 2),
        (names::LEASES_RENEWED, &[], 1),
        (names::LEASES_LOST, &[], 1),
        (names::LEASES_REAPED, &[], 1),
        (names::EVENTS_EMITTED, &[], 4),
        (names::EVENTS_DEDUPLICATED, &[], 2),
        (names::SWEEP_FINDS, &[(names::REASON, "undispatched")], 1),
        (names::SWEEP_REDRIVES, &[(names::REASON, "undispatched")], 1),
        (names::PRUNES, &[(names::KIND, "runs")], 1),
        (names::PRUNES, &[(names::KIND, "events")], 4),
        (names::PRUNES, &[(names::KIND, "dead_letters")], 0),
    ];
    let mut wrong = Vec::new();
    for (name, labels, want) in expected {
        let have = got.counter(name, labels);
        if have != *want {
            wrong.push(format!("{name} {labels:?}: {have}, expected {want}"));
        }
    }
    for (name, want) in [
        (names::CLAIM_SECONDS, 8),
        (names::TRANSITION_SECONDS, 3),
        (names::BATCH_CLAIM_SECONDS, 1),
        (names::FLUSH_SECONDS, 1),
    ] {
        let have = got.observations(name);
        if have != want {
            wrong.push(format!("{name}: {have} observations, expected {want}"));
        }
    }
    assert!(wrong.is_empty(), "wrong counts:\n  {}", wrong.join("\n  "));
}
