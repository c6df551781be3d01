//! A settled run's steps are not batch-claimed: the batch half of
//! `steps::settled_runs`.

use flowstate_core::RunStatus;
use flowstate_core::ports::{RunStore, StepStore};

use crate::Harness;
use crate::cases::support::{new_run, new_step};

/// A batch claim takes no step of a settled run: they stay as they were,
/// and a second claim finds nothing either.
pub async fn claim_batch_leaves_settled_runs<H: Harness>(h: &H)
where
    H::Store: flowstate_core::ports::BatchStepStore,
{
    use flowstate_core::BatchClaim;
    use flowstate_core::ports::BatchStepStore;
    let store = h.store();
    let settled = new_run(h).await;
    let left = new_step(h, settled.id, "left", 0).await;
    store
        .set_run_status(settled.id, RunStatus::Completed)
        .await
        .unwrap();
    let open = new_run(h).await;
    let taken = new_step(h, open.id, "taken", 0).await;
    let claimed = store.claim_batch(&BatchClaim::new(10)).await.unwrap();
    let ids: Vec<_> = claimed.iter().map(|step| step.id).collect();
    assert_eq!(ids, [taken.id]);
    assert_eq!(store.get_step(left.id).await.unwrap(), left);
    assert!(
        store
            .claim_batch(&BatchClaim::new(10))
            .await
            .unwrap()
            .is_empty()
    );
}
