//! Dense races of every guarded `transition_step`: 64 steps, each raced by
//! 8 movers, all 512 released together, then every step and its history
//! read back.
//!
//! What the table ([`StepStatus::TRANSITIONS`]) implies, and what each case
//! asserts: no status may move to itself, and every set of targets raced
//! here is such that none may move to another, so of the 8 movers of a step
//! in a legal source exactly one wins and each other is
//! `IllegalStepTransition` from the winner's target; a step in a source
//! none may leave (among them the target itself) is refused to all 8,
//! from that source, and is not touched.

use flowstate_core::ports::StepStore;
use flowstate_core::{Error, StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::dense::{
    RACERS, Start, TARGETS, assert_moved, dense_steps, race_dense, read_back,
};

/// Mover `r`'s move of `target`, each mover with its own payload.
fn mover(target: StepStatus, r: usize) -> StepTransition {
    match target {
        StepStatus::Running => StepTransition::Running,
        StepStatus::Scheduled => StepTransition::Scheduled,
        StepStatus::Succeeded => StepTransition::Succeeded(json!({"mover": r})),
        StepStatus::Failed => StepTransition::Failed(json!({"mover": r})),
        StepStatus::Pending => unreachable!("no move leads to pending"),
    }
}

/// The status a fixture start leaves a step in.
fn status_of(start: Start) -> StepStatus {
    match start {
        Start::Pending => StepStatus::Pending,
        Start::Scheduled => StepStatus::Scheduled,
        Start::Running | Start::Retried => StepStatus::Running,
        Start::Succeeded => StepStatus::Succeeded,
        Start::Retryable | Start::Exhausted => StepStatus::Failed,
    }
}

/// Races step `i` (started as `start(i)`) by 8 movers, mover `r` asking
/// for `targets(i)[r % len]`, and checks every step against the table.
async fn transition_race<H: Harness>(
    h: &H,
    start: fn(usize) -> Start,
    targets: fn(usize) -> &'static [StepStatus],
) {
    let starts: Vec<Start> = (0..TARGETS).map(start).collect();
    let move_of = |t: usize, r: usize| {
        let targets = targets(t);
        mover(targets[r % targets.len()], r)
    };
    for t in 0..TARGETS {
        for r in 0..RACERS {
            for other in 0..RACERS {
                let (to, next) = (move_of(t, r).target(), move_of(t, other).target());
                assert!(!to.can_transition_to(next), "two moves of step {t} may win");
            }
        }
    }
    let dense = dense_steps(h, &starts, None).await;
    let before = read_back(h, &dense).await;
    let ids: Vec<_> = dense.steps.iter().map(|s| s.id).collect();
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let (id, transition) = (ids[t], move_of(t, r));
        async move { store.transition_step(id, transition).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let source = status_of(starts[t]);
        let what = format!("step {t} ({source})");
        let legal = (0..RACERS).any(|r| source.can_transition_to(move_of(t, r).target()));
        let won: Vec<usize> = (0..RACERS).filter(|&r| outcomes[r].is_ok()).collect();
        // Every loser was refused from the status the winner left, or from
        // the source if nothing may leave it.
        let refused_from = match (legal, won.as_slice()) {
            (true, [winner]) => {
                let transition = move_of(t, *winner);
                assert!(source.can_transition_to(transition.target()), "{what}");
                assert_moved(&what, &before[t], &after[t], &transition);
                transition.target()
            }
            (false, []) => {
                assert_eq!(after[t], before[t], "{what}: a refused step moved");
                source
            }
            _ => panic!(
                "{what}: movers {won:?} won where the table lets {} win",
                usize::from(legal)
            ),
        };
        for (r, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Ok(()) => {}
                Err(Error::IllegalStepTransition { step, from, to }) => assert_eq!(
                    (*step, *from, *to),
                    (ids[t], refused_from, move_of(t, r).target()),
                    "{what}: mover {r}"
                ),
                Err(other) => panic!("{what}: mover {r} lost with {other}"),
            }
        }
    }
}

/// 64 steps, 8 movers each to running: a pending or scheduled step is
/// moved by exactly one and gets a claim deadline; a running, succeeded or
/// failed one by none, and keeps its deadline.
pub async fn transition_to_running_dense_race<H: Harness>(h: &H) {
    let start = |i: usize| match i % 8 {
        0..=2 => Start::Pending,
        3..=5 => Start::Scheduled,
        6 => Start::Running,
        _ if i % 16 == 7 => Start::Succeeded,
        _ => Start::Retryable,
    };
    transition_race(h, start, |_| &[StepStatus::Running]).await;
}

/// 64 steps, 8 movers each to scheduled: a pending or running step is
/// moved by exactly one (a running one loses its claim deadline); a
/// scheduled, succeeded or failed one by none.
pub async fn transition_to_scheduled_dense_race<H: Harness>(h: &H) {
    let start = |i: usize| match i % 8 {
        0..=2 => Start::Pending,
        3..=5 => Start::Running,
        6 => Start::Scheduled,
        _ if i % 16 == 7 => Start::Succeeded,
        _ => Start::Retryable,
    };
    transition_race(h, start, |_| &[StepStatus::Scheduled]).await;
}

/// 64 steps, 8 movers each to succeeded, each with its own result: a
/// running step (on attempt 1 or 2) is moved by exactly one and keeps that
/// mover's result; a succeeded, pending or scheduled one by none.
pub async fn transition_to_succeeded_dense_race<H: Harness>(h: &H) {
    let start = |i: usize| match i % 8 {
        0..=3 => Start::Running,
        4 | 5 => Start::Retried,
        6 => Start::Succeeded,
        _ if i % 16 == 7 => Start::Pending,
        _ => Start::Scheduled,
    };
    transition_race(h, start, |_| &[StepStatus::Succeeded]).await;
}

/// 64 steps, 8 movers each to failed, each with its own error: a pending,
/// scheduled or running step is moved by exactly one and keeps that
/// mover's error; a failed or succeeded one by none.
pub async fn transition_to_failed_dense_race<H: Harness>(h: &H) {
    let start = |i: usize| match i % 8 {
        0 | 1 => Start::Pending,
        2 | 3 => Start::Scheduled,
        4 | 5 => Start::Running,
        6 => Start::Retryable,
        _ => Start::Succeeded,
    };
    transition_race(h, start, |_| &[StepStatus::Failed]).await;
}

/// 64 running steps, 8 movers each out of running to two targets neither
/// of which may move to the other (succeeded or failed, scheduled or
/// succeeded): exactly one wins per step and the others are refused from
/// its target.
pub async fn transition_out_of_running_dense_race<H: Harness>(h: &H) {
    let targets = |i: usize| -> &'static [StepStatus] {
        if i % 2 == 0 {
            &[StepStatus::Succeeded, StepStatus::Failed]
        } else {
            &[StepStatus::Scheduled, StepStatus::Succeeded]
        }
    };
    transition_race(h, |_| Start::Running, targets).await;
}
