//! The recovery pass every step scenario ends with: one
//! [`Sweeper::pass`] of `flowstate-recovery` (wake-ups, lease reaping, the
//! relay, the stalled sweep, and whatever else a pass learns to do) with no
//! idle time required, collecting the runs it re-drives; then a drain
//! ([`recover_and_drain`]) in which fresh workers work the steps of those
//! runs, as an engine would on the dispatches. What is still pending or
//! running after that is stuck.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use flowstate_core::{RunId, SystemClock};
use flowstate_recovery::{PassReport, SweepOptions, Sweeper};
use flowstate_store_diesel::DieselStore;

use crate::ledger::Ledger;
use crate::load::{Crew, CrewOptions, CrewReport, StepRef};

/// How long the pass is retried through retryable errors.
const PASS_PATIENCE: Duration = Duration::from_secs(10);

/// What the pass and the drain did.
#[derive(Debug)]
pub struct Recovery {
    /// The pass, or the error that ended it.
    pub pass: Result<PassReport, String>,
    /// The runs it re-drove.
    pub runs: BTreeSet<RunId>,
    /// The drain's workers.
    pub drain: CrewReport,
}

impl Recovery {
    /// A short account for the scenario's note.
    pub fn summary(&self) -> String {
        let pass = match &self.pass {
            Ok(pass) => format!(
                "recovery: reaped {}, relayed {}, resumed {}",
                pass.reaped.len(),
                pass.relay.redispatched.len(),
                pass.stalled.redispatched.len()
            ),
            Err(err) => format!("recovery pass failed: {err}"),
        };
        format!(
            "{pass}; drain completed {} of {} runs' steps",
            self.drain.total.completed,
            self.runs.len()
        )
    }
}

/// One recovery pass over `store`, then the steps of the runs it re-drove
/// (out of `steps`) worked by a crew of two.
pub async fn recover_and_drain(
    store: Arc<DieselStore>,
    ledger: Arc<Ledger>,
    steps: &[StepRef],
) -> Result<Recovery> {
    let (pass, runs) = Box::pin(recovery_pass(Arc::clone(&store))).await;
    let owed: Vec<StepRef> = steps
        .iter()
        .filter(|step| runs.contains(&step.run))
        .cloned()
        .collect();
    let options = CrewOptions {
        workers: 2,
        hold: Duration::ZERO,
        ..CrewOptions::default()
    };
    let drain = Crew::start("drain", &store, &ledger, &owed.into(), options)
        .join()
        .await?;
    Ok(Recovery { pass, runs, drain })
}

/// One [`Sweeper::pass`] with no idle time required (tried again through
/// retryable errors for a while), answering the runs it re-drove.
pub async fn recovery_pass(
    store: Arc<DieselStore>,
) -> (Result<PassReport, String>, BTreeSet<RunId>) {
    let found = Arc::new(Mutex::new(BTreeSet::new()));
    let seen = Arc::clone(&found);
    let dispatch = move |run: RunId, _reason| {
        seen.lock().expect("not poisoned").insert(run);
        async { Ok::<(), Infallible>(()) }
    };
    let mut sweeper =
        Sweeper::new(store, dispatch, Arc::new(SystemClock)).with_options(SweepOptions {
            relay_after: Duration::ZERO,
            stalled_after: Duration::ZERO,
            limit: 0,
        });
    let started = Instant::now();
    let pass = loop {
        match Box::pin(sweeper.pass()).await {
            Ok(pass) => break Ok(pass),
            Err(err) if err.is_retryable() && started.elapsed() < PASS_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => break Err(err.to_string()),
        }
    };
    let runs = found.lock().expect("not poisoned").clone();
    (pass, runs)
}
