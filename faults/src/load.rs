//! The load of the step scenarios: steps seeded through the store, a
//! [`Crew`] of in-process workers claiming and completing them through the
//! store while a fault strikes, and the time each worker took to be served
//! again after it.
//!
//! Every step is seeded with a short claim timeout ([`CLAIM_TIMEOUT`]): a
//! step whose claim was won but whose answer a fault swallowed is held by
//! nobody, and comes back once its claim runs out (the recovery pass runs
//! past that deadline, see [`crate::recovery`]).
//!
//! A worker is strict: it takes the next step of a shared list,
//! `claim_step`s it, writes the ledger (inside the step), holds the step a
//! moment (its work), and completes it under its claim with
//! `transition_claimed(Succeeded)` (a repeat of a completion whose answer
//! was lost answers `Ok`). A call that fails with an error that
//! [`is_retryable`] is tried again (every 50 ms, for up to
//! [`CrewOptions::patience`]); any other error ends that step for this
//! worker, which moves on: what it leaves behind is recovery's to find.
//!
//! Around the fault's end each worker keeps a trace of its calls
//! ([`CallTrace`]): where the time to heal went, call by call.
//!
//! [`is_retryable`]: flowstate_core::Error::is_retryable

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use flowstate_core::ports::{RunStore as _, StepStore as _};
use flowstate_core::{Error, NewRun, NewStep, RunId, StepTransition};
use flowstate_store_diesel::DieselStore;
use serde_json::json;

use crate::ledger::{Entry, Ledger};

/// The function every seeded step is pinned to.
pub const FUNCTION: &str = "faults.step";

/// The claim timeout every seeded step carries: short, so that a step
/// whose claimer died (or whose claim's answer was lost) comes back within
/// seconds, not the store's default of ten minutes.
pub const CLAIM_TIMEOUT: Duration = Duration::from_secs(2);

/// The result a worker named `worker` completes a step with; the verdict
/// checks that a succeeded step's result names the worker whose ledger row
/// holds the succeeded attempt.
pub fn result_of(worker: &str) -> serde_json::Value {
    json!({ "worker": worker })
}

/// One seeded step, as a worker names it to claim it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRef {
    /// Its run.
    pub run: RunId,
    /// Its name in the run.
    pub name: String,
}

/// Creates `runs` runs of `steps_per_run` pending steps each (pinned to
/// [`FUNCTION`], the default retry policy, claims held for
/// [`CLAIM_TIMEOUT`]).
pub async fn seed(store: &DieselStore, runs: usize, steps_per_run: usize) -> Result<Vec<StepRef>> {
    let mut steps = Vec::with_capacity(runs * steps_per_run);
    for r in 0..runs {
        let run = store
            .create_run(NewRun::new("faults", json!({ "run": r })))
            .await?
            .record
            .id;
        for s in 0..steps_per_run {
            let name = format!("step-{s:03}");
            store
                .insert_step(
                    NewStep::new(run, name.clone(), FUNCTION, json!({ "n": s }))
                        .with_claim_timeout(CLAIM_TIMEOUT),
                )
                .await?;
            steps.push(StepRef { run, name });
        }
    }
    Ok(steps)
}

/// How a crew works.
#[derive(Clone, Copy, Debug)]
pub struct CrewOptions {
    /// How many workers (tokio tasks) share the list.
    pub workers: usize,
    /// How long a worker holds each step between its ledger row and its
    /// completion (the step's work).
    pub hold: Duration,
    /// The pause before a retryable call is tried again.
    pub retry_every: Duration,
    /// How long one call is retried before the worker gives up on it.
    pub patience: Duration,
    /// A single call that takes longer than this is counted as hung and
    /// given up on.
    pub call_timeout: Duration,
    /// After this long from the crew's start, workers take no new step
    /// (what is left stays pending, for recovery): a store that never heals
    /// ends the scenario in bounded time.
    pub deadline: Duration,
}

