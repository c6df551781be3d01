//! Pruning runs: old settled runs go with every row that hangs off them;
//! live, leased and waiting runs and the parents of live children stay;
//! an idempotency key protects until its run is pruned.

use std::time::Duration;

use flowstate_core::ports::{
    ChildRunStore, EffectJournal, RunLeaseStore, RunStore, RunWaitStore, StepStore,
};
use flowstate_core::wait::Wait;
use flowstate_core::{Error, NewChild, NewRun, PruneKind, RunId, RunStatus, StepStatus};
use serde_json::json;

use super::{PAST_WINDOW, RetentionBackend, exists, prunable, prune, settled};
use crate::cases::support::{assert_err, new_run, step_in};
use crate::{Hooks, LeaseHarness};

/// A settled run with a succeeded and a failed step (their history rows),
/// two state keys and an effect, all written before it settled.
async fn full_run<H: LeaseHarness>(h: &H, status: RunStatus, key: Option<&str>) -> FullRun
where
    H::Store: RetentionBackend,
{
    let mut new = NewRun::new("wf", json!({"n": 1}));
    if let Some(key) = key {
        new = new.with_idempotency_key(key);
    }
    let run = h.store().create_run(new).await.expect("create_run").record;
    let ok = step_in(h, run.id, "ok", StepStatus::Succeeded).await;
    let bad = step_in(h, run.id, "bad", StepStatus::Failed).await;
    h.store().write_state(run.id, "a", &json!(1)).await.unwrap();
    h.store()
        .write_state(run.id, "b", &json!([]))
        .await
        .unwrap();
    h.store().begin_effect(run.id, "mail").await.unwrap();
    h.store().signal(run.id, "go", &json!({})).await.unwrap();
    h.store().set_run_status(run.id, status).await.unwrap();
    FullRun {
        id: run.id,
        steps: vec![ok.id, bad.id],
    }
}

/// A run written by [`full_run`] and its steps.
struct FullRun {
    id: RunId,
    steps: Vec<flowstate_core::StepId>,
}

/// Every read of a pruned run answers not found, or nothing for it.
async fn assert_gone<H: LeaseHarness>(h: &H, run: &FullRun)
where
    H::Store: RetentionBackend,
{
    assert!(!exists(h, run.id).await, "run {} still there", run.id);
    for step in &run.steps {
        assert_err!(h.store().get_step(*step).await, Error::StepNotFound(id) if id == *step);
    }
    let steps = h.store().list_steps(run.id).await;
    assert!(
        matches!(&steps, Ok(steps) if steps.is_empty())
            || matches!(steps, Err(Error::RunNotFound(_))),
        "steps of a pruned run: {steps:?}"
    );
    let history = h.store().step_history(run.id).await;
    assert!(
        matches!(&history, Ok(rows) if rows.is_empty())
            || matches!(history, Err(Error::RunNotFound(_))),
        "history of a pruned run: {history:?}"
    );
    let state = h.store().read_state(run.id).await;
    assert!(
        matches!(&state, Ok(keys) if keys.is_empty())
            || matches!(state, Err(Error::RunNotFound(_))),
        "state of a pruned run: {state:?}"
    );
    let stranded = h.store().stranded_effects(Duration::ZERO).await.unwrap();
    assert!(stranded.iter().all(|e| e.run != run.id), "{stranded:?}");
}

/// Completed, failed and cancelled runs settled before the window are
/// pruned with their steps, history, state and effects, a settled parent
/// of settled children too (its children stay, parentless, until their
/// own age), a keyed run's key is free after; a run settled within the
/// window stays.
pub async fn old_settled_runs_are_pruned_with_what_hangs_off_them<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let done = full_run(h, RunStatus::Completed, Some("order-1")).await;
    let failed = full_run(h, RunStatus::Failed, None).await;
    let cancelled = full_run(h, RunStatus::Cancelled, None).await;
    let parent = new_run(h).await;
    let child = h
        .store()
        .create_children(parent.id, vec![NewChild::new("c", "child", json!({}))])
        .await
        .unwrap()
        .remove(0)
        .record;
    h.store()
        .set_run_status(child.id, RunStatus::Completed)
        .await
        .unwrap();
    h.store()
        .set_run_status(parent.id, RunStatus::Completed)
        .await
        .unwrap();
    h.clock().advance(PAST_WINDOW);
    let young = settled(h, RunStatus::Completed).await;
    let live = new_run(h).await;

    assert_eq!(prunable(h, PruneKind::Runs).await, 5);
    assert_eq!(prune(h, PruneKind::Runs, 100).await, 5);
    assert_eq!(prune(h, PruneKind::Runs, 100).await, 0);
    assert_eq!(prunable(h, PruneKind::Runs).await, 0);
    for run in [&done, &failed, &cancelled] {
        assert_gone(h, run).await;
    }
    assert!(!exists(h, parent.id).await);
    assert!(!exists(h, child.id).await);
    assert!(exists(h, young.id).await);
    assert!(exists(h, live.id).await);
    // The key protected until its run was pruned; now it creates anew.
    let again = h
        .store()
        .create_run(NewRun::new("wf", json!({})).with_idempotency_key("order-1"))
        .await
        .unwrap();
    assert!(again.inserted);
    assert_ne!(again.record.id, done.id);
}

