//! Wrap a store in `Metered`, install a recorder, and read the counts.
//!
//! Every step is delivered twice, as an at-least-once queue may: the
//! counters show each claim won once and each duplicate lost, and the
//! histogram how long the claims took. A real host installs an exporter
//! (Prometheus, StatsD) where this installs metrics-util's
//! `DebuggingRecorder`.
//!
//! `cargo run -p flowstate-metrics --example counts`

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, StepTransition};
use flowstate_metrics::{Metered, names};
use flowstate_testkit::MemoryStore;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    // Any store: DieselStore, MemoryStore, your own.
    let store = Metered::new(MemoryStore::new());
    let run = store
        .create_run(NewRun::new("checkout", json!({})))
        .await?
        .record
        .id;
    for line in 0..10 {
        let name = format!("line-{line}");
        store
            .insert_step(NewStep::new(run, name.as_str(), "line", json!({})))
            .await?;
        for _delivery in 0..2 {
            if let Some(step) = store.claim_step(run, &name, "line").await? {
                let done = StepTransition::Succeeded(json!({ "line": line }));
                store.transition_claimed(step.claim(), done).await?;
            }
        }
    }

    let mut won = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let shown = match &value {
            DebugValue::Counter(n) => n.to_string(),
            DebugValue::Histogram(values) => format!("{} observations", values.len()),
            DebugValue::Gauge(g) => g.to_string(),
        };
        println!("{:<36} {:<24} {shown}", key.name(), labels.join(","));
        if key.name() == names::CLAIMS_WON {
            if let DebugValue::Counter(n) = value {
                won += n;
            }
        }
    }
    assert_eq!(won, 10, "each step claimed once");
    Ok(())
}
