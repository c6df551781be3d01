//! [`RunStore::write_state`] and [`RunStore::read_state`]: one key per
//! write, JSON types kept, keys taken literally.

use flowstate_core::RunQuery;
use flowstate_core::ports::RunStore;
use serde_json::{Map, Value, json};

use crate::Harness;
use crate::cases::support::{new_run, race};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A new run's state is empty.
pub async fn read_state_of_new_run_is_empty<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert_eq!(h.store().read_state(run.id).await.unwrap(), Map::new());
}

/// Values keep their JSON type: `[]`, `0`, `false`, `null` and nested values
/// come back as written, not as strings.
pub async fn write_state_keeps_json_types<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let expected = json!({
        "empty": [],
        "zero": 0,
        "no": false,
        "nothing": null,
        "deep": {"a": [1, {"b": true}]},
        "float": 1.5,
        "negative": -7,
        "big": 9_007_199_254_740_993_u64,
        "emptyobj": {},
        "text": "hello",
    });
    for (key, value) in object(expected.clone()) {
        h.store().write_state(run.id, &key, &value).await.unwrap();
    }
    assert_eq!(
        h.store().read_state(run.id).await.unwrap(),
        object(expected)
    );
}

/// Strings that look like numbers, booleans, null or JSON stay strings.
pub async fn write_state_keeps_lookalike_strings<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let expected = json!({
        "n": "0",
        "f": "false",
        "z": "null",
        "e": "1e3",
        "j": "{\"a\":1}",
        "blank": "",
    });
    for (key, value) in object(expected.clone()) {
        h.store().write_state(run.id, &key, &value).await.unwrap();
    }
    assert_eq!(
        h.store().read_state(run.id).await.unwrap(),
        object(expected)
    );
}

/// A second write of a key replaces the first, whatever its type.
pub async fn write_state_replaces_existing_key<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    store.write_state(run.id, "alpha", &json!(1)).await.unwrap();
    store
        .write_state(run.id, "beta", &json!("kept"))
        .await
        .unwrap();
    store
        .write_state(run.id, "alpha", &json!({"nested": true}))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(run.id).await.unwrap(),
        object(json!({"alpha": {"nested": true}, "beta": "kept"}))
    );
}

/// A key with a dot is one literal key, not a path.
pub async fn write_state_dotted_key_is_one_key<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    store
        .write_state(run.id, "a.b", &json!("flat"))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(run.id).await.unwrap(),
        object(json!({"a.b": "flat"}))
    );
    store
        .write_state(run.id, "a", &json!({"b": 1}))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(run.id).await.unwrap(),
        object(json!({"a.b": "flat", "a": {"b": 1}}))
    );
}

/// Keys holding quotes, JSON-path or SQL syntax are stored as given and
/// break nothing.
pub async fn write_state_keys_with_quotes_and_sql<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let store = h.store();
    let keys = [
        "it's \"quoted\"",
        "'; drop table runs; --",
        "$.a[0]",
        "{a,b}",
        "back\\slash",
        "ünïcødé ✓",
    ];
    for (i, key) in keys.iter().enumerate() {
        store.write_state(run.id, key, &json!(i)).await.unwrap();
    }
    let expected: Map<String, Value> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| ((*key).to_owned(), json!(i)))
        .collect();
    assert_eq!(store.read_state(run.id).await.unwrap(), expected);
    let listed = store.list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(listed.items, vec![store.get_run(run.id).await.unwrap()]);
}

/// One run's state is not another's.
pub async fn write_state_is_per_run<H: Harness>(h: &H) {
    let a = new_run(h).await;
    let b = new_run(h).await;
    let store = h.store();
    store.write_state(a.id, "k", &json!("a")).await.unwrap();
    store.write_state(b.id, "k", &json!("b")).await.unwrap();
    store
        .write_state(b.id, "only_b", &json!(true))
        .await
        .unwrap();
    assert_eq!(
        store.read_state(a.id).await.unwrap(),
        object(json!({"k": "a"}))
    );
    assert_eq!(
        store.read_state(b.id).await.unwrap(),
        object(json!({"k": "b", "only_b": true}))
    );
}

/// 32 concurrent writes of different keys all land: none clobbers another.
pub async fn write_state_race_32_keys<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let outcomes = race(h.store(), 32, |store, i| async move {
        store
            .write_state(run.id, &format!("key{i}"), &json!({"i": i}))
            .await
    })
    .await;
    for outcome in outcomes {
        outcome.unwrap();
    }
    let expected: Map<String, Value> = (0..32)
        .map(|i| (format!("key{i}"), json!({"i": i})))
        .collect();
    assert_eq!(h.store().read_state(run.id).await.unwrap(), expected);
}

/// 32 concurrent writes of one key leave exactly one of the written values.
pub async fn write_state_race_32_same_key<H: Harness>(h: &H) {
    let run = new_run(h).await;
    let outcomes = race(h.store(), 32, |store, i| async move {
        store.write_state(run.id, "k", &json!(i)).await
    })
    .await;
    for outcome in outcomes {
        outcome.unwrap();
    }
    let state = h.store().read_state(run.id).await.unwrap();
    assert_eq!(state.len(), 1);
    let value = state["k"].as_u64().expect("a written value");
    assert!(value < 32, "{value} was never written");
}
