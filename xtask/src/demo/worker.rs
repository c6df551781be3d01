//! A demo worker: its own store (one connection), a queue of deliveries, and
//! for each one a claim, then the execution, then the step's outcome written.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::StepStore;
use flowstate_core::{RetryPolicy, RunId, Step, StepClaim, StepTransition};
use flowstate_store_diesel::DieselStore;
use serde_json::json;
use tokio::sync::mpsc;

use super::ledger::Ledger;

/// The function every demo step is pinned to.
pub const FUNCTION: &str = "demo.work";

/// One step to deliver.
#[derive(Debug)]
pub struct Job {
    /// The run's position in the demo, for reports.
    pub run_index: usize,
    /// The run.
    pub run: RunId,
    /// The step's name.
    pub name: String,
    /// Whether the step's first attempt fails.
    pub flaky: bool,
}

/// What one delivery came to.
#[derive(Debug)]
pub enum Outcome {
    /// Claimed, executed, and its success written.
    Succeeded,
    /// Claimed, executed, and its failure written: it needs a retry.
    Failed,
    /// The claim answered `None`: another worker has (or had) it.
    Refused,
    /// A store call failed; the delivery is lost.
    Error(String),
}

/// A worker's answer to one delivery.
#[derive(Debug)]
pub struct Report {
    /// The job delivered.
    pub job: Arc<Job>,
    /// What became of it.
    pub outcome: Outcome,
}

/// Takes deliveries until the queue closes, reporting each one.
pub async fn work(
    store: DieselStore,
    mut deliveries: mpsc::Receiver<Arc<Job>>,
    reports: mpsc::UnboundedSender<Report>,
    ledger: Arc<Ledger>,
) {
    while let Some(job) = deliveries.recv().await {
        let outcome = match store.claim_step(job.run, &job.name, FUNCTION).await {
            Ok(None) => Outcome::Refused,
            Ok(Some(step)) => execute(&store, &ledger, &job, &step).await,
            Err(err) => Outcome::Error(format!("claim of {} in run {}: {err}", job.name, job.run)),
        };
        if reports.send(Report { job, outcome }).is_err() {
            return;
        }
    }
}

/// Executes the claimed attempt: noted in the ledger first, then "run" (a
/// flaky step fails its first attempt), then its outcome written.
async fn execute(store: &DieselStore, ledger: &Ledger, job: &Job, step: &Step) -> Outcome {
    ledger.begin(step.id, step.attempt);
    let fails = job.flaky && step.attempt == RetryPolicy::FIRST_ATTEMPT;
    let transition = if fails {
        StepTransition::Failed(
            json!({ "error": "flaky on its first attempt", "attempt": step.attempt }),
        )
    } else {
        StepTransition::Succeeded(
            json!({ "run": job.run_index, "step": job.name, "attempt": step.attempt }),
        )
    };
    match write(store, step.claim(), transition).await {
        Ok(()) if fails => Outcome::Failed,
        Ok(()) => {
            ledger.succeeded(step.id);
            Outcome::Succeeded
        }
        Err(err) => Outcome::Error(format!("outcome of {} in run {}: {err}", job.name, job.run)),
    }
}

/// Writes the claimed attempt's outcome under its claim, trying again a few
/// times while the error says that may help (a busy database, a dropped
/// connection): a try whose first answer was lost but which was written
/// is answered `Ok` again (a repeat), and a claim that ran out is lost.
async fn write(
    store: &DieselStore,
    claim: StepClaim,
    transition: StepTransition,
) -> flowstate_core::Result<()> {
    let mut tries = 0;
    loop {
        match store.transition_claimed(claim, transition.clone()).await {
            Err(err) if err.is_retryable() && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20 * tries)).await;
            }
            done => return done,
        }
    }
}
