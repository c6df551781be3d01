//! [`FencedWrites`]: a lease holder's state writes, step inserts and
//! status moves carry its token, so a holder whose lease ran out and was
//! taken over writes nothing ([`Error::LeaseLost`]) and the new holder's
//! run is as the new holder leaves it; and a settled run takes no signal.

use flowstate_core::ports::{FencedWrites, RunLeaseStore, RunStore, RunWaitStore, StepStore};
use flowstate_core::{Error, NewStep, RunOutcome, RunStatus};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::leases::basics::{PAST_LEASE, claim};
use crate::cases::support::{FUNCTION, assert_err, new_run, snapshot};

/// Holder A's lease runs out and B takes the run over: every fenced write
/// of A's is lost and writes nothing; B's are written; A cannot settle the
/// run under B, and B's finish still works.
pub async fn a_stale_holder_writes_nothing<H: LeaseHarness>(h: &H)
where
    H::Store: FencedWrites,
{
    let store = h.store();
    let run = new_run(h).await;
    let a = claim(h, "a").await;
    store
        .write_state_fenced(run.id, a.token, "by", &json!("a"))
        .await
        .unwrap();
    let step = NewStep::new(run.id, "a.step", FUNCTION, json!({}));
    assert!(
        store
            .insert_step_fenced(a.token, step)
            .await
            .unwrap()
            .inserted
    );
    h.advance_lease_clock(PAST_LEASE).await;
    let b = claim(h, "b").await;
    assert_eq!(b.run.id, run.id);
    let before = snapshot(h, &[run.id]).await;

    assert_err!(
        store.write_state_fenced(run.id, a.token, "by", &json!("stale")).await,
        Error::LeaseLost { run: r, token } if r == run.id && token == a.token
    );
    let stale = NewStep::new(run.id, "stale.step", FUNCTION, json!({}));
    assert_err!(
        store.insert_step_fenced(a.token, stale).await,
        Error::LeaseLost { .. }
    );
    // A name already taken is answered only under the lease, too.
    let taken = NewStep::new(run.id, "a.step", FUNCTION, json!({}));
    assert_err!(
        store.insert_step_fenced(a.token, taken).await,
        Error::LeaseLost { .. }
    );
    assert_err!(
        store
            .set_run_status_fenced(run.id, a.token, RunStatus::Completed)
            .await,
        Error::LeaseLost { .. }
    );
    assert_eq!(snapshot(h, &[run.id]).await, before, "a stale holder wrote");

    store
        .write_state_fenced(run.id, b.token, "by", &json!("b"))
        .await
        .unwrap();
    let again = NewStep::new(run.id, "a.step", FUNCTION, json!({"other": 1}));
    let held = store.insert_step_fenced(b.token, again).await.unwrap();
    assert!(!held.inserted);
    let suspended = store
        .set_run_status_fenced(run.id, b.token, RunStatus::Suspended)
        .await
        .unwrap();
    assert_eq!(suspended.status, RunStatus::Suspended);
    store
        .set_run_status_fenced(run.id, b.token, RunStatus::Running)
        .await
        .unwrap();
    assert_eq!(store.read_state(run.id).await.unwrap()["by"], json!("b"));
    store
        .finish(run.id, b.token, RunOutcome::Completed)
        .await
        .unwrap();
    assert_eq!(
        store.get_run(run.id).await.unwrap().status,
        RunStatus::Completed
    );
}

/// A fenced write to a run that does not exist is not found; to a settled
/// run it is [`Error::RunSettled`], told before the lease, and writes
/// nothing; an illegal status move under a live lease is illegal.
pub async fn fenced_writes_refuse_unknown_and_settled_runs<H: LeaseHarness>(h: &H)
where
    H::Store: FencedWrites,
{
    let store = h.store();
    let missing = flowstate_core::RunId::generate();
    assert_err!(
        store.write_state_fenced(missing, 1, "k", &json!(1)).await,
        Error::RunNotFound(id) if id == missing
    );
    let step = NewStep::new(missing, "s", FUNCTION, json!({}));
    assert_err!(
        store.insert_step_fenced(1, step).await,
        Error::RunNotFound(_)
    );
    assert_err!(
        store
            .set_run_status_fenced(missing, 1, RunStatus::Failed)
            .await,
        Error::RunNotFound(_)
    );

    let run = new_run(h).await;
    let lease = claim(h, "w").await;
    assert_err!(
        store
            .set_run_status_fenced(run.id, lease.token, RunStatus::Running)
            .await,
        Error::IllegalRunTransition { .. }
    );
    store
        .finish(run.id, lease.token, RunOutcome::Completed)
        .await
        .unwrap();
    let before = snapshot(h, &[run.id]).await;
    assert_err!(
        store
            .write_state_fenced(run.id, lease.token, "k", &json!(1))
            .await,
        Error::RunSettled {
            status: RunStatus::Completed,
            ..
        }
    );
    let step = NewStep::new(run.id, "late", FUNCTION, json!({}));
    assert_err!(
        store.insert_step_fenced(lease.token, step).await,
        Error::RunSettled { .. }
    );
    assert_err!(
        store
            .set_run_status_fenced(run.id, lease.token, RunStatus::Failed)
            .await,
        Error::RunSettled { .. }
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// A settled run takes no signal; an unsettled one does.
pub async fn a_settled_run_takes_no_signal<H: LeaseHarness>(h: &H)
where
    H::Store: RunWaitStore,
{
    let store = h.store();
    let open = new_run(h).await;
    store.signal(open.id, "go", &json!(1)).await.unwrap();
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let run = new_run(h).await;
        store.set_run_status(run.id, status).await.unwrap();
        assert_err!(
            store.signal(run.id, "go", &json!(1)).await,
            Error::RunSettled { status: s, .. } if s == status
        );
    }
    let missing = flowstate_core::RunId::generate();
    assert_err!(
        store.signal(missing, "go", &json!(1)).await,
        Error::RunNotFound(_)
    );
    assert!(store.list_steps(open.id).await.unwrap().is_empty());
}
