//! The workloads beside steps: run leasing (`claim_run` + `finish`, runs
//! per second; and batched, `claim_runs` of [`LEASE_BATCH`] + `finish`
//! each) and events (`emit_batch` deferred, then `dispatch_queued` until
//! drained, events per second, each event starting one run), with N
//! workers on N connections. Each event dispatcher takes the next free
//! event; with `dispatch_pending` they would all list and try the same
//! oldest ones. Each checks its exact outcome, so a bench
//! round that lost or doubled work fails instead of printing a figure.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use flowstate_core::ports::{DefinitionStore, EventStore, RunLeaseStore, RunStore};
use flowstate_core::{
    Dispatch, EventDispatchBackoff, NewActivation, NewEvent, NewPublishedVersion, NewRun,
    NewWorkflow, RunId, RunOutcome,
};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use serde_json::json;
use tokio::task::JoinSet;

use super::throughput::Throughput;

/// How long a bench lease lasts: far longer than a round.
const LEASE: Duration = Duration::from_secs(300);

/// The event type the bench activation listens for.
const EVENT_TYPE: &str = "bench.tick";

/// A store of `workers` connections on `url`.
async fn open(url: &str, workers: usize) -> Result<Arc<DieselStore>> {
    let config = StoreConfig::default()
        .pool_size(workers)
        .acquire_timeout(Duration::from_secs(30));
    let store = DieselStore::open(url, config)
        .await
        .context("cannot open the store")?;
    Ok(Arc::new(store))
}

/// Waits for every task of `set`, failing on the first that failed;
/// answers their outputs.
async fn join_all<T: 'static>(
    mut set: JoinSet<flowstate_core::Result<T>>,
    what: &str,
) -> Result<Vec<T>> {
    let mut outputs = Vec::new();
    while let Some(done) = set.join_next().await {
        outputs.push(
            done.with_context(|| format!("a {what} task panicked"))?
                .with_context(|| format!("a {what} task failed"))?,
        );
    }
    Ok(outputs)
}

/// Runs a batched lease claim takes at most ([`leases_batched`]): the
/// claim's transaction (one statement on PostgreSQL, six on MariaDB, four
/// on SQLite) then weighs 1/32 of a run's cost beside its `finish`, and a
/// worker holds at most 32 leases, so 32 workers hold about a tenth of a
/// 10,000-run round and the last claims leave the workers evenly loaded.
pub const LEASE_BATCH: u32 = 32;

/// Creates `runs` runs (not timed), then times `workers` workers each
/// leasing runs one at a time and finishing them, until none is left. The
/// runs other bench sections left running are leased too and counted; no
/// run may be finished twice, and every run created here must be.
pub async fn leases(url: &str, workers: usize, runs: usize) -> Result<Throughput> {
    lease_round(url, workers, runs, None).await
}

/// [`leases`] with each claim taking up to `batch` runs
/// (`claim_runs(worker, batch, ..)`), each then finished one at a time;
/// the same exact-outcome checks.
pub async fn leases_batched(
    url: &str,
    workers: usize,
    runs: usize,
    batch: u32,
) -> Result<Throughput> {
    lease_round(url, workers, runs, Some(batch)).await
}

/// Where one lease worker's time went.
#[derive(Clone, Copy, Debug, Default)]
struct Spent {
    /// Claims sent (the last, empty one included).
    claims: u32,
    /// Time waiting on them.
    claiming: Duration,
    /// Time waiting on `finish`.
    finishing: Duration,
}

