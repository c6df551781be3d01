//! Dense races of a claimer's fenced completion
//! ([`StepStore::transition_claimed`]): 64 claimed steps, each completed by
//! 8 holders at once (the same claim sent by 8 workers, stale claims of an
//! attempt that was replaced, repeats of one completion), all 512 released
//! together, then every step and its history read back.

use flowstate_core::ports::StepStore;
use flowstate_core::{Error, StepClaim, StepTransition};
use serde_json::json;

use crate::Harness;
use crate::cases::support::dense::{
    RACERS, Start, TARGETS, assert_moved, dense_steps, one_winner, race_dense, read_back,
};

/// Holder `r`'s completion, each with a payload of its own: holder 6 moves
/// to scheduled (a sleep), the others succeed (even) or fail (odd).
fn completion(r: usize) -> StepTransition {
    match r {
        6 => StepTransition::Scheduled,
        _ if r % 2 == 0 => StepTransition::Succeeded(json!({"holder": r})),
        _ => StepTransition::Failed(json!({"holder": r})),
    }
}

/// Asserts `outcome` is `ClaimLost` for `claim`.
fn assert_lost(what: &str, outcome: &flowstate_core::Result<()>, claim: StepClaim) {
    match outcome {
        Err(Error::ClaimLost { step, attempt }) => {
            assert_eq!((*step, *attempt), (claim.step, claim.attempt), "{what}");
        }
        other => panic!("{what}: expected ClaimLost, got {other:?}"),
    }
}

/// 64 claimed steps (half on attempt 1, half on a retry's attempt 2), 8
/// holders of the same claim completing each with a different outcome:
/// exactly one answers `Ok`, the other 7 `ClaimLost`, and the step and its
/// current attempt's row hold the winner's outcome.
pub async fn transition_claimed_dense_race<H: Harness>(h: &H) {
    let starts: Vec<Start> = (0..TARGETS)
        .map(|i| {
            if i % 2 == 0 {
                Start::Running
            } else {
                Start::Retried
            }
        })
        .collect();
    let dense = dense_steps(h, &starts, None).await;
    let before = read_back(h, &dense).await;
    let claims: Vec<StepClaim> = dense
        .steps
        .iter()
        .map(flowstate_core::Step::claim)
        .collect();
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let claim = claims[t];
        async move { store.transition_claimed(claim, completion(r)).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let what = format!("step {t} (attempt {})", claims[t].attempt);
        let winner = one_winner(&what, outcomes);
        for (r, outcome) in outcomes.iter().enumerate() {
            if r != winner {
                assert_lost(&format!("{what}: holder {r}"), outcome, claims[t]);
            }
        }
        assert_moved(&what, &before[t], &after[t], &completion(winner));
    }
}

/// 64 steps running attempt 2 after attempt 1 failed; per step 4 holders
/// of the stale attempt 1 and 4 of attempt 2 complete it at once: none of
/// the stale ones writes (each is `ClaimLost` for attempt 1), exactly one
/// of the current ones does, and attempt 1's row keeps its failure. A
/// completion that ignored the attempt would let a stale holder win.
pub async fn stale_claims_lose_dense_race<H: Harness>(h: &H) {
    let dense = dense_steps(h, &[Start::Retried; TARGETS], None).await;
    let before = read_back(h, &dense).await;
    let claim_of = |t: usize, r: usize| StepClaim {
        step: dense.steps[t].id,
        attempt: if r < RACERS / 2 { 1 } else { 2 },
    };
    let claims: Vec<Vec<StepClaim>> = (0..TARGETS)
        .map(|t| (0..RACERS).map(|r| claim_of(t, r)).collect())
        .collect();
    for (t, step) in dense.steps.iter().enumerate() {
        assert_eq!(
            claims[t][RACERS - 1],
            step.claim(),
            "the fixture is on attempt 2"
        );
    }
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let claim = claims[t][r];
        async move { store.transition_claimed(claim, completion(r)).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let what = format!("step {t}");
        let winner = one_winner(&what, outcomes);
        assert!(
            winner >= RACERS / 2,
            "{what}: holder {winner} of the replaced attempt 1 completed attempt 2"
        );
        for (r, outcome) in outcomes.iter().enumerate() {
            if r != winner {
                assert_lost(&format!("{what}: holder {r}"), outcome, claims[t][r]);
            }
        }
        assert_moved(&what, &before[t], &after[t], &completion(winner));
    }
}

/// 64 claimed steps, 8 holders each sending one of two completions, four
/// times each (a flush retried after an unknown outcome): on even steps two
/// successes with different results, on odd steps a success and a failure.
/// One completion is written, and all four holders sending it answer `Ok`
/// (a repeat of a completion already written is `Ok` and writes nothing);
/// the four sending the other are `ClaimLost`. Each step keeps one history
/// row, holding the written completion.
pub async fn repeated_completions_dense_race<H: Harness>(h: &H) {
    let dense = dense_steps(h, &[Start::Running; TARGETS], None).await;
    let before = read_back(h, &dense).await;
    let claims: Vec<StepClaim> = dense
        .steps
        .iter()
        .map(flowstate_core::Step::claim)
        .collect();
    let sent = |t: usize, r: usize| match (t % 2, r % 2) {
        (_, 0) => StepTransition::Succeeded(json!({"sent": "a"})),
        (0, _) => StepTransition::Succeeded(json!({"sent": "b"})),
        _ => StepTransition::Failed(json!({"sent": "b"})),
    };
    let outcomes = race_dense(h.store(), TARGETS, |store, t, r| {
        let (claim, transition) = (claims[t], sent(t, r));
        async move { store.transition_claimed(claim, transition).await }
    })
    .await;
    let after = read_back(h, &dense).await;
    for (t, outcomes) in outcomes.iter().enumerate() {
        let what = format!("step {t}");
        let ok: Vec<usize> = (0..RACERS).filter(|&r| outcomes[r].is_ok()).collect();
        let group = ok.first().map(|r| r % 2);
        let expected: Vec<usize> = (0..RACERS).filter(|r| Some(r % 2) == group).collect();
        assert_eq!(
            ok, expected,
            "{what}: not exactly one completion's senders answered Ok: {outcomes:?}"
        );
        for (r, outcome) in outcomes.iter().enumerate() {
            if !ok.contains(&r) {
                assert_lost(&format!("{what}: holder {r}"), outcome, claims[t]);
            }
        }
        assert_moved(&what, &before[t], &after[t], &sent(t, ok[0]));
    }
}
