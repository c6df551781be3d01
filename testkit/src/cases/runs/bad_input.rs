//! Bad JSON: values over the size limit, nested deeper than the depth limit
//! or holding a NUL are refused with `InvalidInput` before anything is
//! written, by every method that stores JSON; values exactly at a limit are
//! stored and read back whole.

use flowstate_core::error::InvalidInput;
use flowstate_core::limits::dismantle_json;
use flowstate_core::ports::{RunStore, StepStore, VersionStore};
use flowstate_core::{
    Error, InputLimits, NewRun, NewStep, NewWorkflowVersion, Result, RunId, RunQuery, StepId,
    StepStatus, StepTransition,
};
use serde_json::{Map, Value, json};

use crate::Harness;
use crate::cases::support::{FUNCTION, new_run, snapshot, step_in};

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

/// A value nested exactly `levels` deep (a scalar is 0), built in a loop:
/// objects and arrays in turn, each holding a sibling scalar too, around a
/// string leaf.
fn nested(levels: usize) -> Value {
    let mut value = json!("leaf");
    for level in 0..levels {
        value = if level % 2 == 0 {
            Value::Array(vec![json!(level), value])
        } else {
            let mut fields = Map::new();
            fields.insert("n".to_owned(), json!(level));
            fields.insert("inner".to_owned(), value);
            Value::Object(fields)
        };
    }
    value
}

/// JSON exactly [`InputLimits::max_json_depth`] deep is stored by every
/// method that takes JSON and reads back equal through every read of it.
pub async fn json_at_the_depth_limit_is_stored<H: Harness>(h: &H) {
    let value = nested(InputLimits::default().max_json_depth);
    let store = h.store();
    let run = store
        .create_run(NewRun::new("deep", value.clone()))
        .await
        .expect("create_run at the depth limit")
        .record;
    assert_eq!(run.input, value, "create_run's answer");
    assert_eq!(store.get_run(run.id).await.unwrap().input, value, "get_run");
    let listed = store
        .list_runs(&RunQuery {
            workflow: Some("deep".into()),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].input, value, "list_runs");

    store.write_state(run.id, "deep", &value).await.unwrap();
    let state = store.read_state(run.id).await.unwrap();
    assert_eq!(state.get("deep"), Some(&value), "read_state");

    let step = store
        .insert_step(NewStep::new(run.id, "deep", FUNCTION, value.clone()))
        .await
        .expect("insert_step at the depth limit")
        .record;
    assert_eq!(
        store.get_step(step.id).await.unwrap().input,
        value,
        "get_step"
    );

    let succeeded = step_in(h, run.id, "ok", StepStatus::Running).await;
    let failed = step_in(h, run.id, "bad", StepStatus::Running).await;
    let moves = [
        (succeeded.id, StepTransition::Succeeded(value.clone())),
        (failed.id, StepTransition::Failed(value.clone())),
    ];
    for (id, transition) in moves {
        store.transition_step(id, transition).await.unwrap();
    }
    let read = store.get_step(succeeded.id).await.unwrap();
    assert_eq!(read.result.as_ref(), Some(&value), "result");
    let read = store.get_step(failed.id).await.unwrap();
    assert_eq!(read.error.as_ref(), Some(&value), "error");
    let history = store.step_history(run.id).await.unwrap();
    let of = |id| {
        history
            .iter()
            .find(|row| row.step == id)
            .expect("a history row")
    };
    assert_eq!(
        of(succeeded.id).result.as_ref(),
        Some(&value),
        "history result"
    );
    assert_eq!(of(failed.id).error.as_ref(), Some(&value), "history error");

    let version = NewWorkflowVersion {
        workflow: "deep".into(),
        graph_hash: "h".into(),
        graph: value.clone(),
    };
    store.upsert_version(version).await.unwrap();
    let read = store
        .get_version("deep", "h")
        .await
        .unwrap()
        .expect("the version");
    assert_eq!(read.graph, value, "get_version");
}

/// JSON one level deeper than the limit is `TooDeep` everywhere, naming
/// the limit, and nothing is written.
pub async fn json_one_level_too_deep_is_refused<H: Harness>(h: &H) {
    let value = nested(InputLimits::default().max_json_depth + 1);
    refused_everywhere(h, &value, |refusal| {
        matches!(refusal, InvalidInput::TooDeep { limit, .. }
            if *limit == InputLimits::default().max_json_depth)
    })
    .await;
}

/// JSON 100,000 levels deep is `TooDeep`, not a stack overflow, through a
/// call that borrows it and through every call that takes it by value (the
/// depth is measured without recursion before anything serialises the
/// value, and a store drops a refused value without recursion too), and
/// nothing is written.
pub async fn json_100000_levels_deep_is_refused_without_overflow<H: Harness>(h: &H) {
    let store = h.store();
    let run = new_run(h).await;
    let step = step_in(h, run.id, "held", StepStatus::Running).await;
    let before = snapshot(h, &[run.id]).await;
    let deep = || nested(100_000);
    let is_too_deep = |outcome: &Result<()>, what: &str| {
        assert!(
            matches!(
                outcome,
                Err(Error::InvalidInput(InvalidInput::TooDeep { limit, .. }))
                    if *limit == InputLimits::default().max_json_depth
            ),
            "{what}: {outcome:?}"
        );
    };
    let value = deep();
    let outcome = store.write_state(run.id, "k", &value).await;
    // Dismantled in a loop before anything can panic: unwinding would drop
    // it recursively.
    dismantle_json(value);
    is_too_deep(&outcome, "write_state");
    let outcome = store.create_run(NewRun::new("wf", deep())).await.map(drop);
    is_too_deep(&outcome, "create_run");
    let step_in_run = NewStep::new(run.id, "deep", FUNCTION, deep());
    is_too_deep(
        &store.insert_step(step_in_run).await.map(drop),
        "insert_step",
    );
    let failed = StepTransition::Failed(deep());
    is_too_deep(
        &store.transition_step(step.id, failed).await,
        "transition_step",
    );
    let done = StepTransition::Succeeded(deep());
    is_too_deep(
        &store.transition_claimed(step.claim(), done).await,
        "transition_claimed",
    );
    let version = NewWorkflowVersion {
        workflow: "wf".to_owned(),
        graph_hash: "deep".to_owned(),
        graph: deep(),
    };
    is_too_deep(
        &store.upsert_version(version).await.map(drop),
        "upsert_version",
    );
    assert_eq!(snapshot(h, &[run.id]).await, before);
}
