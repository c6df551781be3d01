//! Cases for what a schedule keeps beside its timing: partial updates
//! ([`ScheduleStore::update_schedule`]), removal, the full listing,
//! `last_run_at`, goals and a typed [`RunBudget`].

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::ScheduleStore;
use flowstate_core::schedule::Interval;
use flowstate_core::{
    Clock, Error, NewSchedule, RunBudget, SchedulePatch, Timestamp, VirtualUserRunId,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::schedules::{HOURLY, schedule_at};
use crate::Harness;
use crate::cases::support::assert_err;

/// Goals and a budget written by a patch read back exactly (get and list),
/// survive an upsert of the timing, and are cleared by an empty list and
/// [`RunBudget::UNLIMITED`].
pub async fn schedule_goals_and_budget_round_trip<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    let at = h.clock().now();
    schedule_at(h, "ana", at).await;
    let fresh = store.get_schedule("ana").await.unwrap().unwrap();
    assert_eq!(fresh.goals, Vec::<String>::new());
    assert_eq!(fresh.budget, RunBudget::UNLIMITED);
    assert_eq!(fresh.last_run_at, None);

    let budget = RunBudget {
        max_duration: Some(Duration::from_millis(90_500)),
        max_turns: Some(40),
        max_spend: Some(2_500_000),
    };
    let goals = ["sign up", "buy the cheapest plan, then ask for a refund ✓"];
    h.clock().advance(Duration::from_secs(1));
    let patched = store
        .update_schedule(
            "ana",
            &SchedulePatch::default()
                .with_goals(goals)
                .with_budget(budget),
        )
        .await
        .unwrap();
    assert_eq!(patched.goals, goals);
    assert_eq!(patched.budget, budget);
    assert_eq!(patched.updated_at, h.clock().now());
    assert_eq!((patched.enabled, patched.interval), (true, HOURLY));
    assert_eq!(
        store.get_schedule("ana").await.unwrap(),
        Some(patched.clone())
    );
    assert_eq!(store.list_schedules(0).await.unwrap(), vec![patched]);

    let upsert =
        NewSchedule::new("ana", HOURLY, at, &mut StdRng::seed_from_u64(1)).with_enabled(false);
    store.upsert_schedule(upsert).await.unwrap();
    let kept = store.get_schedule("ana").await.unwrap().unwrap();
    assert_eq!(
        (kept.goals.len(), kept.budget, kept.enabled),
        (2, budget, false)
    );

    let cleared = store
        .update_schedule(
            "ana",
            &SchedulePatch::default()
                .with_goals(Vec::<String>::new())
                .with_budget(RunBudget::UNLIMITED),
        )
        .await
        .unwrap();
    assert_eq!(cleared.goals, Vec::<String>::new());
    assert_eq!(cleared.budget, RunBudget::UNLIMITED);
}

/// A patch writes only what it sets: switching a schedule off keeps its
/// interval and next run; a new interval keeps the flag.
pub async fn update_schedule_is_partial<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    let at = h.clock().now().plus(Duration::from_secs(60));
    schedule_at(h, "bo", at).await;
    let off = store
        .update_schedule("bo", &SchedulePatch::enabled(false))
        .await
        .unwrap();
    assert_eq!(
        (off.enabled, off.interval, off.next_run_at),
        (false, HOURLY, at)
    );
    let minute = Interval {
        min_ms: 60_000,
        max_ms: 60_000,
    };
    let later = at.plus(Duration::from_secs(5));
    let patch = SchedulePatch {
        interval: Some(minute),
        next_run_at: Some(later),
        ..SchedulePatch::default()
    };
    let moved = store.update_schedule("bo", &patch).await.unwrap();
    assert_eq!(
        (moved.enabled, moved.interval, moved.next_run_at),
        (false, minute, later)
    );
    assert_eq!(store.get_schedule("bo").await.unwrap(), Some(moved));
}

