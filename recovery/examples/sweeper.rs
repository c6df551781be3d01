//! Run the sweeper beside workers: a worker dies holding a step, its claim
//! runs out, the `Sweeper` takes the claim back and re-drives the run, and
//! another worker runs the step's next attempt.
//!
//! On testkit's `MemoryStore`; any store with the recovery ports
//! (`flowstate-store-diesel`'s `DieselStore`) takes its place unchanged.
//!
//! `cargo run -p flowstate-recovery --example sweeper`

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RunId, StepStatus, StepTransition, SystemClock};
use flowstate_recovery::Sweeper;
use flowstate_testkit::MemoryStore;
use serde_json::json;
use tokio::sync::mpsc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Claims run out after 300 ms unless renewed (the default is minutes).
    let store = Arc::new(MemoryStore::new().with_claim_timeout(Duration::from_millis(300)));
    let run = store.create_run(NewRun::new("import", json!({}))).await?;
    let run = run.record.id;
    for name in ["fetch", "parse", "load"] {
        let step = NewStep::new(run, name, name, json!({}));
        store.insert_step(step).await?;
    }

    // The queue the engine dispatches runs on; the sweeper re-drives into it.
    let (queue, mut inbox) = mpsc::unbounded_channel::<RunId>();
    let redrive = queue.clone();
    let sweeper = Sweeper::new(
        Arc::clone(&store),
        move |run, reason| {
            println!("sweeper: re-drive run {run} ({reason:?})");
            let sent = redrive.send(run).map_err(|e| e.to_string());
            async move { sent }
        },
        Arc::new(SystemClock),
    )
    .with_interval(Duration::from_millis(100))
    .spawn();

    // The workers: each message runs every step of the run it can claim.
    let worker_store = Arc::clone(&store);
    let workers = tokio::spawn(async move {
        let mut crashed = false;
        while let Some(run) = inbox.recv().await {
            for step in worker_store.list_steps(run).await? {
                let claimed = worker_store.claim_step(run, &step.name, &step.name).await?;
                let Some(step) = claimed else { continue };
                if step.name == "parse" && !crashed {
                    crashed = true; // this worker dies here: no completion, no renewal
                    println!("worker: took {:?} and died", step.name);
                    continue;
                }
                let done = StepTransition::Succeeded(json!({ "attempt": step.attempt }));
                worker_store.transition_claimed(step.claim(), done).await?;
                println!("worker: {:?} attempt {} succeeded", step.name, step.attempt);
            }
        }
        Ok::<_, flowstate_core::Error>(())
    });
    queue.send(run)?;

    let started = Instant::now();
    loop {
        let steps = store.list_steps(run).await?;
        if steps.iter().all(|s| s.status == StepStatus::Succeeded) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = sweeper.shutdown().await;
    drop(queue);
    workers.abort();

    let parse = store.find_step(run, "parse").await?;
    println!(
        "every step succeeded in {:?}; \"parse\" on attempt {}",
        started.elapsed(),
        parse.attempt
    );
    println!(
        "sweeper: {} passes, {} claims taken back, {} runs re-driven",
        report.passes, report.expired_claims, report.requeued
    );
    assert_eq!((parse.attempt, report.expired_claims), (2, 1));
    Ok(())
}
