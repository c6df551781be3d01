//! Dense races of the claim, the retry and the run status: 64 targets,
//! each raced by 8 callers, all 512 released by one barrier; afterwards
//! every target is read back from the store and checked exactly (see
//! `dense_support` for why 64 targets at once).

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, RetryStart, RunId, RunStatus, StepStatus};

use crate::Harness;
use crate::cases::support::FUNCTION;
use crate::cases::support::dense::{
    RACERS, Start, TARGETS, boom, dense_runs, dense_steps, one_winner, race_dense, read_back, rows,
};

/// Where step `i` of the claim race starts: per run of eight, two pending,
/// two scheduled, two failed with a retry left, then one running or
/// succeeded (alternating by run) and one failed with no retry left.
fn claim_start(i: usize) -> Start {
    match (i % 8, (i / 8) % 2) {
        (0 | 1, _) => Start::Pending,
        (2 | 3, _) => Start::Scheduled,
        (4 | 5, _) => Start::Retryable,
        (6, 0) => Start::Running,
        (6, _) => Start::Succeeded,
        _ => Start::Exhausted,
    }
}

/// 64 steps, 8 `claim_step`s each: a pending or scheduled step is won by
/// exactly one claim on attempt 1 with one history row; a failed step
/// with a retry left by exactly one claim that starts attempt 2 (attempt 1's
/// row kept, one new row); a running, succeeded or exhausted step by none,
/// and it and its history stay exactly as they were. The winner's answer is
/// the step as stored.
pub async fn claim_dense_race<H: Harness>(h: &H) {
    let starts: Vec<Start> = (0..TARGETS).map(claim_start).collect();
    let dense = dense_steps(h, &starts, None).await;
    let before = read_back(h, &dense).await;
    let targets: Vec<(RunId, String)> = dense
        .steps
        .iter()
        .map(|s| (s.run, s.name.clone()))
        .collect();
    let outcomes = race_dense(h.store(), TARGETS, |store, t, _| {
        let (run, name) = targets[t].clone();
        async move { store.claim_step(run, &name, FUNCTION).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.into_iter().enumerate() {
        let what = format!("step {t} ({:?})", starts[t]);
        let won: Vec<_> = outcomes
            .into_iter()
            .filter_map(|o| o.unwrap_or_else(|err| panic!("{what}: a claim failed: {err}")))
            .collect();
        let (step, history) = &after[t];
        let expected: &[(u32, StepStatus)] = match starts[t] {
            Start::Pending | Start::Scheduled => &[(1, StepStatus::Running)],
            Start::Retryable => &[(1, StepStatus::Failed), (2, StepStatus::Running)],
            _ => {
                assert!(won.is_empty(), "{what}: claimed {won:?}");
                assert_eq!(&after[t], &before[t], "{what}: an unclaimable step moved");
                continue;
            }
        };
        assert_eq!(won.len(), 1, "{what}: {} of {RACERS} claims won", won.len());
        assert_eq!(
            &won[0], step,
            "{what}: the winner's answer is not the stored step"
        );
        let attempt = expected.len() as u32;
        assert_eq!(
            (step.status, step.attempt),
            (StepStatus::Running, attempt),
            "{what}"
        );
        assert!(step.claimed_until.is_some(), "{what}: no claim deadline");
        assert_eq!((&step.result, &step.error), (&None, &None), "{what}");
        let found: Vec<_> = history.iter().map(|r| (r.attempt, r.status)).collect();
        assert_eq!(found, expected, "{what}: history");
        if starts[t] == Start::Retryable {
            assert_eq!(
                history[0].error,
                Some(boom()),
                "{what}: attempt 1 lost its error"
            );
        }
    }
}

/// 64 failed steps (half with a retry left, half without: the call does not
/// read the policy), 8 `create_retry_attempt`s each, alternately pending
/// and running: exactly one raises the attempt to 2, in its start; each of
/// the other 7 is `IllegalStepTransition` from the winner's start to its
/// own; attempt 1's row keeps its error and attempt 2 has one row.
pub async fn retry_attempt_dense_race<H: Harness>(h: &H) {
    let starts: Vec<Start> = (0..TARGETS)
        .map(|i| {
            if i % 2 == 0 {
                Start::Retryable
            } else {
                Start::Exhausted
            }
        })
        .collect();
    let dense = dense_steps(h, &starts, None).await;
    let ids: Vec<_> = dense.steps.iter().map(|s| s.id).collect();
    let start_of = |r: usize| [RetryStart::Pending, RetryStart::Running][r % 2];
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let id = ids[t];
        async move { store.create_retry_attempt(id, start_of(r)).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let what = format!("step {t}");
        let winner = one_winner(&what, outcomes);
        let won = start_of(winner).status();
        for (r, outcome) in outcomes.iter().enumerate() {
            if r == winner {
                continue;
            }
            match outcome {
                Err(Error::IllegalStepTransition { step, from, to }) => assert_eq!(
                    (*step, *from, *to),
                    (ids[t], won, start_of(r).status()),
                    "{what}: racer {r}"
                ),
                other => panic!("{what}: racer {r} lost with {other:?}"),
            }
        }
        let (step, history) = &after[t];
        assert_eq!((step.status, step.attempt), (won, 2), "{what}");
        assert_eq!((&step.result, &step.error), (&None, &None), "{what}");
        assert_eq!(
            step.claimed_until.is_some(),
            won == StepStatus::Running,
            "{what}"
        );
        assert_eq!(
            rows(history),
            [
                (1, StepStatus::Failed, None, Some(boom())),
                (2, won, None, None)
            ],
            "{what}: history"
        );
    }
}

/// What run `i` of the run race starts in and the status each of its 8
/// movers asks for: every set of targets is such that no target may move to
/// another ([`RunStatus::TRANSITIONS`]), so exactly one move may win.
fn run_race_plan(i: usize, mover: usize) -> (RunStatus, RunStatus) {
    use RunStatus::{Cancelled, Completed, Failed, Running, Suspended};
    match i % 4 {
        0 => (Running, [Completed, Failed, Cancelled][mover % 3]),
        1 => (Running, Suspended),
        2 => (Suspended, Running),
        _ => (Suspended, [Failed, Cancelled][mover % 2]),
    }
}

/// 64 runs, running or suspended, 8 `set_run_status` callers each moving
/// it out of that status: exactly one wins and answers the run in its
/// status; each of the other 7 is `IllegalRunTransition` from the winner's
/// status to its own; the stored run is in the winner's status.
pub async fn set_run_status_dense_race<H: Harness>(h: &H) {
    for i in 0..TARGETS {
        let (from, _) = run_race_plan(i, 0);
        for mover in 0..RACERS {
            let (_, to) = run_race_plan(i, mover);
            assert!(
                from.can_transition_to(to),
                "the plan asks for an illegal move"
            );
            for other in 0..RACERS {
                assert!(
                    !to.can_transition_to(run_race_plan(i, other).1),
                    "two moves may win"
                );
            }
        }
    }
    let runs = dense_runs(h, TARGETS, |i| run_race_plan(i, 0).0).await;
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let (run, to) = (runs[t], run_race_plan(t, r).1);
        async move { store.set_run_status(run, to).await }
    })
    .await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let what = format!("run {t}");
        let winner = one_winner(&what, outcomes);
        let won = run_race_plan(t, winner).1;
        let answered = outcomes[winner].as_ref().expect("the winner");
        assert_eq!((answered.id, answered.status), (runs[t], won), "{what}");
        for (r, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Ok(_) => {}
                Err(Error::IllegalRunTransition { run, from, to }) => assert_eq!(
                    (*run, *from, *to),
                    (runs[t], won, run_race_plan(t, r).1),
                    "{what}: mover {r}"
                ),
                Err(other) => panic!("{what}: mover {r} lost with {other}"),
            }
        }
        let stored = h.store().get_run(runs[t]).await.expect("get_run");
        assert_eq!(stored.status, won, "{what}: stored");
    }
}