/// A keyed run's key still answers the first run when the run is old but
/// not yet pruned: only the prune frees it.
pub async fn an_idempotency_key_protects_until_its_run_is_pruned<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let first = h
        .store()
        .create_run(NewRun::new("wf", json!({})).with_idempotency_key("k"))
        .await
        .unwrap()
        .record;
    h.store()
        .set_run_status(first.id, RunStatus::Completed)
        .await
        .unwrap();
    h.clock().advance(PAST_WINDOW);
    let before = h
        .store()
        .create_run(NewRun::new("wf", json!({})).with_idempotency_key("k"))
        .await
        .unwrap();
    assert!(!before.inserted);
    assert_eq!(before.record.id, first.id);
    assert_eq!(prune(h, PruneKind::Runs, 10).await, 1);
    let after = h
        .store()
        .create_run(NewRun::new("wf", json!({})).with_idempotency_key("k"))
        .await
        .unwrap();
    assert!(after.inserted);
}

/// Running, suspended and waiting runs and the parent of a running child
/// are never pruned however old; once the child settles the parent goes
/// and the child stays, parentless, until it is old itself.
pub async fn live_runs_and_parents_of_live_children_are_kept<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    // Claimed first, so the claim takes it and not a later run.
    let waiting = new_run(h).await;
    let lease = h
        .store()
        .claim_run("w", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("a runnable run");
    assert_eq!(lease.run.id, waiting.id);
    h.store()
        .wait(
            waiting.id,
            lease.token,
            Wait::Signal {
                name: "go".into(),
                timeout: None,
            },
        )
        .await
        .unwrap();
    let running = new_run(h).await;
    let suspended = settled(h, RunStatus::Suspended).await;
    let parent = new_run(h).await;
    let child = h
        .store()
        .create_children(parent.id, vec![NewChild::new("c", "child", json!({}))])
        .await
        .unwrap()
        .remove(0)
        .record;
    h.store()
        .set_run_status(parent.id, RunStatus::Completed)
        .await
        .unwrap();
    h.clock().advance(PAST_WINDOW * 24);

    assert_eq!(prunable(h, PruneKind::Runs).await, 0);
    assert_eq!(prune(h, PruneKind::Runs, 100).await, 0);
    for run in [waiting.id, running.id, suspended.id, parent.id, child.id] {
        assert!(exists(h, run).await, "run {run} was pruned");
    }

    h.store()
        .set_run_status(child.id, RunStatus::Failed)
        .await
        .unwrap();
    assert_eq!(prunable(h, PruneKind::Runs).await, 1);
    assert_eq!(prune(h, PruneKind::Runs, 100).await, 1);
    assert!(!exists(h, parent.id).await);
    let child = h.store().get_run(child.id).await.unwrap();
    assert_eq!(child.parent, None);
    h.clock().advance(PAST_WINDOW);
    assert_eq!(prune(h, PruneKind::Runs, 100).await, 1);
    assert!(!exists(h, child.id).await);
}

/// A run settled under a lease that is still held (set to completed by
/// its holder without `finish`) is kept until the lease runs out on the
/// store's lease clock.
pub async fn a_settled_run_under_a_live_lease_is_kept<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let run = new_run(h).await;
    let lease = h
        .store()
        .claim_run("w", flowstate_core::lease::LONGEST_LEASE)
        .await
        .unwrap()
        .expect("a runnable run");
    assert_eq!(lease.run.id, run.id);
    h.store()
        .set_run_status(run.id, RunStatus::Completed)
        .await
        .unwrap();
    h.clock().advance(PAST_WINDOW);
    assert_eq!(prunable(h, PruneKind::Runs).await, 0);
    assert_eq!(prune(h, PruneKind::Runs, 10).await, 0);
    assert!(exists(h, run.id).await);
    h.advance_lease_clock(flowstate_core::lease::LONGEST_LEASE * 2)
        .await;
    assert_eq!(prunable(h, PruneKind::Runs).await, 1);
    assert_eq!(prune(h, PruneKind::Runs, 10).await, 1);
    assert!(!exists(h, run.id).await);
}

/// Behind the ports: a pruned run leaves no step, history or state row.
pub async fn pruned_runs_leave_no_rows<H: LeaseHarness + Hooks>(h: &H)
where
    H::Store: RetentionBackend,
{
    let run = full_run(h, RunStatus::Completed, None).await;
    let kept = full_run(h, RunStatus::Failed, None).await;
    h.clock().advance(PAST_WINDOW);
    let young = full_run(h, RunStatus::Completed, None).await;
    let before = h.count_rows(young.id, &young.steps).await;
    assert_eq!((before.steps, before.history, before.state), (2, 2, 2));
    assert_eq!(prune(h, PruneKind::Runs, 1).await, 1);
    let rows = h.count_rows(run.id, &run.steps).await;
    assert_eq!((rows.steps, rows.history, rows.state), (0, 0, 0));
    let rows = h.count_rows(kept.id, &kept.steps).await;
    assert_eq!((rows.steps, rows.history, rows.state), (2, 2, 2));
    assert_eq!(prune(h, PruneKind::Runs, 1).await, 1);
    let rows = h.count_rows(kept.id, &kept.steps).await;
    assert_eq!((rows.steps, rows.history, rows.state), (0, 0, 0));
    assert_eq!(h.count_rows(young.id, &young.steps).await, before);
}
