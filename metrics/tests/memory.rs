//! The metered scenario on testkit's `MemoryStore`, counted exactly.

mod support;

use flowstate_testkit::MemoryStore;

#[test]
fn memory_store_counts() {
    let got = support::recorded(|| support::scenario(MemoryStore::new()));
    support::assert_counts(&got);
}

#[test]
fn nothing_is_recorded_without_the_wrapper() {
    let got = support::recorded(|| async {
        use flowstate_core::ports::{RunStore, StepStore};
        let store = MemoryStore::new();
        let run = store
            .create_run(flowstate_core::NewRun::new("bare", serde_json::json!({})))
            .await
            .unwrap()
            .record
            .id;
        let step = flowstate_core::NewStep::new(run, "a", "f", serde_json::json!({}));
        store.insert_step(step).await.unwrap();
        store.claim_step(run, "a", "f").await.unwrap().unwrap();
    });
    assert_eq!(
        got.counter(flowstate_metrics::names::CLAIMS_WON, &[("via", "step")]),
        0
    );
}