impl Spent {
    /// The line saying where the workers' time went in a round of
    /// `finished` runs: whether the claim or the finish bounds the rate.
    fn line(all: &[Self], finished: usize, batch: Option<u32>) -> String {
        let claims: u32 = all.iter().map(|s| s.claims).sum();
        let claiming: Duration = all.iter().map(|s| s.claiming).sum();
        let finishing: Duration = all.iter().map(|s| s.finishing).sum();
        let ms = |total: Duration, n: usize| total.as_secs_f64() * 1e3 / n.max(1) as f64;
        let share = finishing.as_secs_f64() / (claiming + finishing).as_secs_f64().max(1e-9);
        format!(
            "    leases{}: {claims} claims, {:.2} ms each; {finished} finishes, {:.2} ms each; \
             {:.0}% of the workers' time in finish",
            batch.map_or(String::new(), |n| format!(" batched ({n})")),
            ms(claiming, claims as usize),
            ms(finishing, finished),
            share * 100.0
        )
    }
}

/// [`leases`] (`batch` `None`: `claim_run`) or [`leases_batched`]; prints
/// where the workers' time went ([`Spent::line`]).
async fn lease_round(
    url: &str,
    workers: usize,
    runs: usize,
    batch: Option<u32>,
) -> Result<Throughput> {
    let store = open(url, workers).await?;
    let created = create_runs(&store, workers, runs).await?;
    let finished = Arc::new(Mutex::new(Vec::with_capacity(runs)));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for w in 0..workers {
        let (store, finished) = (Arc::clone(&store), Arc::clone(&finished));
        set.spawn(async move {
            let worker = format!("bench-{w}");
            let mut spent = Spent::default();
            loop {
                let asked = Instant::now();
                let leases = match batch {
                    None => store.claim_run(&worker, LEASE).await?.into_iter().collect(),
                    Some(n) => store.claim_runs(&worker, n, LEASE).await?,
                };
                spent.claims += 1;
                spent.claiming += asked.elapsed();
                if leases.is_empty() {
                    return Ok(spent);
                }
                for lease in leases {
                    let asked = Instant::now();
                    store
                        .finish(lease.run.id, lease.token, RunOutcome::Completed)
                        .await?;
                    spent.finishing += asked.elapsed();
                    finished.lock().expect("not poisoned").push(lease.run.id);
                }
            }
        });
    }
    let spent = join_all(set, "lease worker").await?;
    let elapsed = started.elapsed();
    let finished = std::mem::take(&mut *finished.lock().expect("not poisoned"));
    exactly_once(&created, &finished)?;
    println!("{}", Spent::line(&spent, finished.len(), batch));
    Ok(Throughput {
        steps: finished.len(),
        elapsed,
    })
}

/// Creates `runs` runs, `workers` tasks at a time; answers their ids.
async fn create_runs(store: &Arc<DieselStore>, workers: usize, runs: usize) -> Result<Vec<RunId>> {
    let mut set = JoinSet::new();
    for w in 0..workers {
        let store = Arc::clone(store);
        let mine = runs / workers + usize::from(w < runs % workers);
        set.spawn(async move {
            let mut created = Vec::with_capacity(mine);
            for _ in 0..mine {
                let run = store
                    .create_run(NewRun::new("bench.lease", json!({})))
                    .await?;
                created.push(run.record.id);
            }
            Ok(created)
        });
    }
    Ok(join_all(set, "setup")
        .await?
        .into_iter()
        .flatten()
        .collect())
}

/// Fails unless no run of `finished` is there twice and every run of
/// `created` is.
fn exactly_once(created: &[RunId], finished: &[RunId]) -> Result<()> {
    let unique: HashSet<RunId> = finished.iter().copied().collect();
    ensure!(
        unique.len() == finished.len(),
        "{} runs were finished twice",
        finished.len() - unique.len()
    );
    let missed = created.iter().filter(|run| !unique.contains(run)).count();
    ensure!(
        missed == 0,
        "{missed} of {} runs were never leased",
        created.len()
    );
    Ok(())
}

/// How many events a bench emitter records a call
/// ([`EventStore::emit_batch`]), as a dispatcher takes up to 64 a
/// transaction.
const EMIT_BATCH: usize = 64;

