//! Case and byte exactness: names and keys that differ only by case or by
//! a trailing space are different values everywhere a store keeps them (a
//! case-insensitive or PAD SPACE collation makes them one, and a backend on
//! such a column fails these).

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{Error, NewRun, NewStep, RunQuery, StepStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, assert_err, new_run, snapshot};

/// Three spellings of one word: as is, in capitals, with a trailing space.
const SPELLINGS: [&str; 3] = ["total", "TOTAL", "total "];

/// State keys that differ by case or a trailing space are three keys.
pub async fn state_keys_are_exact<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    for (i, key) in SPELLINGS.iter().enumerate() {
        store.write_state(run.id, key, &json!(i)).await.unwrap();
    }
    let state = store.read_state(run.id).await.unwrap();
    assert_eq!(state.len(), 3, "{state:?}");
    for (i, key) in SPELLINGS.iter().enumerate() {
        assert_eq!(state.get(*key), Some(&json!(i)), "key {key:?}");
    }
}

/// Step names that differ by case or a trailing space are three steps, and
/// each is found and claimed by its own name only.
pub async fn step_names_are_exact<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let mut ids = Vec::new();
    for name in SPELLINGS {
        let step = NewStep::new(run.id, name, FUNCTION, json!({}));
        let inserted = store.insert_step(step).await.unwrap();
        assert!(inserted.inserted, "{name:?} is a name of its own");
        ids.push(inserted.record.id);
    }
    for (name, id) in SPELLINGS.iter().zip(&ids) {
        assert_eq!(store.find_step(run.id, name).await.unwrap().id, *id);
    }
    assert_err!(
        store.find_step(run.id, "Total").await,
        Error::StepNameNotFound { .. }
    );
    let claimed = store.claim_step(run.id, "TOTAL", FUNCTION).await.unwrap();
    assert_eq!(claimed.map(|s| s.id), Some(ids[1]));
    // Whichever row a case-blind claim answers, it moved the others too.
    for (name, id) in SPELLINGS.iter().zip(&ids) {
        let status = store.get_step(*id).await.unwrap().status;
        let expected = if *name == "TOTAL" {
            StepStatus::Running
        } else {
            StepStatus::Pending
        };
        assert_eq!(status, expected, "{name:?} after claiming \"TOTAL\"");
    }
    assert_eq!(store.list_steps(run.id).await.unwrap().len(), 3);
}

/// Idempotency keys that differ by case or a trailing space make three
/// runs.
pub async fn idempotency_keys_are_exact<H: Harness>(h: &H) {
    let store = h.store();
    let mut ids = Vec::new();
    for key in SPELLINGS {
        let run = NewRun::new("wf", json!({})).with_idempotency_key(key);
        let created = store.create_run(run).await.unwrap();
        assert!(created.inserted, "{key:?} is a key of its own");
        ids.push(created.record.id);
    }
    for (key, id) in SPELLINGS.iter().zip(&ids) {
        let again = NewRun::new("wf", json!({})).with_idempotency_key(*key);
        let again = store.create_run(again).await.unwrap();
        assert_eq!((again.inserted, again.record.id), (false, *id));
    }
}

/// A claim naming the step's function in another case, or with a trailing
/// space, is a mismatch and leaves the step untouched.
pub async fn function_names_are_exact<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let step = NewStep::new(run.id, "s", FUNCTION, json!({}));
    store.insert_step(step).await.unwrap();
    let before = snapshot(h, &[run.id]).await;
    for claimed in ["RPC.fn", "rpc.FN", "rpc.fn "] {
        assert_err!(
            store.claim_step(run.id, "s", claimed).await,
            Error::FunctionMismatch { claimed: c, .. } if c == claimed
        );
    }
    assert_eq!(snapshot(h, &[run.id]).await, before);
    assert!(
        store
            .claim_step(run.id, "s", FUNCTION)
            .await
            .unwrap()
            .is_some()
    );
}

/// The workflow filter of `list_runs` matches its exact spelling only.
pub async fn workflow_filter_is_exact<H: Harness>(h: &H) {
    let store = h.store();
    let mut ids = Vec::new();
    for workflow in SPELLINGS {
        let run = store.create_run(NewRun::new(workflow, json!({}))).await;
        ids.push(run.unwrap().record.id);
    }
    for (workflow, id) in SPELLINGS.iter().zip(&ids) {
        let query = RunQuery {
            workflow: Some((*workflow).to_owned()),
            ..RunQuery::default()
        };
        let listed: Vec<_> = store.list_runs(&query).await.unwrap().items;
        assert_eq!(
            listed.iter().map(|r| r.id).collect::<Vec<_>>(),
            [*id],
            "{workflow:?}"
        );
    }
}
