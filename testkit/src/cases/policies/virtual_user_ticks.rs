//! Cases for `flowstate_virtual_users::tick` over a backend: dispatch,
//! the in-flight skip, reaping, a failed dispatch, a disabled schedule and a
//! claim lost to another tick.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::STALE_RUN_AFTER;
use flowstate_core::{
    Clock, Error, NewSchedule, NewVirtualUserRun, Schedule, StopReason, Timestamp,
    VirtualUserRunId, VirtualUserRunQuery, VirtualUserRunStatus,
};
use flowstate_virtual_users::{SkipReason, Skipped, TickOptions, TickOutcome, tick};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::Harness;
use crate::cases::virtual_users::schedules::{HOURLY, schedule_at};

/// The dispatch a host would give: start a run of the schedule's persona,
/// with its goals, started by `schedule`.
pub(crate) fn starter<S>(
    store: &Arc<S>,
) -> impl FnMut(
    Schedule,
) -> std::pin::Pin<Box<dyn Future<Output = Result<VirtualUserRunId, Error>> + Send>>
+ Send
+ 'static
where
    S: VirtualUserRunStore + 'static,
{
    let store = Arc::clone(store);
    move |schedule: Schedule| {
        let store = Arc::clone(&store);
        Box::pin(async move {
            let run = store
                .start_virtual_user_run_with(&NewVirtualUserRun::for_schedule(&schedule))
                .await?;
            Ok(run.id)
        })
    }
}

/// One tick at `now` with the host's dispatch and a seeded rng.
pub(crate) async fn tick_at<H: Harness>(h: &H, now: Timestamp) -> TickOutcome
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let mut rng = StdRng::seed_from_u64(7);
    tick(
        &**h.store(),
        starter(h.store()),
        now,
        &mut rng,
        TickOptions::default(),
    )
    .await
    .expect("tick")
}

fn skipped(persona: &str, reason: SkipReason) -> Skipped {
    Skipped {
        persona: persona.to_owned(),
        reason,
    }
}

/// `persona`'s runs, newest first.
pub(crate) async fn runs_of<H: Harness>(h: &H, persona: &str) -> Vec<flowstate_core::VirtualUserRun>
where
    H::Store: VirtualUserRunStore,
{
    let query = VirtualUserRunQuery::persona(persona, 0);
    h.store().list_virtual_user_runs(&query).await.unwrap()
}

/// A tick dispatches every due persona, earliest first, moves its `next_run_at` into its interval and records the run; a second tick at the same time finds nothing due.
pub async fn tick_dispatches_due_personas_and_records_the_run<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    schedule_at(h, "bob", now).await;
    schedule_at(h, "alice", now.minus(Duration::from_secs(1))).await;
    schedule_at(h, "carol", now.plus(Duration::from_secs(1))).await;

    let outcome = tick_at(h, now).await;
    let personas: Vec<&str> = outcome
        .dispatched
        .iter()
        .map(|d| d.persona.as_str())
        .collect();
    assert_eq!(personas, ["alice", "bob"], "earliest due first");
    assert_eq!(
        (outcome.skipped.clone(), outcome.reaped.clone()),
        (vec![], vec![])
    );
    for dispatched in &outcome.dispatched {
        let schedule = h
            .store()
            .get_schedule(&dispatched.persona)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            schedule.last_run,
            Some(dispatched.run),
            "the run id is recorded"
        );
        let (low, high) = HOURLY.bounds();
        assert!(schedule.next_run_at >= now.plus(Duration::from_millis(low)));
        assert!(schedule.next_run_at <= now.plus(Duration::from_millis(high)));
        let runs = runs_of(h, &dispatched.persona).await;
        assert_eq!(runs.len(), 1);
        assert_eq!(
            (runs[0].id, runs[0].status),
            (dispatched.run, VirtualUserRunStatus::Running)
        );
    }
    assert!(runs_of(h, "carol").await.is_empty());
    assert_eq!(
        tick_at(h, now).await,
        TickOutcome::default(),
        "nothing is due twice"
    );
}

