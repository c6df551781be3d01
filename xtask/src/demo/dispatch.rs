//! The demo's dispatcher: delivers every step to two workers at once (at
//! least once, as a real queue does, and then some), re-delivers a step whose
//! attempt failed, and hands a run whose steps have all succeeded to the
//! completer, which marks it completed.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::ports::RunStore;
use flowstate_core::{RunId, RunStatus};
use flowstate_store_diesel::DieselStore;
use rand::Rng;
use tokio::sync::mpsc;

use super::worker::{Job, Outcome, Report};

/// How long the dispatcher waits for any report before it calls the demo
/// stuck.
const STALL: Duration = Duration::from_secs(30);

/// Store errors the dispatcher puts up with (re-delivering each time) before
/// it gives up.
const MAX_ERRORS: usize = 100;

/// What the dispatcher counted.
#[derive(Debug, Default)]
pub struct Tally {
    /// Deliveries sent to workers.
    pub deliveries: u64,
    /// Deliveries whose claim answered `None`.
    pub refused: u64,
    /// Steps whose success was reported.
    pub succeeded: u64,
    /// Attempts whose failure was reported.
    pub failed: u64,
    /// Runs handed to the completer.
    pub runs_done: u64,
    /// Store errors reported by workers.
    pub errors: Vec<String>,
    /// Why dispatching stopped before every run was done, if it did.
    pub aborted: Option<String>,
}

/// Delivers `jobs` (grouped by run, `runs` of them) to `workers` until every
/// run is done, then returns what it counted.
pub async fn dispatch(
    jobs: Vec<Arc<Job>>,
    runs: usize,
    workers: Vec<mpsc::Sender<Arc<Job>>>,
    mut reports: mpsc::UnboundedReceiver<Report>,
    completer: mpsc::UnboundedSender<RunId>,
) -> Tally {
    let started = Instant::now();
    let total = jobs.len() as u64;
    let mut remaining = vec![0_usize; runs];
    for job in &jobs {
        remaining[job.run_index] += 1;
    }
    let mut runs_left = remaining.iter().filter(|&&n| n > 0).count();
    let mut fresh: VecDeque<Arc<Job>> = jobs.into();
    let mut again: VecDeque<Arc<Job>> = VecDeque::new();
    let mut done: HashSet<(usize, String)> = HashSet::new();
    let mut tally = Tally::default();
    let mut shown_decile = 0;

    while runs_left > 0 && tally.aborted.is_none() {
        let report = if let Ok(report) = reports.try_recv() {
            Some(report)
        } else {
            // Nothing to take in: deliver the next job, or wait for a report.
            if let Some(job) = again.pop_front().or_else(|| fresh.pop_front()) {
                if let Err(why) = deliver_twice(&workers, job).await {
                    tally.aborted = Some(why);
                }
                tally.deliveries += 2;
                continue;
            }
            match tokio::time::timeout(STALL, reports.recv()).await {
                Ok(Some(report)) => Some(report),
                Ok(None) => {
                    tally.aborted = Some("every worker stopped".to_owned());
                    None
                }
                Err(_) => {
                    tally.aborted = Some(format!(
                        "no worker reported for {} s: stuck",
                        STALL.as_secs()
                    ));
                    None
                }
            }
        };
        let Some(Report { job, outcome }) = report else {
            continue;
        };
        match outcome {
            Outcome::Refused => tally.refused += 1,
            Outcome::Failed => {
                tally.failed += 1;
                again.push_back(job);
            }
            Outcome::Error(error) => {
                tally.errors.push(error);
                if tally.errors.len() > MAX_ERRORS {
                    tally.aborted = Some(format!("more than {MAX_ERRORS} store errors"));
                }
                again.push_back(job);
            }
            Outcome::Succeeded => {
                tally.succeeded += 1;
                if done.insert((job.run_index, job.name.clone())) {
                    remaining[job.run_index] -= 1;
                    if remaining[job.run_index] == 0 {
                        runs_left -= 1;
                        tally.runs_done += 1;
                        let _ = completer.send(job.run);
                    }
                }
                let decile = tally.succeeded * 10 / total.max(1);
                if decile > shown_decile {
                    shown_decile = decile;
                    progress(&tally, total, started);
                }
            }
        }
    }
    // Close the queues and count what the last deliveries came to, so every
    // delivery is accounted for.
    drop(workers);
    while let Ok(Some(Report { outcome, .. })) = tokio::time::timeout(STALL, reports.recv()).await {
        match outcome {
            Outcome::Refused => tally.refused += 1,
            Outcome::Succeeded => tally.succeeded += 1,
            Outcome::Failed => tally.failed += 1,
            Outcome::Error(error) => tally.errors.push(error),
        }
    }
    tally
}

/// Sends `job` to two different workers, picked at random.
async fn deliver_twice(workers: &[mpsc::Sender<Arc<Job>>], job: Arc<Job>) -> Result<(), String> {
    let (first, second) = {
        let mut rng = rand::rng();
        let first = rng.random_range(0..workers.len());
        let second = (first + 1 + rng.random_range(0..workers.len() - 1)) % workers.len();
        (first, second)
    };
    for worker in [first, second] {
        workers[worker]
            .send(Arc::clone(&job))
            .await
            .map_err(|_| format!("worker {worker} stopped"))?;
    }
    Ok(())
}

fn progress(tally: &Tally, total: u64, started: Instant) {
    println!(
        "  [{:>3}%] {:>6}/{total} steps succeeded, {:>5} runs done, {:>6} deliveries refused, {:>4} attempts failed, {:>6.1} s",
        tally.succeeded * 100 / total.max(1),
        tally.succeeded,
        tally.runs_done,
        tally.refused,
        tally.failed,
        started.elapsed().as_secs_f64(),
    );
}

/// Marks each run it is handed completed, on a connection of its own;
/// returns how many it marked and the errors it met.
pub async fn complete(
    store: DieselStore,
    mut runs: mpsc::UnboundedReceiver<RunId>,
) -> (u64, Vec<String>) {
    let (mut completed, mut errors) = (0, Vec::new());
    while let Some(run) = runs.recv().await {
        match store.set_run_status(run, RunStatus::Completed).await {
            Ok(_) => completed += 1,
            Err(err) => errors.push(format!("completing run {run}: {err}")),
        }
    }
    (completed, errors)
}
