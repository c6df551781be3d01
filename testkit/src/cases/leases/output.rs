//! [`RunLeaseStore::finish_with_output`]: the lease holder settles its run
//! and records its output in one fenced write.

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunLeaseStore, RunStore};
use flowstate_core::{Error, InputLimits, RunId, RunOutcome, RunStatus};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::leases::basics::{PAST_LEASE, claim};
use crate::cases::support::{assert_err, new_run};

/// The holder's finish records the output with the status, read back from
/// a fresh read; a later plain finish of another run leaves its output
/// `None`.
pub async fn finish_with_output_records_the_output<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let lease = claim(h, "w1").await;
    let output = json!({"answer": 42, "parts": ["a", null]});
    h.store()
        .finish_with_output(run.id, lease.token, RunOutcome::Completed, &output)
        .await
        .unwrap();
    let read = h.store().get_run(run.id).await.unwrap();
    assert_eq!(read.status, RunStatus::Completed);
    assert_eq!(read.output, Some(output));

    let plain = new_run(h).await;
    let lease = claim(h, "w1").await;
    h.store()
        .finish(plain.id, lease.token, RunOutcome::Completed)
        .await
        .unwrap();
    assert_eq!(h.store().get_run(plain.id).await.unwrap().output, None);
}

/// A stale token is `LeaseLost` and writes neither status nor output; an
/// unknown run is `RunNotFound`; an output over the limits is
/// `InvalidInput` and writes nothing.
pub async fn finish_with_output_guards<H: LeaseHarness>(h: &H) {
    let run = new_run(h).await;
    let old = claim(h, "old").await;
    h.advance_lease_clock(PAST_LEASE).await;
    let new = claim(h, "new").await;
    assert_err!(
        h.store()
            .finish_with_output(run.id, old.token, RunOutcome::Completed, &json!(1))
            .await,
        Error::LeaseLost { .. }
    );
    let read = h.store().get_run(run.id).await.unwrap();
    assert_eq!((read.status, read.output), (RunStatus::Running, None));

    let too_big = json!("x".repeat(InputLimits::default().max_value_bytes + 1));
    assert_err!(
        h.store()
            .finish_with_output(run.id, new.token, RunOutcome::Completed, &too_big)
            .await,
        Error::InvalidInput(InvalidInput::TooLarge {
            field: "run output",
            ..
        })
    );
    assert_eq!(h.store().get_run(run.id).await.unwrap().output, None);

    let missing = RunId::generate();
    assert_err!(
        h.store()
            .finish_with_output(missing, 1, RunOutcome::Completed, &json!(1))
            .await,
        Error::RunNotFound(r) if r == missing
    );
}
