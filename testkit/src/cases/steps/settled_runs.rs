//! A settled run (completed, failed, cancelled) takes no more work: claims
//! of its claimable steps, new steps and state writes are
//! [`Error::RunSettled`] and write nothing, while reads go on. A claim of a
//! step with nothing to claim (running, succeeded, out of attempts) answers
//! `None` as in any run: a duplicate delivery of a finished step is a no-op
//! before and after its run settles.

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{
    ClaimOutcome, Error, NewStep, NotClaimable, RunStatus, StepStatus, StepTransition,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, new_run, new_step, snapshot, step_in};

/// Every settled status refuses claims (of a pending, a scheduled and a
/// retryable step), inserts and state writes, and nothing moves; a claim
/// naming an unknown step or another function says that first; a claim of
/// a running, succeeded or spent step answers why it took nothing.
pub async fn settled_runs_refuse_new_work<H: Harness>(h: &H) {
    let store = h.store();
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let run = new_run(h).await;
        new_step(h, run.id, "pending", 0).await;
        step_in(h, run.id, "scheduled", StepStatus::Scheduled).await;
        let retryable = new_step(h, run.id, "retryable", 2).await;
        for transition in [StepTransition::Running, StepTransition::Failed(json!("x"))] {
            store
                .transition_step(retryable.id, transition)
                .await
                .unwrap();
        }
        step_in(h, run.id, "held", StepStatus::Running).await;
        step_in(h, run.id, "done", StepStatus::Succeeded).await;
        step_in(h, run.id, "spent", StepStatus::Failed).await;
        store.write_state(run.id, "k", &json!(1)).await.unwrap();
        store.set_run_status(run.id, status).await.unwrap();
        let before = snapshot(h, &[run.id]).await;

        for name in ["pending", "scheduled", "retryable"] {
            assert_err!(
                store.claim_step(run.id, name, FUNCTION).await,
                Error::RunSettled { run: r, status: s } if r == run.id && s == status
            );
            assert_err!(
                store.claim_step_outcome(run.id, name, FUNCTION).await,
                Error::RunSettled { .. }
            );
        }
        for (name, why) in [
            ("held", NotClaimable::Running),
            ("done", NotClaimable::Succeeded),
            ("spent", NotClaimable::RetriesExhausted),
        ] {
            assert_eq!(
                store.claim_step(run.id, name, FUNCTION).await.unwrap(),
                None,
                "{status}: a claim of {name}"
            );
            assert_eq!(
                store
                    .claim_step_outcome(run.id, name, FUNCTION)
                    .await
                    .unwrap(),
                ClaimOutcome::NotClaimed(why),
                "{status}: why {name} was not claimed"
            );
        }
        assert_err!(
            store.claim_step(run.id, "pending", "rpc.other").await,
            Error::FunctionMismatch { .. }
        );
        assert_err!(
            store.claim_step(run.id, "nope", FUNCTION).await,
            Error::StepNameNotFound { .. }
        );
        let fresh = NewStep::new(run.id, "fresh", FUNCTION, json!({}));
        assert_err!(
            store.insert_step(fresh).await,
            Error::RunSettled { status: s, .. } if s == status
        );
        // A name already taken answers the run's refusal too, not the step.
        let again = NewStep::new(run.id, "pending", FUNCTION, json!({}));
        assert_err!(store.insert_step(again).await, Error::RunSettled { .. });
        assert_err!(
            store.write_state(run.id, "k", &json!(2)).await,
            Error::RunSettled { .. }
        );
        assert_err!(
            store.write_state(run.id, "new", &json!(3)).await,
            Error::RunSettled { .. }
        );
        assert_eq!(
            snapshot(h, &[run.id]).await,
            before,
            "{status}: a refusal wrote"
        );
        assert_eq!(store.read_state(run.id).await.unwrap()["k"], json!(1));
    }
}

/// A run's steps stay claimable while it is suspended (not settled), and a
/// running step of a run settled meanwhile may still be completed by its
/// holder: the refusal is of new work, not of work in flight.
pub async fn unsettled_runs_and_work_in_flight_go_on<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    new_step(h, run.id, "a", 0).await;
    new_step(h, run.id, "b", 0).await;
    store
        .set_run_status(run.id, RunStatus::Suspended)
        .await
        .unwrap();
    let a = store
        .claim_step(run.id, "a", FUNCTION)
        .await
        .unwrap()
        .expect("a suspended run's step is claimable");
    store.write_state(run.id, "k", &json!(true)).await.unwrap();
    store
        .set_run_status(run.id, RunStatus::Cancelled)
        .await
        .unwrap();
    store
        .transition_claimed(a.claim(), StepTransition::Succeeded(json!(1)))
        .await
        .unwrap();
    assert_eq!(
        store.get_step(a.id).await.unwrap().status,
        StepStatus::Succeeded
    );
    assert_err!(
        store.claim_step(run.id, "b", FUNCTION).await,
        Error::RunSettled {
            status: RunStatus::Cancelled,
            ..
        }
    );
}
