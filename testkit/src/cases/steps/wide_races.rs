//! Races over many targets at once: 64 steps or runs, each raced by 8
//! callers, all 512 released together. One step raced by N callers lets a
//! read-then-write bug through on most runs (the racers rarely overlap in
//! the one window that matters); 64 such windows at once close the gap, so
//! a claim, retry, status move, insert or idempotent create decided by a
//! read followed by an unguarded write fails these every run.

use std::collections::BTreeMap;

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    Error, NewRun, NewStep, RetryPolicy, RetryStart, RunId, RunQuery, RunStatus, Step, StepStatus,
    StepTransition,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, race};

/// Targets per race.
const TARGETS: usize = 64;
/// Callers per target.
const RACERS: usize = 8;

/// Eight runs of eight steps, each step with one retry, moved through
/// `moves`.
async fn steps<H: Harness>(h: &H, moves: &[StepTransition]) -> Vec<Step> {
    let store = h.store();
    let mut steps = Vec::with_capacity(TARGETS);
    for _ in 0..TARGETS / 8 {
        let run = new_run(h).await;
        for i in 0..8 {
            let step = NewStep::new(run.id, format!("s{i}"), FUNCTION, json!({}))
                .with_retry(RetryPolicy::with_retries(1));
            let step = store.insert_step(step).await.unwrap().record;
            for transition in moves {
                store
                    .transition_step(step.id, transition.clone())
                    .await
                    .unwrap();
            }
            steps.push(step);
        }
    }
    steps
}

/// How many history rows each of `steps` has.
async fn history_rows<H: Harness>(h: &H, steps: &[Step]) -> Vec<usize> {
    let mut per_step: BTreeMap<_, usize> = steps.iter().map(|s| (s.id, 0)).collect();
    let mut runs: Vec<RunId> = steps.iter().map(|s| s.run).collect();
    runs.dedup();
    for run in runs {
        for row in h.store().step_history(run).await.unwrap() {
            *per_step.get_mut(&row.step).expect("a row of a raced step") += 1;
        }
    }
    steps.iter().map(|s| per_step[&s.id]).collect()
}

/// Races a claim of every step of `steps` by [`RACERS`] callers and checks
/// that exactly one per step won, on `attempt`.
async fn claim_race<H: Harness>(h: &H, steps: &[Step], attempt: u32) {
    let targets: Vec<(RunId, String)> = steps.iter().map(|s| (s.run, s.name.clone())).collect();
    let outcomes = race(h.store(), TARGETS * RACERS, |store, i| {
        let (run, name) = targets[i / RACERS].clone();
        async move { store.claim_step(run, &name, FUNCTION).await }
    })
    .await;
    for (target, outcomes) in outcomes.chunks(RACERS).enumerate() {
        let won: Vec<&Step> = outcomes
            .iter()
            .flat_map(|o| o.as_ref().expect("a claim"))
            .collect();
        assert_eq!(won.len(), 1, "step {target}: {} claims won", won.len());
        assert_eq!(won[0].attempt, attempt);
        let now = h.store().get_step(steps[target].id).await.unwrap();
        assert_eq!((now.status, now.attempt), (StepStatus::Running, attempt));
    }
}

/// 64 pending steps, 8 claims each: one wins per step, attempt 1, one
/// history row.
pub async fn claim_pending_wide_race<H: Harness>(h: &H) {
    let steps = steps(h, &[]).await;
    claim_race(h, &steps, 1).await;
    assert_eq!(history_rows(h, &steps).await, vec![1; TARGETS]);
}

/// 64 failed steps with a retry left, 8 claims each: one starts attempt 2
/// per step, and each step has exactly two history rows.
pub async fn claim_failed_wide_race<H: Harness>(h: &H) {
    let moves = [
        StepTransition::Running,
        StepTransition::Failed(json!("boom")),
    ];
    let steps = steps(h, &moves).await;
    claim_race(h, &steps, 2).await;
    assert_eq!(history_rows(h, &steps).await, vec![2; TARGETS]);
}

