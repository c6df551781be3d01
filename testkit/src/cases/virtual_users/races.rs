//! Cases where ticks meet real concurrency or many draws: 2 and 8 ticks at
//! once over the same due personas, the interval draws a claim sets, and the
//! runner's graceful shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::Interval;
use flowstate_core::{Clock, NewSchedule, Schedule, Timestamp, VirtualUserRunId};
use flowstate_virtual_users::{Runner, SkipReason, TickOptions, tick};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;
use tokio::sync::{Notify, mpsc};

use crate::cases::policies::virtual_user_ticks::{runs_of, starter, tick_at};
use crate::cases::support::race;
use crate::cases::virtual_users::schedules::schedule_at;
use crate::{Harness, ManualClock};

/// The personas the races tick over.
const PERSONAS: [&str; 6] = ["ann", "ben", "cat", "dan", "eve", "fay"];

/// `n` ticks at once over [`PERSONAS`], all due (two of them with a stale
/// run to reap): each persona is dispatched exactly once, and a tick that
/// does not dispatch a persona says why.
async fn ticks_race<H: Harness>(h: &H, n: usize)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let stale = [
        h.store().start_virtual_user_run("ann").await.unwrap().id,
        h.store().start_virtual_user_run("ben").await.unwrap().id,
    ];
    let now = h.clock().advance(Duration::from_secs(3 * 3_600));
    for persona in PERSONAS {
        schedule_at(h, persona, now).await;
    }
    let outcomes = race(h.store(), n, move |store, i| async move {
        let mut rng = StdRng::seed_from_u64(i as u64);
        tick(
            &*store,
            starter(&store),
            now,
            &mut rng,
            TickOptions::default(),
        )
        .await
        .expect("tick")
    })
    .await;

    let mut dispatched: BTreeMap<String, Vec<VirtualUserRunId>> = BTreeMap::new();
    for outcome in &outcomes {
        for d in &outcome.dispatched {
            dispatched.entry(d.persona.clone()).or_default().push(d.run);
        }
        for s in &outcome.skipped {
            assert!(
                matches!(
                    s.reason,
                    SkipReason::InFlight | SkipReason::ClaimedElsewhere
                ),
                "{s:?}"
            );
        }
    }
    assert_eq!(
        dispatched.keys().map(String::as_str).collect::<Vec<_>>(),
        PERSONAS,
        "{outcomes:#?}"
    );
    for (persona, runs) in &dispatched {
        assert_eq!(runs.len(), 1, "{persona} dispatched {} times", runs.len());
        let schedule = h.store().get_schedule(persona).await.unwrap().unwrap();
        assert_eq!(schedule.last_run, Some(runs[0]));
        let started: Vec<VirtualUserRunId> = runs_of(h, persona)
            .await
            .into_iter()
            .map(|r| r.id)
            .filter(|id| !stale.contains(id))
            .collect();
        assert_eq!(started, [runs[0]], "{persona}: one run started");
    }
    let reaped: Vec<VirtualUserRunId> = outcomes
        .iter()
        .flat_map(|o| o.reaped.iter().map(|r| r.run))
        .collect();
    assert!(
        reaped.iter().all(|r| stale.contains(r)) && reaped.len() <= stale.len(),
        "a stranded run is reaped at most once: {reaped:?}"
    );
    for run in stale {
        let read = h.store().get_virtual_user_run(run).await.unwrap();
        assert_eq!(read.status, flowstate_core::VirtualUserRunStatus::Failed);
        assert!(
            reaped.contains(&run),
            "{run} was failed but no tick says so"
        );
    }
}

/// 2 ticks at once over the same due personas (two with stale runs) dispatch each exactly once.
pub async fn ticks_race_2<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    ticks_race(h, 2).await;
}

/// 8 ticks at once over the same due personas (two with stale runs) dispatch each exactly once.
pub async fn ticks_race_8<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    ticks_race(h, 8).await;
}

/// The `next_run_at` a tick with `seed` sets on `persona`, due at `now`
/// with `interval`; the run it starts is completed so the next draw is
/// not held up by it.
async fn drawn<H: Harness>(h: &H, persona: &str, interval: Interval, seed: u64) -> Timestamp
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    let schedule = NewSchedule::new(persona, interval, now, &mut StdRng::seed_from_u64(0))
        .with_next_run_at(now);
    h.store().upsert_schedule(schedule).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let outcome = tick(
        &**h.store(),
        starter(h.store()),
        now,
        &mut rng,
        TickOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.dispatched.len(), 1, "{outcome:?}");
    let run = outcome.dispatched[0].run;
    h.store()
        .complete_virtual_user_run(run, &json!({}))
        .await
        .unwrap();
    h.store()
        .get_schedule(persona)
        .await
        .unwrap()
        .unwrap()
        .next_run_at
}

