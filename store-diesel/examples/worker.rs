//! Open an embedded SQLite store, apply the schema, and run a worker loop.
//!
//! A queue hands every step to the workers twice, as any at-least-once
//! queue may; the store's claim lets exactly one of them run it, and the
//! completion is fenced by that claim. A server URL (`postgres://...`,
//! `mysql://...`) in place of the file works the same.
//!
//! `cargo run -p flowstate-store-diesel --example worker`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{NewRun, NewStep, RunId, RunStatus, StepStatus, StepTransition};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;
use tokio::sync::{Mutex, mpsc};

const STEPS: usize = 50;
const WORKERS: usize = 4;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join(format!("flowstate-worker-{}.db", std::process::id()));
    let url = format!("sqlite://{}", path.display());
    // Applies the embedded migrations, then checks the schema is current.
    let store = Arc::new(DieselStore::open_migrated(&url, StoreConfig::default()).await?);

    let run = store
        .create_run(NewRun::new("checkout", json!({"cart": 7})))
        .await?
        .record
        .id;
    let (queue, inbox) = mpsc::unbounded_channel::<(RunId, String)>();
    for line in 0..STEPS {
        let name = format!("line-{line}");
        let step = NewStep::new(run, name.as_str(), "checkout.line", json!({ "line": line }));
        store.insert_step(step).await?;
        queue.send((run, name.clone()))?; // delivered once...
        queue.send((run, name))?; // ...and once more
    }
    drop(queue);

    let inbox = Arc::new(Mutex::new(inbox));
    let executed = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (store, inbox, executed) = (store.clone(), inbox.clone(), executed.clone());
        workers.push(tokio::spawn(async move {
            let mut refused = 0;
            loop {
                let Some((run, name)) = inbox.lock().await.recv().await else {
                    return Ok::<_, flowstate_core::Error>(refused);
                };
                // `Some` to exactly one caller per attempt, `None` to every duplicate.
                let Some(step) = store.claim_step(run, &name, "checkout.line").await? else {
                    refused += 1;
                    continue;
                };
                executed.fetch_add(1, Ordering::Relaxed); // the step's real work
                let result = json!({ "line": step.input["line"], "charged": true });
                // Fenced by the claim: a holder whose claim ran out writes nothing.
                let done = StepTransition::Succeeded(result);
                store.transition_claimed(step.claim(), done).await?;
            }
        }));
    }
    let mut refused = 0;
    for worker in workers {
        refused += worker.await??;
    }
    store.set_run_status(run, RunStatus::Completed).await?;

    let steps = store.list_steps(run).await?;
    let succeeded = steps
        .iter()
        .filter(|s| s.status == StepStatus::Succeeded)
        .count();
    let executed = executed.load(Ordering::Relaxed);
    println!("{} store at {}", store.dialect(), path.display());
    println!(
        "{} deliveries: {executed} executed, {refused} duplicates refused",
        2 * STEPS
    );
    println!("{succeeded} of {STEPS} steps succeeded, run {run} completed");
    assert_eq!((executed, succeeded), (STEPS, STEPS));

    drop(store);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(())
}