/// 64 failed steps, 8 `create_retry_attempt` each: one succeeds per step,
/// the rest are illegal, and the attempt rose by exactly one.
pub async fn retry_attempt_wide_race<H: Harness>(h: &H) {
    let moves = [
        StepTransition::Running,
        StepTransition::Failed(json!("boom")),
    ];
    let steps = steps(h, &moves).await;
    let ids: Vec<_> = steps.iter().map(|s| s.id).collect();
    let outcomes = race(h.store(), TARGETS * RACERS, |store, i| {
        let id = ids[i / RACERS];
        async move { store.create_retry_attempt(id, RetryStart::Running).await }
    })
    .await;
    for (target, outcomes) in outcomes.chunks(RACERS).enumerate() {
        let ok = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(ok, 1, "step {target}: {ok} retries started");
        for outcome in outcomes {
            if let Err(err) = outcome {
                assert!(
                    matches!(err, Error::IllegalStepTransition { .. }),
                    "a losing retry is illegal, not {err:?}"
                );
            }
        }
        let now = h.store().get_step(ids[target]).await.unwrap();
        assert_eq!((now.status, now.attempt), (StepStatus::Running, 2));
    }
    assert_eq!(history_rows(h, &steps).await, vec![2; TARGETS]);
}

/// 64 running runs, 8 callers each moving it to a settled status (three
/// different ones): one move wins per run and the run ends in its status.
pub async fn set_run_status_wide_race<H: Harness>(h: &H) {
    let mut runs = Vec::with_capacity(TARGETS);
    for _ in 0..TARGETS {
        runs.push(new_run(h).await.id);
    }
    let targets = [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];
    let outcomes = race(h.store(), TARGETS * RACERS, |store, i| {
        let (run, to) = (runs[i / RACERS], targets[i % targets.len()]);
        async move { store.set_run_status(run, to).await.map(|r| r.status) }
    })
    .await;
    for (target, outcomes) in outcomes.chunks(RACERS).enumerate() {
        let won: Vec<RunStatus> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .copied()
            .collect();
        assert_eq!(won.len(), 1, "run {target}: {} moves won", won.len());
        for outcome in outcomes {
            if let Err(err) = outcome {
                assert!(
                    matches!(err, Error::IllegalRunTransition { .. }),
                    "a losing move is illegal, not {err:?}"
                );
            }
        }
        let now = h.store().get_run(runs[target]).await.unwrap();
        assert_eq!(now.status, won[0]);
    }
}

/// 64 step names (eight runs of eight), 8 inserts each: one inserts per
/// name, every caller gets that step, and each has one history row.
pub async fn insert_step_wide_race<H: Harness>(h: &H) {
    let mut runs = Vec::new();
    for _ in 0..TARGETS / 8 {
        runs.push(new_run(h).await.id);
    }
    let outcomes = race(h.store(), TARGETS * RACERS, |store, i| {
        let target = i / RACERS;
        let step = NewStep::new(
            runs[target / 8],
            format!("s{}", target % 8),
            FUNCTION,
            json!({}),
        );
        async move { store.insert_step(step).await }
    })
    .await;
    let mut inserted = Vec::new();
    for (target, outcomes) in outcomes.chunks(RACERS).enumerate() {
        let outcomes: Vec<_> = outcomes
            .iter()
            .map(|o| o.as_ref().expect("an insert"))
            .collect();
        let winners: Vec<_> = outcomes.iter().filter(|o| o.inserted).collect();
        assert_eq!(winners.len(), 1, "name {target}: {} inserts", winners.len());
        let id = winners[0].record.id;
        assert!(
            outcomes.iter().all(|o| o.record.id == id),
            "name {target}: two steps"
        );
        inserted.push(winners[0].record.clone());
    }
    for &run in &runs {
        assert_eq!(h.store().list_steps(run).await.unwrap().len(), 8);
    }
    assert_eq!(history_rows(h, &inserted).await, vec![1; TARGETS]);
}

/// 64 idempotency keys, 8 creates each: one run per key, the same run for
/// every caller of a key, and 64 runs in all.
pub async fn create_run_wide_race<H: Harness>(h: &H) {
    let outcomes = race(h.store(), TARGETS * RACERS, |store, i| {
        let run =
            NewRun::new("wf", json!({"i": i})).with_idempotency_key(format!("key-{}", i / RACERS));
        async move { store.create_run(run).await }
    })
    .await;
    for (target, outcomes) in outcomes.chunks(RACERS).enumerate() {
        let outcomes: Vec<_> = outcomes
            .iter()
            .map(|o| o.as_ref().expect("a create"))
            .collect();
        let winners = outcomes.iter().filter(|o| o.inserted).count();
        assert_eq!(winners, 1, "key {target}: {winners} runs inserted");
        let id = outcomes[0].record.id;
        assert!(
            outcomes.iter().all(|o| o.record.id == id),
            "key {target}: two runs"
        );
    }
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT,
        ..RunQuery::default()
    };
    assert_eq!(
        h.store().list_runs(&query).await.unwrap().items.len(),
        TARGETS
    );
}
