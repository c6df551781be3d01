//! Cases for [`ScheduleStore`]: upserts, the due listing and the
//! compare-and-set claim.

use std::time::Duration;

use flowstate_core::ports::ScheduleStore;
use flowstate_core::schedule::Interval;
use flowstate_core::{Clock, NewSchedule, Timestamp, VirtualUserRunId};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::Harness;
use crate::cases::support::race;

/// One to two hours, in milliseconds.
pub(crate) const HOURLY: Interval = Interval {
    min_ms: 3_600_000,
    max_ms: 7_200_000,
};

/// Writes an enabled schedule for `persona`, [`HOURLY`], due at `at`.
pub(crate) async fn schedule_at<H: Harness>(h: &H, persona: &str, at: Timestamp)
where
    H::Store: ScheduleStore,
{
    let schedule =
        NewSchedule::new(persona, HOURLY, at, &mut StdRng::seed_from_u64(0)).with_next_run_at(at);
    h.store()
        .upsert_schedule(schedule)
        .await
        .expect("upsert_schedule");
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// An upserted schedule reads back as written, stamped now, with no last run; a persona without one reads `None`.
pub async fn upsert_schedule_then_get<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let now = h.clock().now();
    let at = now.plus(secs(90));
    schedule_at(h, "alice", at).await;
    let stored = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert_eq!(
        (stored.persona.as_str(), stored.enabled, stored.interval),
        ("alice", true, HOURLY)
    );
    assert_eq!((stored.next_run_at, stored.last_run), (at, None));
    assert_eq!(stored.updated_at, now);
    assert_eq!(h.store().get_schedule("bob").await.unwrap(), None);
}

/// A second upsert replaces the enabled flag, interval and next run, and keeps the run last recorded.
pub async fn upsert_schedule_replaces_and_keeps_last_run<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let run = VirtualUserRunId::generate();
    let next = now.plus(secs(60));
    assert!(
        h.store()
            .claim_schedule("alice", now, next, Some(run))
            .await
            .unwrap()
    );
    let later = h.clock().advance(secs(5));
    let interval = Interval {
        min_ms: 10,
        max_ms: 20,
    };
    let rewritten = NewSchedule::new("alice", interval, later, &mut StdRng::seed_from_u64(1))
        .with_enabled(false)
        .with_next_run_at(later.plus(secs(7)));
    h.store().upsert_schedule(rewritten).await.unwrap();
    let stored = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert_eq!(
        (stored.enabled, stored.interval, stored.next_run_at),
        (false, interval, later.plus(secs(7)))
    );
    assert_eq!(
        (stored.last_run, stored.updated_at),
        (Some(run), later),
        "an upsert keeps the last run"
    );
}

/// A schedule written without a first run is due at a draw from its interval, counted from now, and stored as drawn.
pub async fn new_schedule_defaults_next_run_at_from_now<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let now = h.clock().now();
    for seed in 0..16 {
        let schedule = NewSchedule::new("p", HOURLY, now, &mut StdRng::seed_from_u64(seed));
        assert!(schedule.enabled);
        let drawn = schedule.next_run_at;
        assert!(drawn >= now.plus(secs(3_600)) && drawn <= now.plus(secs(7_200)));
        h.store().upsert_schedule(schedule).await.unwrap();
        let stored = h.store().get_schedule("p").await.unwrap().unwrap();
        assert_eq!(stored.next_run_at, drawn);
    }
}

/// The due listing holds enabled schedules with `next_run_at <= now` only, earliest first then by persona, cut at the limit.
pub async fn due_schedules_are_enabled_and_due_earliest_first<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let now = h.clock().now();
    let early = now.minus(secs(10));
    schedule_at(h, "e", early).await;
    schedule_at(h, "a", early).await;
    schedule_at(h, "b", now).await;
    schedule_at(h, "c", now.plus(Duration::from_micros(1))).await;
    schedule_at(h, "d", early).await;
    let off = NewSchedule::new("d", HOURLY, now, &mut StdRng::seed_from_u64(0))
        .with_next_run_at(early)
        .with_enabled(false);
    h.store().upsert_schedule(off).await.unwrap();

    let personas =
        |due: Vec<flowstate_core::Schedule>| due.into_iter().map(|s| s.persona).collect::<Vec<_>>();
    let due = h.store().due_schedules(now, 0).await.unwrap();
    assert_eq!(personas(due), ["a", "e", "b"]);
    let due = h.store().due_schedules(now, 2).await.unwrap();
    assert_eq!(personas(due), ["a", "e"]);
    let due = h.store().due_schedules(early, 0).await.unwrap();
    assert_eq!(personas(due), ["a", "e"]);
    let none = h.store().due_schedules(early.minus(secs(1)), 0).await;
    assert!(none.unwrap().is_empty());
}

/// A claim lands only from the `next_run_at` the schedule still has, records the run it names, and never lands on a disabled or missing schedule.
pub async fn claim_schedule_is_compare_and_set<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let next = now.plus(secs(3_600));
    assert!(
        store
            .claim_schedule("alice", now, next, None)
            .await
            .unwrap()
    );
    let stored = store.get_schedule("alice").await.unwrap().unwrap();
    assert_eq!((stored.next_run_at, stored.last_run), (next, None));

    let stale = store.claim_schedule("alice", now, next.plus(secs(1)), None);
    assert!(!stale.await.unwrap(), "a claim from a value gone by lands");
    assert_eq!(store.get_schedule("alice").await.unwrap().unwrap(), stored);

    let run = VirtualUserRunId::generate();
    assert!(
        store
            .claim_schedule("alice", next, next, Some(run))
            .await
            .unwrap()
    );
    let recorded = store.get_schedule("alice").await.unwrap().unwrap();
    assert_eq!((recorded.next_run_at, recorded.last_run), (next, Some(run)));

    assert!(
        !store
            .claim_schedule("nobody", now, next, None)
            .await
            .unwrap()
    );
    let off = NewSchedule::new("bob", HOURLY, now, &mut StdRng::seed_from_u64(0))
        .with_next_run_at(now)
        .with_enabled(false);
    store.upsert_schedule(off).await.unwrap();
    assert!(
        !store.claim_schedule("bob", now, next, None).await.unwrap(),
        "a disabled schedule is never claimed"
    );
    assert_eq!(
        store
            .get_schedule("bob")
            .await
            .unwrap()
            .unwrap()
            .next_run_at,
        now
    );
}

/// Of 8 concurrent claims from the same `next_run_at`, exactly one lands, and its value is stored.
pub async fn claim_schedule_race_8<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let won = race(h.store(), 8, move |store, i| async move {
        let next = now.plus(secs(60 + i as u64));
        let landed = store.claim_schedule("alice", now, next, None).await;
        (landed.expect("claim_schedule"), next)
    })
    .await;
    let winners: Vec<Timestamp> = won.iter().filter(|(w, _)| *w).map(|(_, n)| *n).collect();
    assert_eq!(winners.len(), 1, "{won:?}");
    let stored = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert_eq!(stored.next_run_at, winners[0]);
}
