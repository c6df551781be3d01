//! Step claims taken back once they run out
//! ([`RecoveryStore::expire_step_claims`]), on the lease clock: the
//! attempt fails with core's claim-expired error and the retry policy takes
//! it from there; the old holder's writes are lost; a renewed or completed
//! claim is left alone; the [`Sweeper`] does it and re-drives the run; and
//! a sweeper whose own clock is off finds what any other finds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowstate_core::ports::{RecoveryStore, RunRecoveryStore, RunWaitStore, StepStore};
use flowstate_core::step_claim::{DEFAULT_CLAIM_TIMEOUT, claim_expired_error};
use flowstate_core::{Error, NewStep, RetryPolicy, RunId, StepStatus, StepTransition, SystemClock};
use flowstate_recovery::{Reason, Sweeper};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::recovery::queries::{IDLE, PAST_IDLE};
use crate::cases::steps::step_claims::held;
use crate::cases::support::{FUNCTION, assert_err, history_of, new_run, new_step, race};

/// Less than [`DEFAULT_CLAIM_TIMEOUT`] by a margin wider than the real time
/// a case takes.
const ALMOST: Duration = Duration::from_secs(9 * 60);

/// Past [`DEFAULT_CLAIM_TIMEOUT`] from [`ALMOST`].
const PAST: Duration = Duration::from_secs(2 * 60);

/// A claim runs out: before its deadline nothing is taken; after it the
/// attempt is failed with the claim-expired error (history too), the step
/// is retried as its next attempt by the next claim, and the old holder's
/// completion and heartbeat are lost while the new holder's are written.
pub async fn an_expired_claim_is_taken_back_and_retried<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let store = h.store();
    let run = new_run(h).await;
    let first = held(h, run.id, "a").await;
    h.clock().advance(ALMOST);
    assert!(store.expire_step_claims(0).await.unwrap().is_empty());
    h.clock().advance(PAST);
    let expired = store.expire_step_claims(0).await.unwrap();
    assert_eq!(expired.len(), 1, "{expired:?}");
    let taken = &expired[0];
    assert_eq!(
        (
            taken.run,
            taken.step,
            taken.name.as_str(),
            taken.attempt,
            taken.retrying
        ),
        (run.id, first.id, "a", 1, true)
    );
    assert_eq!(Some(taken.claimed_until), first.claimed_until);
    let failed = store.get_step(first.id).await.unwrap();
    assert_eq!(
        (
            failed.status,
            failed.attempt,
            &failed.error,
            failed.claimed_until
        ),
        (StepStatus::Failed, 1, &Some(claim_expired_error()), None)
    );
    let history = history_of(h, &failed).await;
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].status, &history[0].error),
        (StepStatus::Failed, &Some(claim_expired_error()))
    );
    assert!(
        store.expire_step_claims(0).await.unwrap().is_empty(),
        "taken once"
    );

    let retry = store
        .claim_step(run.id, "a", FUNCTION)
        .await
        .unwrap()
        .expect("the retry is claimable");
    assert_eq!(retry.attempt, 2);
    let late = StepTransition::Succeeded(json!("late"));
    assert_err!(
        store.transition_claimed(first.claim(), late).await,
        Error::ClaimLost { attempt: 1, .. }
    );
    assert_err!(
        store.renew_step_claim(first.claim()).await,
        Error::ClaimLost { attempt: 1, .. }
    );
    store
        .transition_claimed(retry.claim(), StepTransition::Succeeded(json!("ok")))
        .await
        .unwrap();
    let done = store.get_step(first.id).await.unwrap();
    assert_eq!(
        (done.status, &done.result),
        (StepStatus::Succeeded, &Some(json!("ok")))
    );
    assert_eq!(history_of(h, &done).await.len(), 2);
}

/// A claim that runs out on a step with no attempt left fails it for good:
/// the expiry says it will not be retried, and no claim takes it.
pub async fn an_expired_claim_with_no_attempt_left_fails_for_good<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let store = h.store();
    let run = new_run(h).await;
    let step = NewStep::new(run.id, "once", FUNCTION, json!({})).with_retry(RetryPolicy::NONE);
    store.insert_step(step).await.unwrap();
    store
        .claim_step(run.id, "once", FUNCTION)
        .await
        .unwrap()
        .expect("claimed");
    h.clock().advance(DEFAULT_CLAIM_TIMEOUT + PAST);
    let expired = store.expire_step_claims(0).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert!(!expired[0].retrying);
    assert_eq!(
        store.claim_step(run.id, "once", FUNCTION).await.unwrap(),
        None
    );
    let step = store.find_step(run.id, "once").await.unwrap();
    assert_eq!((step.status, step.attempt), (StepStatus::Failed, 1));
}

/// A renewed claim is not taken back at its old deadline, nor is a claim
/// completed or put to sleep; the step's own timeout decides its deadline.
pub async fn renewed_and_finished_claims_are_left_alone<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let store = h.store();
    let run = new_run(h).await;
    let renewed = held(h, run.id, "renewed").await;
    let done = held(h, run.id, "done").await;
    let asleep = held(h, run.id, "asleep").await;
    let short = NewStep::new(run.id, "short", FUNCTION, json!({}))
        .with_claim_timeout(Duration::from_secs(30));
    store.insert_step(short).await.unwrap();
    let short = store
        .claim_step(run.id, "short", FUNCTION)
        .await
        .unwrap()
        .expect("claimed");
    store
        .transition_claimed(done.claim(), StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    store
        .transition_claimed(asleep.claim(), StepTransition::Scheduled)
        .await
        .unwrap();
    h.clock().advance(ALMOST);
    store.renew_step_claim(renewed.claim()).await.unwrap();
    h.clock().advance(PAST);
    let expired = store.expire_step_claims(0).await.unwrap();
    let steps: Vec<_> = expired.iter().map(|claim| claim.step).collect();
    assert_eq!(steps, [short.id], "only the short claim ran out");
    for (step, status) in [
        (&renewed, StepStatus::Running),
        (&done, StepStatus::Succeeded),
        (&asleep, StepStatus::Scheduled),
    ] {
        assert_eq!(store.get_step(step.id).await.unwrap().status, status);
    }
}