/// A persona whose latest run is still running, a microsecond short of the stale limit, is skipped as in-flight and not claimed; once the run finishes it dispatches.
pub async fn tick_skips_a_persona_in_flight<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let started = h.clock().now();
    let run = h.store().start_virtual_user_run("alice").await.unwrap();
    let now = h
        .clock()
        .advance(STALE_RUN_AFTER.saturating_sub(Duration::from_micros(1)));
    schedule_at(h, "alice", now).await;
    let before = h.store().get_schedule("alice").await.unwrap();

    let outcome = tick_at(h, now).await;
    assert_eq!(outcome.skipped, [skipped("alice", SkipReason::InFlight)]);
    assert!(outcome.dispatched.is_empty() && outcome.reaped.is_empty());
    assert_eq!(
        h.store().get_schedule("alice").await.unwrap(),
        before,
        "an in-flight skip claims nothing"
    );
    let read = h.store().get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(
        (read.status, read.created_at),
        (VirtualUserRunStatus::Running, started)
    );

    // Once the run finishes the persona is dispatched again.
    h.store()
        .complete_virtual_user_run(run.id, &serde_json::json!({}))
        .await
        .unwrap();
    let outcome = tick_at(h, now).await;
    assert_eq!(outcome.dispatched.len(), 1);
}

/// A run running past the stale limit is failed with a message saying how long it ran and the stop reason `abandoned`, and its persona dispatches in the same tick.
pub async fn tick_reaps_a_stale_run_and_dispatches_in_the_same_tick<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let stranded = h.store().start_virtual_user_run("alice").await.unwrap();
    let ran_for = Duration::from_secs(2 * 3_600 + 5 * 60);
    let now = h.clock().advance(ran_for);
    schedule_at(h, "alice", now).await;

    let outcome = tick_at(h, now).await;
    assert_eq!(outcome.reaped.len(), 1);
    let reaped = &outcome.reaped[0];
    assert_eq!(
        (reaped.persona.as_str(), reaped.run, reaped.ran_for),
        ("alice", stranded.id, ran_for)
    );
    let read = h.store().get_virtual_user_run(stranded.id).await.unwrap();
    assert_eq!(read.status, VirtualUserRunStatus::Failed);
    assert_eq!(read.stop_reason, Some(StopReason::Abandoned));
    let message = read.failure.unwrap();
    assert!(
        message.contains("still running 2h 5m after it started"),
        "{message}"
    );
    assert_eq!(
        outcome.dispatched.len(),
        1,
        "the persona goes on in the same tick"
    );
    assert_eq!(outcome.dispatched[0].persona, "alice");
    let started = h.store().get_virtual_user_run(outcome.dispatched[0].run);
    let started = started.await.unwrap();
    assert_eq!(
        started.started_by.as_deref(),
        Some(NewVirtualUserRun::SCHEDULE)
    );
    assert!(outcome.skipped.is_empty());
    let runs = runs_of(h, "alice").await;
    assert_eq!(
        runs.iter().map(|r| r.id).collect::<Vec<_>>(),
        [outcome.dispatched[0].run, stranded.id]
    );
}

/// A failed dispatch is `dispatch-failed`, the claim keeps `next_run_at` advanced, and the persona is not retried before that time.
pub async fn tick_reports_a_failed_dispatch_and_keeps_the_claim<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&calls);
    let failing = move |_: Schedule| {
        *counted.lock().unwrap() += 1;
        async { Err::<VirtualUserRunId, _>("the queue is down") }
    };
    let mut rng = StdRng::seed_from_u64(3);
    let outcome = tick(&**h.store(), failing, now, &mut rng, TickOptions::default())
        .await
        .unwrap();
    assert_eq!(
        outcome.skipped,
        [skipped("alice", SkipReason::DispatchFailed)]
    );
    assert!(outcome.dispatched.is_empty());
    assert_eq!(*calls.lock().unwrap(), 1);
    let schedule = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert!(schedule.next_run_at > now, "the claim advanced next_run_at");
    assert_eq!(schedule.last_run, None);
    assert_eq!(
        tick_at(h, now).await,
        TickOutcome::default(),
        "not retried before its next run"
    );
    let outcome = tick_at(h, schedule.next_run_at).await;
    assert_eq!(outcome.dispatched.len(), 1, "dispatched at its next run");
}

/// A disabled schedule is never dispatched, however late it is.
pub async fn tick_never_dispatches_a_disabled_schedule<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    let off = NewSchedule::new("alice", HOURLY, now, &mut StdRng::seed_from_u64(0))
        .with_next_run_at(now.minus(Duration::from_secs(60)))
        .with_enabled(false);
    h.store().upsert_schedule(off).await.unwrap();
    let far = now.plus(Duration::from_secs(365 * 24 * 3_600));
    for at in [now, far] {
        assert_eq!(tick_at(h, at).await, TickOutcome::default());
    }
    assert!(runs_of(h, "alice").await.is_empty());
}