impl Default for CrewOptions {
    fn default() -> Self {
        Self {
            workers: 8,
            hold: Duration::from_millis(5),
            retry_every: Duration::from_millis(50),
            patience: Duration::from_secs(5),
            call_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(45),
        }
    }
}

/// What a crew shares with the test driving the fault: how far it got,
/// and when the fault was over (the start of time to heal).
#[derive(Debug, Default)]
pub struct Progress {
    started: Option<Instant>,
    completed: AtomicU64,
    read_only: AtomicU64,
    healed_from: OnceLock<Instant>,
}

impl Progress {
    /// Steps completed so far.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Calls answered so far with a read-only server's refusal
    /// ([`is_read_only`]): each one a pooled connection that met a server
    /// that takes no writes (a demoted primary), which the store's pool
    /// drops.
    pub fn read_only(&self) -> u64 {
        self.read_only.load(Ordering::SeqCst)
    }

    /// Waits until `n` calls were answered with a read-only server's
    /// refusal ([`Self::read_only`]), at most `timeout`; fails past it.
    pub async fn wait_for_read_only(&self, n: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.read_only() < n {
            if Instant::now() >= deadline {
                bail!(
                    "only {} calls met a read-only server within {timeout:?}, waited for {n}",
                    self.read_only()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Waits until `n` steps are completed, at most `timeout`; fails past
    /// it.
    pub async fn wait_for(&self, n: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.completed() < n {
            if Instant::now() >= deadline {
                bail!(
                    "only {} steps completed within {timeout:?}, waited for {n}",
                    self.completed()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Marks now as the end of the fault (the server back, the
    /// connections cut, the hog gone): time to heal counts from here.
    pub fn fault_over(&self) {
        let _ = self.healed_from.set(Instant::now());
    }

    /// When [`Self::fault_over`] was called, if it was.
    pub fn healed_from(&self) -> Option<Instant> {
        self.healed_from.get().copied()
    }
}

/// What one worker saw.
#[derive(Clone, Debug, Default)]
pub struct WorkerReport {
    /// Steps it completed.
    pub completed: u64,
    /// Claims that answered `None` (someone else had the step).
    pub not_claimed: u64,
    /// Steps it gave up on (a call failed for good).
    pub gave_up: u64,
    /// Calls tried again after a retryable error.
    pub retries: u64,
    /// Pool timeouts seen (retried).
    pub pool_timeouts: u64,
    /// Calls that did not answer within the call timeout.
    pub hung: u64,
    /// Backend errors marked not retryable, and the first one's text.
    pub not_retryable: u64,
    /// Calls answered with a read-only server's refusal
    /// ([`is_read_only`]; retried like any retryable error).
    pub read_only: u64,
    /// The first error of each kind, as text.
    pub samples: Vec<String>,
    /// Typed answers (an illegal move after a completion whose answer was
    /// lost): legitimate, counted for the note.
    pub typed: u64,
    /// Executions the ledger refused as doubles.
    pub doubles: u64,
    /// Completions refused as `ClaimLost` (the claim was taken back before
    /// the completion was written: nothing may take it back while a crew
    /// works, so any is counted wrong by the scenarios).
    pub claims_lost: u64,
    /// The worker's calls around the fault's end (see [`CallTrace`]).
    pub trace: Vec<CallTrace>,
    /// Whether a call started after the fault was over.
    called_after_fault: bool,
    /// When its first call that started after the fault succeeded.
    first_ok_after_fault: Option<Instant>,
}

/// One call of a worker around the end of the fault: every call that
/// ended after [`Progress::fault_over`], up to the first call begun after
/// it that succeeded (at most [`TRACE_CALLS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallTrace {
    /// What it was (`claim`, `ledger`, `complete`).
    pub what: &'static str,
    /// When it began, in milliseconds from the fault's end (negative:
    /// before it).
    pub began_ms: i64,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// How it ended (`ok`, or the error, shortened).
    pub outcome: String,
}

/// The most calls a worker's trace keeps.
pub const TRACE_CALLS: usize = 12;

impl std::fmt::Display for CallTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {:+} ms took {} ms: {}",
            self.what, self.began_ms, self.took_ms, self.outcome
        )
    }
}

impl WorkerReport {
    /// Notes a call that began at `began` and ended now with `outcome`,
    /// if the fault is over and the worker is still healing.
    fn trace(&mut self, progress: &Progress, what: &'static str, began: Instant, outcome: &str) {
        let Some(from) = progress.healed_from() else {
            return;
        };
        if self.first_ok_after_fault.is_some() || self.trace.len() >= TRACE_CALLS {
            return;
        }
        let began_ms = if began >= from {
            i64::try_from(began.duration_since(from).as_millis()).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(from.duration_since(began).as_millis()).unwrap_or(i64::MAX)
        };
        let mut outcome = outcome.to_owned();
        if outcome.len() > 120 {
            let mut cut = 120;
            while !outcome.is_char_boundary(cut) {
                cut -= 1;
            }
            outcome.truncate(cut);
            outcome.push('…');
        }
        self.trace.push(CallTrace {
            what,
            began_ms,
            took_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
            outcome,
        });
    }

    fn sample(&mut self, text: String) {
        if self.samples.len() < 3 && !self.samples.contains(&text) {
            self.samples.push(text);
        }
    }
}

/// The crew's reports summed, and its time to heal.
#[derive(Clone, Debug, Default)]
pub struct CrewReport {
    /// The workers' counts, summed (`samples` gathered).
    pub total: WorkerReport,
    /// How long after [`Progress::fault_over`] every worker that called
    /// again had a call succeed; `Err` with the time waited if one never
    /// did; `None` if no fault was marked or nobody called after it.
    pub heal: Option<Result<Duration, Duration>>,
    /// The trace of the worker that took longest to heal.
    pub slowest: Vec<CallTrace>,
}

impl CrewReport {
    /// The report as a [`Heal`](crate::report::Heal).
    pub fn heal(&self) -> crate::report::Heal {
        match self.heal {
            None => crate::report::Heal::NotMeasured,
            Some(Ok(took)) => crate::report::Heal::Healed(took),
            Some(Err(waited)) => crate::report::Heal::Never(waited),
        }
    }

    /// Where the slowest worker's time to heal went, call by call
    /// (`claim at -3 ms took 40 ms: ...; ledger at +37 ms ...`).
    pub fn heal_account(&self) -> String {
        let calls: Vec<String> = self.slowest.iter().map(ToString::to_string).collect();
        format!("slowest worker after the fault: {}", calls.join("; "))
    }

    /// A short account of the errors seen, for the scenario's note.
    pub fn summary(&self) -> String {
        let t = &self.total;
        let mut out = format!(
            "completed {} (gave up {}, retried {}, read-only refusals {}, pool timeouts {}, hung {}, not retryable {}, typed {}, claims lost {})",
            t.completed,
            t.gave_up,
            t.retries,
            t.read_only,
            t.pool_timeouts,
            t.hung,
            t.not_retryable,
            t.typed,
            t.claims_lost
        );
        if !t.samples.is_empty() {
            out.push_str(": ");
            out.push_str(&t.samples.join(" / "));
        }
        out
    }
}

/// A crew of in-process workers over one list of steps.
#[derive(Debug)]
pub struct Crew {
    /// Shared with the test: progress and the fault's end.
    pub progress: Arc<Progress>,
    tasks: Vec<tokio::task::JoinHandle<WorkerReport>>,
}

impl Crew {
    /// Starts `options.workers` workers named `<name>-<i>` on `steps`.
    pub fn start(
        name: &str,
        store: &Arc<DieselStore>,
        ledger: &Arc<Ledger>,
        steps: &Arc<[StepRef]>,
        options: CrewOptions,
    ) -> Self {
        let progress = Arc::new(Progress {
            started: Some(Instant::now()),
            ..Progress::default()
        });
        let next = Arc::new(AtomicUsize::new(0));
        let tasks = (0..options.workers)
            .map(|i| {
                let worker = Worker {
                    name: format!("{name}-{i}"),
                    slot: i,
                    store: Arc::clone(store),
                    ledger: Arc::clone(ledger),
                    steps: Arc::clone(steps),
                    next: Arc::clone(&next),
                    progress: Arc::clone(&progress),
                    options,
                };
                tokio::spawn(worker.run())
            })
            .collect();
        Self { progress, tasks }
    }

    /// Waits for every worker to run out of steps.
    pub async fn join(self) -> Result<CrewReport> {
        let from = self.progress.healed_from();
        let mut report = CrewReport::default();
        let mut slowest: Option<Result<Duration, Duration>> = None;
        for task in self.tasks {
            let worker = task.await?;
            let t = &mut report.total;
            t.completed += worker.completed;
            t.not_claimed += worker.not_claimed;
            t.gave_up += worker.gave_up;
            t.retries += worker.retries;
            t.pool_timeouts += worker.pool_timeouts;
            t.hung += worker.hung;
            t.not_retryable += worker.not_retryable;
            t.read_only += worker.read_only;
            t.typed += worker.typed;
            t.doubles += worker.doubles;
            t.claims_lost += worker.claims_lost;
            for sample in &worker.samples {
                t.sample(sample.clone());
            }
            let (Some(from), true) = (from, worker.called_after_fault) else {
                continue;
            };
            let this = worker
                .first_ok_after_fault
                .map(|at| at.saturating_duration_since(from))
                .ok_or_else(|| from.elapsed());
            let longer = match (slowest, this) {
                (Some(Err(_)), _) => false,
                (_, Err(_)) | (None, _) => true,
                (Some(Ok(a)), Ok(b)) => b > a,
            };
            if longer {
                report.slowest.clone_from(&worker.trace);
            }
            slowest = Some(match (slowest, this) {
                (Some(Err(waited)), _) | (_, Err(waited)) => Err(waited),
                (Some(Ok(a)), Ok(b)) => Ok(a.max(b)),
                (None, Ok(b)) => Ok(b),
            });
        }
        report.heal = slowest;
        Ok(report)
    }
}

struct Worker {
    name: String,
    slot: usize,
    store: Arc<DieselStore>,
    ledger: Arc<Ledger>,
    steps: Arc<[StepRef]>,
    next: Arc<AtomicUsize>,
    progress: Arc<Progress>,
    options: CrewOptions,
}

impl Worker {
    async fn run(self) -> WorkerReport {
        let mut report = WorkerReport::default();
        loop {
            if self
                .progress
                .started
                .is_some_and(|at| at.elapsed() >= self.options.deadline)
            {
                report.sample(format!(
                    "stopped at the crew's deadline of {:?}",
                    self.options.deadline
                ));
                return report;
            }
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(step) = self.steps.get(i) else {
                return report;
            };
            let claimed = self
                .call(&mut report, "claim", || {
                    self.store.claim_step(step.run, &step.name, FUNCTION)
                })
                .await;
            let step = match claimed {
                Some(Some(step)) => step,
                Some(None) => {
                    report.not_claimed += 1;
                    continue;
                }
                None => {
                    report.gave_up += 1;
                    continue;
                }
            };
            let began = Instant::now();
            let entry = self
                .ledger
                .record(self.slot, step.id, step.attempt, &self.name)
                .await;
            let outcome = entry
                .as_ref()
                .map_or_else(|err| format!("{err:#}"), |_| "ok".into());
            report.trace(&self.progress, "ledger", began, &outcome);
            match entry {
                Ok(Entry::First) => {}
                Ok(Entry::Double) => report.doubles += 1,
                Err(err) => {
                    report.sample(format!("ledger: {err:#}"));
                    report.gave_up += 1;
                    continue;
                }
            }
            tokio::time::sleep(self.options.hold).await;
            let result = result_of(&self.name);
            let claim = step.claim();
            let done = self
                .call(&mut report, "complete", || {
                    self.store
                        .transition_claimed(claim, StepTransition::Succeeded(result.clone()))
                })
                .await;
            if done.is_some() {
                report.completed += 1;
                self.progress.completed.fetch_add(1, Ordering::SeqCst);
            } else {
                report.gave_up += 1;
            }
        }
    }

    /// Calls `f` (a `what` call) until it answers `Ok` or an error that is
    /// not retryable (answering `None`, counted), or patience runs out.
    async fn call<T, F, Fut>(
        &self,
        report: &mut WorkerReport,
        what: &'static str,
        mut f: F,
    ) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = flowstate_core::Result<T>>,
    {
        let started = Instant::now();
        loop {
            let began = Instant::now();
            let after_fault = self.progress.healed_from().is_some_and(|at| began >= at);
            report.called_after_fault |= after_fault;
            let outcome = tokio::time::timeout(self.options.call_timeout, f()).await;
            let told = match &outcome {
                Ok(Ok(_)) => "ok".to_owned(),
                Ok(Err(err)) => err.to_string(),
                Err(_) => "hung".to_owned(),
            };
            report.trace(&self.progress, what, began, &told);
            let err = match outcome {
                Ok(Ok(value)) => {
                    if after_fault && report.first_ok_after_fault.is_none() {
                        report.first_ok_after_fault = Some(Instant::now());
                    }
                    return Some(value);
                }
                Ok(Err(err)) => err,
                Err(_) => {
                    report.hung += 1;
                    report.sample(format!("a call hung for {:?}", self.options.call_timeout));
                    return None;
                }
            };
            if is_read_only(&err) {
                report.read_only += 1;
                self.progress.read_only.fetch_add(1, Ordering::SeqCst);
            }
            match &err {
                Error::PoolTimeout { .. } => report.pool_timeouts += 1,
                Error::ClaimLost { .. } => {
                    report.claims_lost += 1;
                    report.sample(format!("claim lost: {err}"));
                    return None;
                }
                Error::Backend {
                    retryable: false, ..
                } => {
                    report.not_retryable += 1;
                    report.sample(format!("not retryable: {err}"));
                    return None;
                }
                _ if !err.is_retryable() => {
                    report.typed += 1;
                    report.sample(format!("typed: {err}"));
                    return None;
                }
                _ => {}
            }
            if started.elapsed() >= self.options.patience {
                report.sample(format!("gave up after {:?}: {err}", self.options.patience));
                return None;
            }
            report.retries += 1;
            tokio::time::sleep(self.options.retry_every).await;
        }
    }
}

/// Whether `err` is a server's refusal to write because it takes none
/// (PostgreSQL's SQLSTATE 25006, read_only_sql_transaction: `cannot
/// execute UPDATE in a read-only transaction` on a standby, or `... during
/// recovery`), as a store reports it: a backend error whose text says so.
pub fn is_read_only(err: &Error) -> bool {
    matches!(err, Error::Backend { .. }) && {
        let text = err.to_string();
        text.contains("in a read-only transaction") || text.contains("during recovery")
    }
}

/// Time to heal measured by probes, from `since`: for a scenario whose
/// crew gave up before the store served it again (a strict crew gives up
/// every step at once when every call fails for good). Every 20 ms a round
/// of `callers` concurrent `get_run(run)` calls is sent (each holding a
/// pooled connection, so `callers` equal to the pool's size uses every
/// connection); healed when a whole round succeeds, `Never` if none did
/// within `bound` of `since`.
pub async fn probe_heal(
    store: Arc<DieselStore>,
    run: RunId,
    callers: usize,
    since: Instant,
    bound: Duration,
) -> crate::report::Heal {
    loop {
        let round: Vec<_> = (0..callers.max(1))
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let answer =
                        tokio::time::timeout(Duration::from_secs(2), store.get_run(run)).await;
                    matches!(answer, Ok(Ok(_)))
                })
            })
            .collect();
        let mut all = true;
        for call in round {
            all &= call.await.unwrap_or(false);
        }
        if all {
            return crate::report::Heal::Healed(since.elapsed());
        }
        if since.elapsed() >= bound {
            return crate::report::Heal::Never(bound);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