/// A claim recording a run stamps `last_run_at`; one that records none
/// keeps it.
pub async fn claim_recording_a_run_sets_last_run_at<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    let at = h.clock().now();
    schedule_at(h, "cy", at).await;
    h.clock().advance(Duration::from_secs(3));
    let next = at.plus(Duration::from_secs(3_600));
    assert!(store.claim_schedule("cy", at, next, None).await.unwrap());
    assert_eq!(
        store.get_schedule("cy").await.unwrap().unwrap().last_run_at,
        None
    );
    h.clock().advance(Duration::from_secs(2));
    let started = h.clock().now();
    let run = VirtualUserRunId::generate();
    assert!(
        store
            .claim_schedule("cy", next, next, Some(run))
            .await
            .unwrap()
    );
    let read = store.get_schedule("cy").await.unwrap().unwrap();
    assert_eq!(
        (read.last_run, read.last_run_at),
        (Some(run), Some(started))
    );
    h.clock().advance(Duration::from_secs(2));
    let after = next.plus(Duration::from_secs(1));
    assert!(store.claim_schedule("cy", next, after, None).await.unwrap());
    let read = store.get_schedule("cy").await.unwrap().unwrap();
    assert_eq!(read.last_run_at, Some(started));
}

/// Every schedule is listed by persona, disabled ones too, at most the
/// limit; a removed one is gone, its removal answered once.
pub async fn list_and_remove_schedules<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    let at = h.clock().now();
    for persona in ["dee", "ana", "cy", "bo"] {
        schedule_at(h, persona, at).await;
    }
    store
        .update_schedule("cy", &SchedulePatch::enabled(false))
        .await
        .unwrap();
    let names = |list: Vec<flowstate_core::Schedule>| {
        list.into_iter().map(|s| s.persona).collect::<Vec<_>>()
    };
    assert_eq!(
        names(store.list_schedules(0).await.unwrap()),
        ["ana", "bo", "cy", "dee"]
    );
    assert_eq!(names(store.list_schedules(2).await.unwrap()), ["ana", "bo"]);
    store.remove_schedule("bo").await.unwrap();
    assert_eq!(store.get_schedule("bo").await.unwrap(), None);
    assert_eq!(
        names(store.list_schedules(0).await.unwrap()),
        ["ana", "cy", "dee"]
    );
    assert_err!(
        store.remove_schedule("bo").await,
        Error::ScheduleNotFound(p) if p == "bo"
    );
}

/// An unknown persona is the typed not-found for an update and a removal,
/// nothing written.
pub async fn unknown_schedule_is_not_found<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    assert_err!(
        store.update_schedule("nobody", &SchedulePatch::enabled(true)).await,
        Error::ScheduleNotFound(p) if p == "nobody"
    );
    assert_err!(
        store.remove_schedule("nobody").await,
        Error::ScheduleNotFound(p) if p == "nobody"
    );
    assert_eq!(store.list_schedules(0).await.unwrap(), vec![]);
}

/// Bad goals (a NUL, an empty goal, too many) and a budget no store keeps
/// are refused before anything is written.
pub async fn bad_schedule_patch_is_refused<H: Harness>(h: &H)
where
    H::Store: ScheduleStore,
{
    let store = h.store();
    schedule_at(h, "ana", Timestamp::from_millis(1)).await;
    let before = store.get_schedule("ana").await.unwrap();
    for goals in [
        vec!["a\0b".to_owned()],
        vec![String::new()],
        vec!["g".to_owned(); 101],
    ] {
        let patch = SchedulePatch::enabled(false).with_goals(goals);
        assert_err!(
            store.update_schedule("ana", &patch).await,
            Error::InvalidInput(_)
        );
    }
    let patch = SchedulePatch::default().with_budget(RunBudget {
        max_spend: Some(u64::MAX),
        ..RunBudget::UNLIMITED
    });
    assert_err!(
        store.update_schedule("ana", &patch).await,
        Error::InvalidInput(InvalidInput::OutOfRange { .. })
    );
    assert_eq!(store.get_schedule("ana").await.unwrap(), before);
}
