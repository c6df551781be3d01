//! Bad JSON: values over the size limit or holding a NUL are refused with
//! `InvalidInput` before anything is written, by every method that stores
//! JSON.

use flowstate_core::error::InvalidInput;
use flowstate_core::{
    Error, InputLimits, NewRun, NewStep, NewWorkflowVersion, Result, RunId, RunStore, StepId,
    StepStatus, StepStore, StepTransition, VersionStore,
};
use serde_json::{Value, json};

use super::support::{FUNCTION, new_run, snapshot, step_in};
use crate::Harness;

/// Stores `value` through every method that takes JSON, on a run with a
/// running step, and answers what each call said.
async fn store_json<H: Harness>(
    h: &H,
    run: RunId,
    step: StepId,
    value: &Value,
) -> Vec<(&'static str, Result<()>)> {
    let store = h.store();
    let new_run = NewRun::new("wf", value.clone());
    let new_step = NewStep::new(run, "fresh", FUNCTION, value.clone());
    let new_version = NewWorkflowVersion {
        workflow: "wf".into(),
        graph_hash: "hash1".into(),
        graph: value.clone(),
    };
    let succeeded = StepTransition::Succeeded(value.clone());
    let failed = StepTransition::Failed(value.clone());
    vec![
        ("create_run", store.create_run(new_run).await.map(drop)),
        ("write_state", store.write_state(run, "k", value).await),
        ("insert_step", store.insert_step(new_step).await.map(drop)),
        ("succeeded", store.transition_step(step, succeeded).await),
        ("failed", store.transition_step(step, failed).await),
        (
            "upsert_version",
            store.upsert_version(new_version).await.map(drop),
        ),
    ]
}

/// Checks that `value` is refused everywhere as `expected` says, and that
/// nothing was written.
async fn refused_everywhere<H: Harness>(h: &H, value: &Value, expected: fn(&InvalidInput) -> bool) {
    let run = new_run(h).await;
    let step = step_in(h, run.id, "s1", StepStatus::Running).await;
    let before = snapshot(h, &[run.id]).await;
    for (method, outcome) in store_json(h, run.id, step.id, value).await {
        match outcome {
            Err(Error::InvalidInput(refusal)) if expected(&refusal) => {}
            other => panic!("{method} took or misreported a bad value: {other:?}"),
        }
    }
    assert_eq!(snapshot(h, &[run.id]).await, before);
    assert_eq!(h.store().get_version("wf", "hash1").await.unwrap(), None);
}

/// A value one byte over the limit is `TooLarge` everywhere, nothing
/// written.
pub async fn oversized_json_is_refused<H: Harness>(h: &H) {
    let limit = InputLimits::default().max_value_bytes;
    // A string of `limit - 1` characters serialises to `limit + 1` bytes.
    let value = json!("x".repeat(limit - 1));
    refused_everywhere(h, &value, |refusal| {
        matches!(refusal, InvalidInput::TooLarge { bytes, limit: l, .. } if *bytes == l + 1)
    })
    .await;
}

/// A value of exactly the limit is stored and read back whole.
pub async fn json_at_the_limit_is_stored<H: Harness>(h: &H) {
    let limit = InputLimits::default().max_value_bytes;
    let value = json!({"a": "y".repeat(limit - 8)});
    assert_eq!(value.to_string().len(), limit);
    let run = new_run(h).await;
    h.store().write_state(run.id, "big", &value).await.unwrap();
    let state = h.store().read_state(run.id).await.unwrap();
    assert_eq!(state.get("big"), Some(&value));
}

/// A NUL anywhere in a string value is `NulCharacter` everywhere, nothing
/// written.
pub async fn nul_in_json_string_is_refused<H: Harness>(h: &H) {
    let value = json!({"a": ["ok", "x\u{0}y"]});
    refused_everywhere(h, &value, |r| {
        matches!(r, InvalidInput::NulCharacter { .. })
    })
    .await;
}

/// A NUL in an object key of a value is `NulCharacter` everywhere, nothing
/// written.
pub async fn nul_in_json_key_is_refused<H: Harness>(h: &H) {
    let value = json!({"nested": {"k\u{0}": 1}});
    refused_everywhere(h, &value, |r| {
        matches!(r, InvalidInput::NulCharacter { .. })
    })
    .await;
}

/// Text that merely spells `\u0000` is not a NUL and is stored as given.
pub async fn escaped_nul_text_is_stored<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let value = json!({"text": "\\u0000", "\\u0000": true});
    h.store().write_state(run.id, "k", &value).await.unwrap();
    let state = h.store().read_state(run.id).await.unwrap();
    assert_eq!(state.get("k"), Some(&value));
}
