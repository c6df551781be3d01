//! Cases for what a virtual-user run is started and settled with: the
//! goals, seed and starter it was started with
//! ([`VirtualUserRunStore::start_virtual_user_run_with`]) and why it
//! stopped ([`StopReason`]); and what removing a schedule leaves of it.
//! What a run records as it goes is `run_progress`.

use std::time::Duration;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::{
    BudgetLimit, Clock, Error, NewVirtualUserRun, RunBudget, RunTally, SchedulePatch, StopReason,
    VirtualUserRunId, VirtualUserRunQuery, VirtualUserRunStatus,
};
use serde_json::json;

use super::schedules::schedule_at;
use crate::Harness;
use crate::cases::support::assert_err;

/// A run started with goals, a seed (every `u64`, the top bit too) and a
/// starter reads them back from get and list; a plain start has none of
/// them, a zero tally, no memory, intents or stop reason; a run started
/// for a schedule carries its goals and is started by `schedule`.
pub async fn run_goals_seed_and_starter_round_trip<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let store = h.store();
    let goals = ["sign up", "ask for a refund ✓"];
    let new = NewVirtualUserRun::new("ana")
        .with_goals(goals)
        .with_seed(u64::MAX - 6)
        .with_started_by("Maria Q.");
    let run = store.start_virtual_user_run_with(&new).await.unwrap();
    assert_eq!(run.goals, goals);
    assert_eq!(run.seed, Some(u64::MAX - 6));
    assert_eq!(run.started_by.as_deref(), Some("Maria Q."));
    assert_eq!(run.status, VirtualUserRunStatus::Running);
    assert_eq!(store.get_virtual_user_run(run.id).await.unwrap(), run);
    let listed = store
        .list_virtual_user_runs(&VirtualUserRunQuery::persona("ana", 0))
        .await
        .unwrap();
    assert_eq!(listed, vec![run]);

    let small = NewVirtualUserRun::new("ana").with_seed(7);
    let small = store.start_virtual_user_run_with(&small).await.unwrap();
    assert_eq!(
        store.get_virtual_user_run(small.id).await.unwrap().seed,
        Some(7)
    );

    let plain = store.start_virtual_user_run("bo").await.unwrap();
    let read = store.get_virtual_user_run(plain.id).await.unwrap();
    assert_eq!(read, plain);
    assert_eq!(
        (read.goals.len(), read.seed, read.started_by, read.tally),
        (0, None, None, RunTally::ZERO)
    );
    assert_eq!(
        (read.memory, read.intents.len(), read.stop_reason),
        (None, 0, None)
    );

    schedule_at(h, "cy", h.clock().now()).await;
    let schedule = store
        .update_schedule("cy", &SchedulePatch::default().with_goals(["browse"]))
        .await
        .unwrap();
    let dispatched = NewVirtualUserRun::for_schedule(&schedule).with_seed(42);
    let run = store
        .start_virtual_user_run_with(&dispatched)
        .await
        .unwrap();
    let read = store.get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(
        (
            read.persona.as_str(),
            read.goals,
            read.started_by.as_deref()
        ),
        ("cy", vec!["browse".to_owned()], Some("schedule"))
    );
}

/// Complete and fail record why the run stopped: [`StopReason::Finished`]
/// and [`StopReason::Failed`] when not told, the reason given otherwise,
/// each read back exactly; a running run has none; a settled run refuses a
/// second settle with a reason and keeps the first; an unknown run is not
/// found.
pub async fn stop_reason_is_recorded_when_settled<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let completed = store.start_virtual_user_run("ana").await.unwrap();
    assert_eq!(completed.stop_reason, None);
    store
        .complete_virtual_user_run(completed.id, &json!({}))
        .await
        .unwrap();
    let failed = store.start_virtual_user_run("ana").await.unwrap();
    store
        .fail_virtual_user_run(failed.id, "boom")
        .await
        .unwrap();
    let reason = |id| async move {
        store
            .get_virtual_user_run(id)
            .await
            .unwrap()
            .stop_reason
            .unwrap()
    };
    assert_eq!(reason(completed.id).await, StopReason::Finished);
    assert_eq!(reason(failed.id).await, StopReason::Failed);

    for (i, given) in StopReason::ALL.into_iter().enumerate() {
        let run = store.start_virtual_user_run("bo").await.unwrap();
        if i % 2 == 0 {
            store
                .complete_virtual_user_run_with_reason(run.id, &json!({"i": i}), given)
                .await
                .unwrap();
        } else {
            store
                .fail_virtual_user_run_with_reason(run.id, "stopped", given)
                .await
                .unwrap();
        }
        assert_eq!(reason(run.id).await, given);
    }

    let spent = StopReason::BudgetExhausted {
        which: BudgetLimit::Turns,
    };
    assert_err!(
        store
            .fail_virtual_user_run_with_reason(completed.id, "late", spent)
            .await,
        Error::VirtualUserRunSettled { .. }
    );
    assert_eq!(reason(completed.id).await, StopReason::Finished);
    let unknown = VirtualUserRunId::generate();
    assert_err!(
        store
            .complete_virtual_user_run_with_reason(unknown, &json!({}), StopReason::GoalsMet)
            .await,
        Error::VirtualUserRunNotFound(id) if id == unknown
    );
}

/// Removing a schedule takes its goals and budget with it (an upsert
/// after starts afresh: no goals, no limit, no last run) and leaves its
/// runs, each with the goals it was started with.
pub async fn removing_a_schedule_keeps_its_runs<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let store = h.store();
    let at = h.clock().now();
    schedule_at(h, "ana", at).await;
    let budget = RunBudget {
        max_turns: Some(5),
        ..RunBudget::UNLIMITED
    };
    let patch = SchedulePatch::default()
        .with_goals(["explore"])
        .with_budget(budget);
    let schedule = store.update_schedule("ana", &patch).await.unwrap();
    let run = store
        .start_virtual_user_run_with(&NewVirtualUserRun::for_schedule(&schedule))
        .await
        .unwrap();
    assert!(
        store
            .claim_schedule("ana", at, at.plus(Duration::from_secs(1)), Some(run.id))
            .await
            .unwrap()
    );
    store.remove_schedule("ana").await.unwrap();
    assert_eq!(store.get_schedule("ana").await.unwrap(), None);
    let kept = store.get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(kept, run);
    assert_eq!(kept.goals, ["explore"]);

    schedule_at(h, "ana", at).await;
    let fresh = store.get_schedule("ana").await.unwrap().unwrap();
    assert_eq!(
        (
            fresh.goals.len(),
            fresh.budget,
            fresh.last_run,
            fresh.last_run_at
        ),
        (0, RunBudget::UNLIMITED, None, None)
    );
    let runs = store
        .list_virtual_user_runs(&VirtualUserRunQuery::persona("ana", 0))
        .await
        .unwrap();
    assert_eq!(runs, vec![run]);
}
