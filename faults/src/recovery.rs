//! The recovery pass every step scenario ends with: one
//! [`Sweeper::pass`] of `flowstate-recovery` (wake-ups, lease reaping, step
//! claims taken back once they ran out, the relay, the stalled sweep) with
//! no idle time required, collecting the runs it re-drives; then a drain
//! ([`recover_and_drain`]) in which fresh workers work the steps of those
//! runs, as an engine would on the dispatches. What is still pending or
//! running after that is stuck.
//!
//! The pass must run after the claim deadline of every step left running
//! by a fault (a claim whose answer was lost, a completion never sent).
//! Rather than wait the deadline out, a scenario whose workers are done
//! runs it on a store whose lease clock reads [`PAST_DEADLINES`] ahead
//! ([`store_past_deadlines`]): every claim made before the pass has run
//! out on that clock, whatever the machine's load. (The worker-process
//! scenarios wait in real time instead: there, coming back after the
//! deadline is the point.)

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use flowstate_core::{RunId, SystemClock};
use flowstate_recovery::{PassReport, SweepOptions, Sweeper};
use flowstate_store_diesel::{DieselStore, LeaseClockOffset, StoreConfig};

use crate::ledger::Ledger;
use crate::load::{CLAIM_TIMEOUT, Crew, CrewOptions, CrewReport, StepRef};

/// How long the pass is retried through retryable errors.
const PASS_PATIENCE: Duration = Duration::from_secs(10);

/// How far ahead of the database's clock the lease clock of
/// [`store_past_deadlines`] reads: the load's claim timeout and a second.
pub const PAST_DEADLINES: Duration = CLAIM_TIMEOUT.saturating_add(Duration::from_secs(1));

/// A store on `url` (a pool of 4) whose lease clock reads
/// [`PAST_DEADLINES`] ahead of the database's: on it, every claim of a
/// seeded step made before now has run out. For the recovery pass of a
/// scenario whose workers are all done (a live worker's claim would run
/// out on it too).
pub async fn store_past_deadlines(url: &str) -> Result<Arc<DieselStore>> {
    let offset = LeaseClockOffset::default();
    offset.advance(PAST_DEADLINES);
    let config = StoreConfig::default()
        .pool_size(4)
        .acquire_timeout(Duration::from_secs(5))
        .lease_clock_offset(offset);
    let store = DieselStore::open(url, config)
        .await
        .with_context(|| format!("open the recovery store on {url}"))?;
    Ok(Arc::new(store))
}

/// What the pass and the drain did.
#[derive(Debug)]
pub struct Recovery {
    /// The pass, or the error that ended it.
    pub pass: Result<PassReport, String>,
    /// The runs it re-drove.
    pub runs: BTreeSet<RunId>,
    /// The drain's workers; `None` where the scenario's own workers (a
    /// worker process) took the re-driven steps.
    pub drain: Option<CrewReport>,
}

impl Recovery {
    /// A short account for the scenario's note.
    pub fn summary(&self) -> String {
        let pass = match &self.pass {
            Ok(pass) => format!(
                "recovery: {} claims expired (attempts {}), reaped {}, relayed {}, resumed {}",
                pass.expiry.expired.len(),
                attempts(pass),
                pass.reaped.len(),
                pass.relay.redispatched.len(),
                pass.stalled.redispatched.len()
            ),
            Err(err) => format!("recovery pass failed: {err}"),
        };
        match &self.drain {
            Some(drain) => format!(
                "{pass}; drain completed {} of {} runs' steps",
                drain.total.completed,
                self.runs.len()
            ),
            None => format!("{pass}; {} runs re-driven", self.runs.len()),
        }
    }
}

/// The attempts of the claims a pass took back, grouped
/// (`"1 x3, 2 x1"`; `"-"` for none).
fn attempts(pass: &PassReport) -> String {
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for claim in &pass.expiry.expired {
        *counts.entry(claim.attempt).or_default() += 1;
    }
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .iter()
        .map(|(attempt, n)| format!("{attempt} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One recovery pass over `store`, then the steps of the runs it re-drove
/// (out of `steps`) worked by a crew of two. For a pass after every
/// claim's deadline, `store` is [`store_past_deadlines`]'s.
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
    Ok(Recovery {
        pass,
        runs,
        drain: Some(drain),
    })
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
