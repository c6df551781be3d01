//! Bad names and keys: empty, holding a NUL or over the length limit, they
//! are refused with `InvalidInput` before anything is written, by every
//! method that takes one.

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{RunStore, StepStore, VersionStore};
use flowstate_core::{
    Error, InputLimits, NewRun, NewStep, NewWorkflowVersion, Result, RunQuery, StepStatus,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, snapshot, step_in};

/// Passes `name` in every name or key slot of every method, on a run with a
/// pending step `s1`, checks each call is refused as `expected` says, and
/// that nothing was written.
async fn refused_everywhere<H: Harness>(h: &H, name: &str, expected: fn(&InvalidInput) -> bool) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Pending).await;
    let before = snapshot(h, &[run.id]).await;
    let store = h.store();
    let version = |workflow: &str, hash: &str| NewWorkflowVersion {
        workflow: workflow.into(),
        graph_hash: hash.into(),
        graph: json!(1),
    };
    let filter = RunQuery {
        workflow: Some(name.into()),
        ..RunQuery::default()
    };
    let outcomes: Vec<(&str, Result<()>)> = vec![
        (
            "workflow",
            store
                .create_run(NewRun::new(name, json!(1)))
                .await
                .map(drop),
        ),
        (
            "idempotency key",
            store
                .create_run(NewRun::new("wf", json!(1)).with_idempotency_key(name))
                .await
                .map(drop),
        ),
        (
            "graph hash",
            store
                .create_run(NewRun::new("wf", json!(1)).with_graph_hash(name))
                .await
                .map(drop),
        ),
        ("list filter", store.list_runs(&filter).await.map(drop)),
        (
            "state key",
            store.write_state(run.id, name, &json!(1)).await,
        ),
        (
            "step name",
            store
                .insert_step(NewStep::new(run.id, name, FUNCTION, json!(1)))
                .await
                .map(drop),
        ),
        (
            "function",
            store
                .insert_step(NewStep::new(run.id, "s2", name, json!(1)))
                .await
                .map(drop),
        ),
        ("find name", store.find_step(run.id, name).await.map(drop)),
        (
            "claim name",
            store.claim_step(run.id, name, FUNCTION).await.map(drop),
        ),
        (
            "claim function",
            store.claim_step(run.id, "s1", name).await.map(drop),
        ),
        ("branch", store.set_branch_taken(step.id, name).await),
        (
            "version workflow",
            store.upsert_version(version(name, "h")).await.map(drop),
        ),
        (
            "version hash",
            store.upsert_version(version("wf", name)).await.map(drop),
        ),
        ("get workflow", store.get_version(name, "h").await.map(drop)),
        ("get hash", store.get_version("wf", name).await.map(drop)),
    ];
    for (slot, outcome) in outcomes {
        match outcome {
            Err(Error::InvalidInput(refusal)) if expected(&refusal) => {}
            other => panic!("the {slot} slot took or misreported {name:?}: {other:?}"),
        }
    }
    assert_eq!(snapshot(h, &[run.id]).await, before);
}

/// An empty name or key is `Empty` everywhere, nothing written.
pub async fn empty_names_are_refused<H: Harness>(h: &H) {
    refused_everywhere(h, "", |r| matches!(r, InvalidInput::Empty { .. })).await;
}

/// A name or key holding a NUL is `NulCharacter` everywhere, nothing
/// written.
pub async fn nul_in_names_is_refused<H: Harness>(h: &H) {
    refused_everywhere(h, "a\u{0}b", |r| {
        matches!(r, InvalidInput::NulCharacter { .. })
    })
    .await;
}

/// A name or key one byte over the limit is `TooLarge` everywhere, nothing
/// written.
pub async fn oversized_names_are_refused<H: Harness>(h: &H) {
    let limit = InputLimits::default().max_key_bytes;
    let name = "k".repeat(limit + 1);
    refused_everywhere(h, &name, |refusal| {
        matches!(refusal, InvalidInput::TooLarge { bytes, limit: l, .. } if *bytes == l + 1)
    })
    .await;
}

/// Names and keys of exactly the limit are stored and read back whole.
pub async fn names_at_the_limit_are_stored<H: Harness>(h: &H) {
    let name = "k".repeat(InputLimits::default().max_key_bytes);
    let store = h.store();
    let run = NewRun::new(name.clone(), json!(1))
        .with_idempotency_key(name.clone())
        .with_graph_hash(name.clone());
    let run = store.create_run(run).await.unwrap().record;
    assert_eq!(store.get_run(run.id).await.unwrap().workflow, name);
    store.write_state(run.id, &name, &json!(1)).await.unwrap();
    assert_eq!(
        store.read_state(run.id).await.unwrap().get(&name),
        Some(&json!(1))
    );
    let step = NewStep::new(run.id, name.clone(), name.clone(), json!(1));
    let step = store.insert_step(step).await.unwrap().record;
    store.set_branch_taken(step.id, &name).await.unwrap();
    let claimed = store
        .claim_step(run.id, &name, &name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.branch.as_deref(), Some(name.as_str()));
    assert_eq!(claimed.function.as_deref(), Some(name.as_str()));
}