/// Defines one workflow listening for [`EVENT_TYPE`] (not timed), then
/// times `workers` emitters recording `events` events for a later
/// dispatch, [`EMIT_BATCH`] a transaction, then `workers` dispatchers
/// draining them; each event starts exactly one run.
pub async fn events(url: &str, workers: usize, events: usize) -> Result<Throughput> {
    let store = open(url, workers).await?;
    // A scope of its own, so an event of an earlier round never matches.
    let scope = RunId::generate().to_string();
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: "bench".into(),
            scope_id: scope.clone(),
            name: "bench.events".into(),
        })
        .await?
        .record;
    let version = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "h1".into(),
            definition: json!({}),
        })
        .await?
        .record;
    store
        .create_activation(NewActivation {
            workflow: workflow.id,
            version: version.id,
            event_type: EVENT_TYPE.into(),
            authorization: json!({"as": "bench"}),
        })
        .await?;
    // The set-up above used one connection; the emitters' others open
    // before the clock starts, as the per-step round's do.
    super::throughput::open_every_connection(&store, workers).await;
    let started = Instant::now();
    let mut set = JoinSet::new();
    for w in 0..workers {
        let (store, scope) = (Arc::clone(&store), scope.clone());
        let mine = events / workers + usize::from(w < events % workers);
        set.spawn(async move {
            let (mut i, mut recorded) = (0, 0);
            while i < mine {
                let n = EMIT_BATCH.min(mine - i);
                let batch = (i..i + n)
                    .map(|i| {
                        NewEvent::new("bench", scope.as_str(), EVENT_TYPE, json!({"w": w, "i": i}))
                    })
                    .collect();
                let answers = store.emit_batch(batch, Dispatch::Deferred).await?;
                recorded += answers
                    .iter()
                    .filter(|a| !a.duplicate && a.runs.is_empty())
                    .count();
                i += n;
            }
            Ok(recorded)
        });
    }
    let recorded: usize = join_all(set, "emitter").await?.into_iter().sum();
    let emitting = started.elapsed();
    ensure!(
        recorded == events,
        "the emitters recorded {recorded} of {events} events (each must be recorded once, deferred)"
    );
    let dispatched = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for _ in 0..workers {
        let (store, dispatched) = (Arc::clone(&store), Arc::clone(&dispatched));
        set.spawn(async move {
            loop {
                let report =
                    flowstate_events::dispatch_queued(&*store, EventDispatchBackoff::default(), 64)
                        .await?;
                dispatched.fetch_add(report.dispatched as usize, Ordering::Relaxed);
                if report.dispatched + report.failed == 0 {
                    return Ok(());
                }
            }
        });
    }
    join_all(set, "dispatcher").await?;
    let elapsed = started.elapsed();
    let dispatched = dispatched.load(Ordering::Relaxed);
    ensure!(
        dispatched == events,
        "the dispatchers dispatched {dispatched} of {events} events (each must be dispatched exactly once)"
    );
    println!(
        "{}",
        phases_line(events, emitting, elapsed.saturating_sub(emitting))
    );
    Ok(Throughput {
        steps: events,
        elapsed,
    })
}

/// The line saying where an events round's time went: the emit phase
/// (every emitter's `emit_batch` calls, until the last returns) against
/// the dispatch phase (from then until the last dispatcher found the
/// queue empty), each as its own rate, so a round shows which of the two
/// bounds the events/s figure.
fn phases_line(events: usize, emitting: Duration, dispatching: Duration) -> String {
    let rate = |d: Duration| events as f64 / d.as_secs_f64().max(1e-9);
    let share = emitting.as_secs_f64() / (emitting + dispatching).as_secs_f64().max(1e-9);
    format!(
        "    events: emit {:.2} s ({:.0}/s), dispatch {:.2} s ({:.0}/s); {:.0}% of the round emitting",
        emitting.as_secs_f64(),
        rate(emitting),
        dispatching.as_secs_f64(),
        rate(dispatching),
        share * 100.0
    )
}