/// A persona listed as due but claimed by another tick before this one gets to it is `claimed-elsewhere` and not dispatched.
pub async fn tick_skips_a_persona_claimed_elsewhere<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now.minus(Duration::from_secs(1))).await;
    schedule_at(h, "bob", now).await;
    // While alice is dispatched, another tick claims bob, whom this tick
    // has already listed as due.
    let store = Arc::clone(h.store());
    let mut start = starter(h.store());
    let meddling = move |schedule: Schedule| {
        let store = Arc::clone(&store);
        let started = start(schedule);
        async move {
            let later = now.plus(Duration::from_secs(60));
            assert!(store.claim_schedule("bob", now, later, None).await.unwrap());
            started.await
        }
    };
    let mut rng = StdRng::seed_from_u64(5);
    let outcome = tick(
        &**h.store(),
        meddling,
        now,
        &mut rng,
        TickOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.dispatched.len(), 1);
    assert_eq!(outcome.dispatched[0].persona, "alice");
    assert_eq!(
        outcome.skipped,
        [skipped("bob", SkipReason::ClaimedElsewhere)]
    );
    assert!(runs_of(h, "bob").await.is_empty());
}

/// A tick acts on at most its limit of due personas; the next tick takes the rest.
pub async fn tick_acts_on_at_most_its_limit<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    for persona in ["a", "b", "c"] {
        schedule_at(h, persona, now).await;
    }
    let options = TickOptions {
        limit: 2,
        ..TickOptions::default()
    };
    let mut rng = StdRng::seed_from_u64(9);
    let first = tick(&**h.store(), starter(h.store()), now, &mut rng, options)
        .await
        .unwrap();
    assert_eq!(first.dispatched.len(), 2);
    let second = tick(&**h.store(), starter(h.store()), now, &mut rng, options)
        .await
        .unwrap();
    assert_eq!(
        second
            .dispatched
            .iter()
            .map(|d| d.persona.as_str())
            .collect::<Vec<_>>(),
        ["c"]
    );
}

/// A tick whose schedule claim dies between its compare and its write ([`Hooks::abort_after_pick`](crate::Hooks::abort_after_pick)), as a Galera node's claim does when another node's commit aborts it, answers a retryable error having dispatched nothing and left the schedule due, or (the claim run again by the store) dispatches the persona; either way the next tick at the same time leaves the persona dispatched exactly once, with its run recorded, and a third finds nothing due.
pub async fn a_tick_whose_schedule_claim_is_aborted_dispatches_once<H>(h: &H)
where
    H: crate::Hooks,
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let now = h.clock().now();
    schedule_at(h, "alice", now).await;
    let before = h.store().get_schedule("alice").await.unwrap();
    h.abort_after_pick(Some(crate::Pick::Schedules)).await;
    let mut rng = StdRng::seed_from_u64(7);
    let aborted = tick(
        &**h.store(),
        starter(h.store()),
        now,
        &mut rng,
        TickOptions::default(),
    )
    .await;
    h.abort_after_pick(None).await;
    let mut dispatched = match aborted {
        Ok(outcome) => outcome.dispatched,
        Err(err) => {
            assert!(
                err.is_retryable(),
                "a tick whose claim was aborted failed for good: {err:?}"
            );
            assert!(
                runs_of(h, "alice").await.is_empty(),
                "an aborted claim dispatched"
            );
            assert_eq!(
                h.store().get_schedule("alice").await.unwrap(),
                before,
                "an aborted claim moved the schedule"
            );
            Vec::new()
        }
    };
    dispatched.extend(tick_at(h, now).await.dispatched);
    assert_eq!(
        dispatched
            .iter()
            .map(|d| d.persona.as_str())
            .collect::<Vec<_>>(),
        ["alice"],
        "dispatched once"
    );
    let runs = runs_of(h, "alice").await;
    assert_eq!(
        runs.iter().map(|r| r.id).collect::<Vec<_>>(),
        [dispatched[0].run]
    );
    let schedule = h.store().get_schedule("alice").await.unwrap().unwrap();
    assert_eq!(
        schedule.last_run,
        Some(dispatched[0].run),
        "the run is recorded"
    );
    assert!(schedule.next_run_at > now);
    assert_eq!(
        tick_at(h, now).await,
        TickOutcome::default(),
        "nothing is due twice"
    );
}