/// The expiry takes at most its limit, first deadline first, and the rest
/// on the next call.
pub async fn expiry_honours_its_limit_first_deadline_first<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let store = h.store();
    let run = new_run(h).await;
    let mut names = Vec::new();
    for (name, secs) in [("third", 90), ("first", 30), ("second", 60)] {
        let step = NewStep::new(run.id, name, FUNCTION, json!({}))
            .with_claim_timeout(Duration::from_secs(secs));
        store.insert_step(step).await.unwrap();
        store
            .claim_step(run.id, name, FUNCTION)
            .await
            .unwrap()
            .expect("claimed");
        names.push(name);
    }
    h.clock().advance(Duration::from_secs(30 * 60));
    let two = store.expire_step_claims(2).await.unwrap();
    let named: Vec<&str> = two.iter().map(|claim| claim.name.as_str()).collect();
    assert_eq!(named, ["first", "second"]);
    let rest = store.expire_step_claims(2).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].name, "third");
}

/// 8 expiries race over 16 claims that ran out: each claim is taken back
/// by exactly one of them, and failed once.
pub async fn expire_step_claims_race_8<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = new_run(h).await;
    let mut ids = Vec::new();
    for i in 0..16 {
        ids.push(held(h, run.id, &format!("s{i}")).await.id);
    }
    h.clock().advance(DEFAULT_CLAIM_TIMEOUT + PAST);
    let taken = race(h.store(), 8, |store, _| async move {
        store
            .expire_step_claims(0)
            .await
            .expect("expire_step_claims")
    })
    .await;
    let mut all: Vec<_> = taken.iter().flatten().map(|claim| claim.step).collect();
    all.sort();
    ids.sort();
    assert_eq!(all, ids, "each claim taken back exactly once");
    for id in ids {
        let step = h.store().get_step(id).await.unwrap();
        assert_eq!((step.status, step.attempt), (StepStatus::Failed, 1));
    }
}

/// A [`Sweeper`] pass takes back the claims that ran out and re-drives the
/// run of each that will be retried, once, before the relay finds it.
pub async fn a_sweeper_pass_takes_back_claims_and_redrives_their_runs<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore + RunRecoveryStore + RunWaitStore,
{
    let run = new_run(h).await;
    held(h, run.id, "a").await;
    held(h, run.id, "b").await;
    h.clock().advance(DEFAULT_CLAIM_TIMEOUT + PAST);
    let sent: Arc<Mutex<Vec<(RunId, Reason)>>> = Arc::default();
    let log = Arc::clone(&sent);
    let dispatch = move |run, reason| {
        log.lock().unwrap().push((run, reason));
        std::future::ready(Ok::<(), String>(()))
    };
    let mut sweeper = Sweeper::new(Arc::clone(h.store()), dispatch, Arc::new(SystemClock));
    let pass = sweeper.pass().await.unwrap();
    assert_eq!(pass.expiry.expired.len(), 2);
    assert_eq!(pass.expiry.redrive.redispatched, [run.id]);
    assert_eq!(*sent.lock().unwrap(), [(run.id, Reason::ClaimExpired)]);
    let again = sweeper.pass().await.unwrap();
    assert!(again.expiry.expired.is_empty());
    assert_eq!(
        sent.lock().unwrap().len(),
        1,
        "held off by the shared backoff"
    );
}

/// One clock: a store handle whose own clock is ten minutes behind (or
/// ahead) finds the same idle steps, stalled runs and expired claims as
/// the harness's, because what is idle or expired is measured on the
/// store's lease clock, never on the asking process's.
pub async fn a_skewed_sweeper_finds_what_any_other_finds<H: LeaseHarness>(h: &H)
where
    H::Store: RecoveryStore,
{
    let run = new_run(h).await;
    new_step(h, run.id, "idle", 0).await;
    let busy = new_run(h).await;
    held(h, busy.id, "held").await;
    // Idle for ten minutes: a sweeper ten minutes behind that measured on
    // its own clock would see none of it idle.
    h.clock().advance(PAST_IDLE);
    let ten_minutes = 10 * 60 * 1_000_000;
    for skew in [-ten_minutes, ten_minutes] {
        let skewed = h.skewed_store(skew).await;
        let idle = skewed.undispatched_steps(IDLE, 0).await.unwrap();
        let idle: Vec<_> = idle.iter().map(|step| step.run).collect();
        assert_eq!(idle, [run.id], "skew {skew} us");
        let stalled = skewed.stalled_runs(IDLE, 0).await.unwrap();
        let stalled: Vec<_> = stalled.iter().map(|s| s.run).collect();
        assert_eq!(stalled, [run.id], "skew {skew} us");
    }
    h.clock().advance(PAST);
    let skewed = h.skewed_store(-ten_minutes).await;
    let expired = skewed.expire_step_claims(0).await.unwrap();
    assert_eq!(expired.len(), 1, "a sweeper ten minutes behind");
    assert_eq!(expired[0].run, busy.id);
}
