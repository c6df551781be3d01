//! [`ChildRunStore`]: children created in bulk, once per key however many
//! calls race, counted by status, and a parent that waits until its
//! children are settled.

use std::collections::BTreeMap;

use flowstate_core::ports::{ChildRunStore, RunLeaseStore, RunStore, RunWaitStore};
use flowstate_core::wait::Wait;
use flowstate_core::{Error, NewChild, RunId, RunOutcome, RunStatus};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::leases::basics::{LEASE, claim};
use crate::cases::support::{assert_err, new_run, race};

/// Children `keys` running workflow `child`.
fn children(keys: &[&str]) -> Vec<NewChild> {
    keys.iter()
        .map(|key| NewChild::new(*key, "child", json!({ "key": key })))
        .collect()
}

/// A second call with overlapping keys creates only the new ones and
/// answers the existing ones unchanged, in the order asked.
pub async fn create_children_is_idempotent_per_key<H: LeaseHarness>(h: &H)
where
    H::Store: ChildRunStore,
{
    let parent = new_run(h).await;
    let first = h
        .store()
        .create_children(parent.id, children(&["a", "b", "c"]))
        .await
        .unwrap();
    assert!(first.iter().all(|c| c.inserted));
    assert!(first.iter().all(|c| c.record.parent == Some(parent.id)));
    assert_eq!(first[1].record.input, json!({"key": "b"}));
    let second = h
        .store()
        .create_children(parent.id, children(&["c", "d", "b"]))
        .await
        .unwrap();
    let inserted: Vec<bool> = second.iter().map(|c| c.inserted).collect();
    assert_eq!(inserted, [false, true, false]);
    assert_eq!(second[0].record, first[2].record);
    assert_eq!(second[2].record, first[1].record);
    let counts = h.store().count_children(parent.id).await.unwrap();
    assert_eq!(counts, BTreeMap::from([(RunStatus::Running, 4)]));
    // Keys are per parent.
    let other = new_run(h).await;
    let theirs = h
        .store()
        .create_children(other.id, children(&["a"]))
        .await
        .unwrap();
    assert!(theirs[0].inserted);
    assert_ne!(theirs[0].record.id, first[0].record.id);
}

/// Children of a parent that does not exist are refused, none created; an
/// empty batch is bad input.
pub async fn create_children_of_unknown_parent<H: LeaseHarness>(h: &H)
where
    H::Store: ChildRunStore,
{
    let missing = RunId::generate();
    assert_err!(
        h.store().create_children(missing, children(&["a"])).await,
        Error::RunNotFound(r) if r == missing
    );
    assert!(h.store().claim_run("w", LEASE).await.unwrap().is_none());
    let parent = new_run(h).await;
    assert_err!(
        h.store().create_children(parent.id, Vec::new()).await,
        Error::InvalidInput(_)
    );
}

/// Sixteen racing calls with the same keys create each child once.
pub async fn create_children_race_16<H: LeaseHarness>(h: &H)
where
    H::Store: ChildRunStore,
{
    let parent = new_run(h).await.id;
    let answers = race(h.store(), 16, |store, _| async move {
        store
            .create_children(parent, children(&["a", "b", "c", "d"]))
            .await
            .expect("a racing create is not an error")
    })
    .await;
    for i in 0..4 {
        let ids: std::collections::BTreeSet<RunId> =
            answers.iter().map(|a| a[i].record.id).collect();
        assert_eq!(ids.len(), 1, "child {i} was created more than once");
        let winners = answers.iter().filter(|a| a[i].inserted).count();
        assert_eq!(winners, 1, "child {i} was inserted by {winners} calls");
    }
    let counts = h.store().count_children(parent).await.unwrap();
    assert_eq!(counts, BTreeMap::from([(RunStatus::Running, 4)]));
}

/// A parent waiting on its children is claimed only once all are settled.
pub async fn parent_waits_until_children_settle<H: LeaseHarness>(h: &H)
where
    H::Store: ChildRunStore,
{
    let parent = new_run(h).await;
    let held = claim(h, "parent").await;
    assert_eq!(held.run.id, parent.id);
    h.store()
        .create_children(parent.id, children(&["a", "b"]))
        .await
        .unwrap();
    h.store()
        .wait(parent.id, held.token, Wait::Children { timeout: None })
        .await
        .unwrap();
    let first = claim(h, "w").await;
    let second = claim(h, "w").await;
    assert_eq!(first.run.parent, Some(parent.id));
    assert_eq!(second.run.parent, Some(parent.id));
    assert!(h.store().claim_run("w", LEASE).await.unwrap().is_none());
    h.store()
        .finish(first.run.id, first.token, RunOutcome::Completed)
        .await
        .unwrap();
    assert!(
        h.store().claim_run("w", LEASE).await.unwrap().is_none(),
        "the parent woke with a child unsettled"
    );
    h.store()
        .finish(
            second.run.id,
            second.token,
            RunOutcome::Failed {
                reason: "no".into(),
            },
        )
        .await
        .unwrap();
    let woke = claim(h, "parent").await;
    assert_eq!((woke.run.id, woke.token), (parent.id, held.token + 1));
    let counts = h.store().count_children(parent.id).await.unwrap();
    assert_eq!(
        counts,
        BTreeMap::from([(RunStatus::Completed, 1), (RunStatus::Failed, 1)])
    );
}