/// The `next_run_at` a claim sets is uniform within the interval, swapped bounds draw exactly what ordered ones do, negative bounds clamp to zero.
pub async fn claimed_draws_stay_within_bounds_and_swapped_bounds_are_a_range<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    let forward = Interval {
        min_ms: 1_000,
        max_ms: 61_000,
    };
    let swapped = Interval {
        min_ms: 61_000,
        max_ms: 1_000,
    };
    let mut seen = Vec::new();
    for seed in 0..24 {
        let a = drawn(h, "fwd", forward, seed).await;
        let b = drawn(h, "rev", swapped, seed).await;
        assert!(
            a >= now.plus(Duration::from_secs(1)),
            "seed {seed}: {a} before the bound"
        );
        assert!(
            a <= now.plus(Duration::from_secs(61)),
            "seed {seed}: {a} after the bound"
        );
        assert_eq!(a, b, "seed {seed}: swapped bounds drew another value");
        seen.push(a);
    }
    seen.sort_unstable();
    seen.dedup();
    assert!(seen.len() >= 20, "the draws barely vary: {seen:?}");
    // Negative bounds clamp to zero, and a claim never sets `now` again.
    let negative = Interval {
        min_ms: -5_000,
        max_ms: -1,
    };
    assert_eq!(
        drawn(h, "neg", negative, 1).await,
        now.plus(Duration::from_micros(1))
    );
    // The same draws, many more of them, straight from core's rule.
    let mut rng = StdRng::seed_from_u64(11);
    let mut rev = StdRng::seed_from_u64(11);
    let mut buckets = [0u32; 6];
    for _ in 0..6_000 {
        let t = flowstate_core::virtual_users::claimed_next_run_at(forward, now, &mut rng);
        let u = flowstate_core::virtual_users::claimed_next_run_at(swapped, now, &mut rev);
        assert_eq!(t, u);
        let ms = t.since(now).as_millis();
        assert!((1_000..=61_000).contains(&ms), "{ms} ms is out of bounds");
        buckets[((ms - 1_000) / 10_000).min(5) as usize] += 1;
    }
    assert!(
        buckets.iter().all(|b| (800..=1_200).contains(b)),
        "not uniform: {buckets:?}"
    );
}

/// The runner ticks until shut down, and a shutdown waits for the tick under way to finish.
pub async fn runner_ticks_until_shut_down_and_finishes_its_tick<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let (entered, mut entering) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let mut start = starter(h.store());
    let held = Arc::clone(&release);
    let dispatch = move |schedule: Schedule| {
        let started = start(schedule);
        let entered = entered.clone();
        let held = Arc::clone(&held);
        async move {
            let _ = entered.send(());
            held.notified().await;
            started.await
        }
    };
    let clock = Arc::new(ManualClock::starting_at(now));
    let runner = Runner::new(
        Arc::clone(h.store()),
        dispatch,
        clock,
        StdRng::seed_from_u64(1),
    )
    .with_interval(Duration::from_millis(5))
    .with_options(TickOptions::default())
    .spawn();
    // A bound on something that must happen, not a timing check.
    tokio::time::timeout(Duration::from_secs(30), entering.recv())
        .await
        .expect("the runner never dispatched")
        .expect("dispatch channel closed");
    let stopping = tokio::spawn(runner.shutdown());
    release.notify_one();
    let report = tokio::time::timeout(Duration::from_secs(30), stopping)
        .await
        .expect("shutdown never returned")
        .expect("the runner panicked");
    assert_eq!(
        report.dispatched, 1,
        "the tick under way finished: {report:?}"
    );
    assert!(report.ticks >= 1 && report.failed_ticks == 0, "{report:?}");
    let runs = runs_of(h, "alice").await;
    assert_eq!(runs.len(), 1);
    let schedule = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert_eq!(schedule.last_run, Some(runs[0].id));
    assert!(
        entering.try_recv().is_err(),
        "nothing was dispatched after the stop"
    );
    // The store is the runner's only trace: one more tick by hand is clean.
    assert!(tick_at(h, now).await.dispatched.is_empty());
}
