//! [`StepStore::claim_step`] under real concurrency: of any number of
//! simultaneous claims of one step, exactly one wins.

use flowstate_core::ports::StepStore;
use flowstate_core::{StepStatus, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, history_of, new_run, new_step, race};

/// Puts step `s1` in `from`, races `n` claims of it and checks the outcome:
/// one winner, the attempt raised by exactly one for a retry, and exactly one
/// history row per attempt.
async fn claim_race<H: Harness>(h: &H, from: StepStatus, n: usize) {
    let run = new_run(h).await;
    let step = new_step(h, run.id, "s1", 100).await;
    let setup: &[StepTransition] = match from {
        StepStatus::Pending => &[],
        StepStatus::Scheduled => &[StepTransition::Scheduled],
        StepStatus::Failed => &[
            StepTransition::Running,
            StepTransition::Failed(json!({"message": "boom"})),
        ],
        other => panic!("{other} is not claimable"),
    };
    for transition in setup {
        h.store()
            .transition_step(step.id, transition.clone())
            .await
            .unwrap();
    }
    let expected_attempt = if from == StepStatus::Failed { 2 } else { 1 };

    let claims = race(h.store(), n, |store, _| async move {
        store.claim_step(run.id, "s1", FUNCTION).await
    })
    .await;

    let winners: Vec<_> = claims
        .into_iter()
        .filter_map(|claim| claim.expect("a losing claim is None, not an error"))
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "{} of {n} claims of a {from} step won: a side-effecting step would run more than once",
        winners.len()
    );
    let after = h.store().get_step(step.id).await.unwrap();
    assert_eq!(winners[0], after);
    assert_eq!(after.status, StepStatus::Running);
    assert_eq!(
        after.attempt, expected_attempt,
        "the claims raced each other and burned attempts"
    );
    let history = history_of(h, &step).await;
    let rows: Vec<_> = history.iter().map(|r| (r.attempt, r.status)).collect();
    let expected: &[(u32, StepStatus)] = if from == StepStatus::Failed {
        &[(1, StepStatus::Failed), (2, StepStatus::Running)]
    } else {
        &[(1, StepStatus::Running)]
    };
    assert_eq!(rows, expected);
}

/// 2 concurrent claims of a pending step: exactly one wins.
pub async fn claim_pending_race_2<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Pending, 2).await;
}

/// 8 concurrent claims of a pending step: exactly one wins.
pub async fn claim_pending_race_8<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Pending, 8).await;
}

/// 32 concurrent claims of a pending step: exactly one wins.
pub async fn claim_pending_race_32<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Pending, 32).await;
}

/// 2 concurrent claims of a failed step: exactly one retry, attempt 2.
pub async fn claim_failed_race_2<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Failed, 2).await;
}

/// 8 concurrent claims of a failed step: exactly one retry, attempt 2.
pub async fn claim_failed_race_8<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Failed, 8).await;
}

/// 32 concurrent claims of a failed step: exactly one retry, attempt 2.
pub async fn claim_failed_race_32<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Failed, 32).await;
}

/// 2 concurrent claims of a scheduled step: exactly one wins.
pub async fn claim_scheduled_race_2<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Scheduled, 2).await;
}

/// 8 concurrent claims of a scheduled step: exactly one wins.
pub async fn claim_scheduled_race_8<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Scheduled, 8).await;
}

/// 32 concurrent claims of a scheduled step: exactly one wins.
pub async fn claim_scheduled_race_32<H: Harness>(h: &H) {
    claim_race(h, StepStatus::Scheduled, 32).await;
}
