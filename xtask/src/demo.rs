//! `cargo xtask demo`: the main job. Every part of flowstate runs together
//! in one process, under a crash, and the database is read back to prove
//! that nothing ran twice and nothing was lost.
//!
//! The engine around flowstate is small and lives in `demo/`, one file per
//! part, each saying which guarantee of flowstate it leans on:
//! [`definitions`] (workflows and activations),
//! [`emit`] (the event sources), [`dispatch`]
//! (dispatchers, the poison, its redrive), [`engine`] (the
//! worker loop under run leases), [`workflows`] and
//! [`steps`] (the workflow code and its steps and effects),
//! [`outside`] (the carrier's signals and the customers'
//! cancels), [`sweep`] (recovery), [`users`]
//! (virtual users), [`crash`], [`provider`]
//! (the demo's own tables of side effects and executions),
//! [`reconcile`] (effects a settled run left stranded),
//! [`verify`] (the invariants, from the database),
//! [`progress`] and [`report`].
//!
//! This file wires them: it opens a store per task, starts everything,
//! polls the database until the session's work is done (its events
//! dispatched, its runs settled), fixes the poison and redrives it, stops
//! everything, and judges.

mod crash;
mod definitions;
mod dispatch;
mod emit;
mod engine;
mod metrics;
mod outside;
mod progress;
mod provider;
mod reconcile;
mod report;
mod steps;
mod sweep;
mod users;
mod verify;
mod workflows;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use flowstate_core::RunId;
use flowstate_metrics::Metered;
use flowstate_store_diesel::{DieselStore, StoreConfig, migrate};
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use self::crash::{Crash, CrashNotice};
use self::engine::{Engine, Shared};
use self::outside::Outside;
use self::provider::Provider;
use self::report::Summary;
use crate::backend;

/// What the demo runs. Every number is a flag.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The database: postgres://, mysql:// (or mariadb://), sqlite://PATH.
    /// Default: the SQLite file target/flowstate-demo.db. A server database
    /// is created if missing; the demo only adds rows, scoped to its
    /// session.
    #[arg(long = "database-url", value_name = "URL")]
    pub url: Option<String>,
    /// Start from an empty database (the SQLite file removed, the server
    /// database dropped and created again).
    #[arg(long)]
    pub fresh: bool,
    /// `order.placed` events (orders), each emitted once, about 10 % twice.
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = crate::positive)]
    pub events: usize,
    /// Worker tasks, each with its own connections.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = crate::positive)]
    pub workers: usize,
    /// Emitter tasks.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = crate::positive)]
    pub emitters: usize,
    /// Dispatcher runners over `dispatch_queued`.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = crate::positive)]
    pub dispatchers: usize,
    /// Percent of orders emitted a second time with the same dedupe key.
    #[arg(long, value_name = "PCT", default_value_t = 10)]
    pub duplicate_percent: u32,
    /// Percent of `charge` attempts declined (first and second attempts).
    #[arg(long, value_name = "PCT", default_value_t = 20)]
    pub charge_failure_percent: u32,
    /// Percent of orders their customer cancels mid-flight.
    #[arg(long, value_name = "PCT", default_value_t = 2)]
    pub cancel_percent: u32,
    /// Orders in flight at most: emitters wait while this many orders are
    /// unsettled.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = crate::positive)]
    pub in_flight: usize,
    /// Poison `catalog.imported` events (dead-lettered, then redriven).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub poison: usize,
    /// The claim timeout of every step, in milliseconds: how long a step
    /// held by the crashed worker stays held.
    #[arg(long, value_name = "MS", default_value_t = 2_000, value_parser = crate::positive)]
    pub claim_timeout_ms: usize,
    /// Run without the crash.
    #[arg(long)]
    pub no_crash: bool,
    /// More output: -v for info, -vv for debug (RUST_LOG overrides).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Sets up `tracing` output on stderr: `RUST_LOG` if set, else errors only,
/// info with `-v`, debug with `-vv`.
pub fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "error",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// How long the demo waits with nothing moving (no order emitted, no
/// event dispatched, no run settled or started) before it calls the work
/// stuck. A slow database only moves slowly; a lost run stops everything
/// once the rest is done.
const STALL: Duration = Duration::from_secs(60);

/// Runs the demo; an error names every invariant that did not hold.
pub async fn run(options: Options) -> Result<()> {
    if options.workers < 2 {
        bail!("--workers must be at least 2: one of them crashes");
    }
    let url = match &options.url {
        Some(url) => url.clone(),
        None => format!(
            "sqlite://{}",
            backend::target_dir().join("flowstate-demo.db").display()
        ),
    };
    let dialect = backend::parse_url(&url)?.dialect;
    metrics::install();
    backend::prepare(&url, options.fresh).await?;
    let applied = migrate::up(&url).await.context("migrate up failed")?;
    let session = format!("demo-{}", &RunId::generate().to_string()[24..]);
    println!(
        "flowstate demo on {} {}{}",
        dialect.name(),
        backend::redact(&url),
        if options.fresh { " (fresh)" } else { "" }
    );
    println!(
        "  session {session}: {} orders, {} workers, {} emitters, {} dispatchers; {} migrations applied",
        options.events,
        options.workers,
        options.emitters,
        options.dispatchers,
        applied.len()
    );

    let started = Instant::now();
    if options.fresh && dialect == flowstate_store_diesel::Dialect::Sqlite {
        let target = backend::parse_url(&url)?.target;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", provider::provider_file(&target)));
        }
    }
    Provider::connect(&url, &session)
        .await?
        .create_tables()
        .await?;
    let mut provider = Provider::connect_checker(&url, &session).await?;
    let admin = open(&url, 2, StoreConfig::default()).await?;
    definitions::publish(&admin, &session).await?;

    let (crash_tx, mut crash_rx) = oneshot::channel();
    let (carrier_tx, carrier_rx) = mpsc::unbounded_channel();
    let (customer_tx, customer_rx) = mpsc::unbounded_channel();
    let victim = (!options.no_crash).then(|| "worker-0".to_owned());
    let shared = Arc::new(Shared {
        charge_failure_percent: options.charge_failure_percent,
        cancel_percent: options.cancel_percent,
        claim_timeout: Duration::from_millis(options.claim_timeout_ms as u64),
        crash: Crash::new(victim.clone(), (options.events / 5).max(1) as u64, crash_tx),
        carrier: carrier_tx,
        customer: customer_tx,
        cancels_in_flight: AtomicU64::new(0),
        fencing_refusals: AtomicU64::new(0),
        stranded_resolved: AtomicU64::new(0),
        effects_replayed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        error_samples: std::sync::Mutex::new(Vec::new()),
    });
    let outside = Arc::new(Outside::default());

    let (sweeper, redriven) = sweep::spawn(open(&url, 2, StoreConfig::default()).await?);
    let mut capped = Vec::new();
    for _ in 0..options.dispatchers {
        capped.push(open(&url, 1, dispatch::capped(StoreConfig::default())).await?);
    }
    let dispatchers = dispatch::spawn(capped);

    let (stop, stopped) = watch::channel(false);
    let mut workers = Vec::new();
    for w in 0..options.workers {
        let engine = Engine {
            name: format!("worker-{w}"),
            store: Metered::new(open(&url, 1, StoreConfig::default()).await?),
            provider: Mutex::new(Provider::connect(&url, &session).await?),
            shared: Arc::clone(&shared),
        };
        workers.push(tokio::spawn(engine.work(stopped.clone())));
    }
    let carrier = tokio::spawn(outside::carrier(
        open(&url, 1, StoreConfig::default()).await?,
        carrier_rx,
        Arc::clone(&outside),
        Arc::clone(&shared),
    ));
    let customers = tokio::spawn(outside::customers(
        open(&url, 1, StoreConfig::default()).await?,
        session.clone(),
        customer_rx,
        Arc::clone(&outside),
        Arc::clone(&shared),
    ));
    let users_started = Instant::now();
    let users = users::start(open(&url, 1, StoreConfig::default()).await?, &session).await?;

    let mut emitted = emit::poison(&admin, &session, options.poison).await?;
    let admission = Arc::new(emit::Admission::default());
    admission
        .allowed
        .store(options.in_flight as u64, Ordering::SeqCst);
    let mut emitters = JoinSet::new();
    for task in 0..options.emitters {
        let store = open(&url, 1, StoreConfig::default()).await?;
        emitters.spawn(emit::orders(
            store,
            session.clone(),
            (task, options.emitters),
            options.events,
            options.duplicate_percent,
            Arc::clone(&admission),
        ));
    }

    // Poll the database until the session's work is done: what is in
    // flight every half second (cheap at any size). The display's totals
    // cost the session's size (2-3 s a reading at 100,000 orders on a
    // loaded machine), so a task of their own reads them, on a connection
    // of its own, at most a tenth of the time: the poll that admits orders
    // never waits behind them.
    let working = Instant::now();
    let (totals_tx, mut totals_rx) = watch::channel(None);
    let totals = tokio::spawn(verify::totals(
        Provider::connect_checker(&url, &session).await?,
        totals_tx,
    ));
    let mut progress = progress::Progress::new();
    let mut crash: Option<(CrashNotice, Instant)> = None;
    let mut crash_open = victim.is_some();
    let mut emitters_left = options.emitters;
    let mut poison_fixed = options.poison == 0;
    let mut dead_letters = (0, 0);
    let mut fixed_dispatcher = Vec::new();
    let mut first_dispatchers = Some(dispatchers);
    let mut dispatch_totals = dispatch::Dispatched::default();
    let mut stuck = None;
    let mut users = Some(users);
    let mut runner = None;
    let mut moved = (Instant::now(), (0, 0, 0, 0));
    loop {
        tokio::select! {
            notice = &mut crash_rx, if crash_open => {
                crash_open = false;
                if let Ok(notice) = notice {
                    // The crash: the task is gone, its leases and its
                    // step claim still held in the database.
                    workers[0].abort();
                    crash = Some((notice, Instant::now()));
                }
            }
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        while let Some(done) = emitters.try_join_next() {
            emitters_left -= 1;
            emitted.add(done.context("an emitter panicked")??);
        }
        if users_started.elapsed() >= users::RUNS_FOR {
            // The personas have been ticked their few times (the ghost's
            // stale run reaped): stop them, the orders go on.
            if let Some(users) = users.take() {
                runner = Some(users.stop().await?);
            }
        }
        let polled = Instant::now();
        let poll = verify::poll(&mut provider, false).await?;
        let totals_read = if totals_rx.has_changed().unwrap_or(false) {
            *totals_rx.borrow_and_update()
        } else {
            None
        };
        progress.update(totals_read, polled.elapsed());
        // Room for more orders: the window less the orders the database
        // says are in flight (events not dispatched, runs not settled).
        admission.allowed.store(
            admission.emitted.load(Ordering::SeqCst) + options.in_flight as u64
                - poll.orders_in_flight.min(options.in_flight as u64),
            Ordering::SeqCst,
        );
        let quiet = emitters_left == 0
            && poll.pending == 0
            && poll.unsettled == 0
            && shared.cancels_in_flight.load(Ordering::SeqCst) == 0;
        if quiet && !poison_fixed {
            // Every event is dispatched but the dead letters: "fix" the
            // dispatchers (a limit that fits the payload), then redrive.
            if let Some(first) = first_dispatchers.take() {
                dispatch_totals = dispatch::shutdown(first).await;
            }
            fixed_dispatcher = dispatch::spawn(vec![open(&url, 1, StoreConfig::default()).await?]);
            dead_letters = dispatch::redrive_dead_letters(&admin, &session).await?;
            poison_fixed = true;
            continue;
        }
        if quiet && poll.dead == Some(0) {
            break;
        }
        let state = (
            admission.emitted.load(Ordering::SeqCst),
            poll.pending,
            poll.unsettled,
            poll.orders_in_flight,
        );
        if state != moved.1 {
            moved = (Instant::now(), state);
        } else if moved.0.elapsed() > STALL {
            stuck = Some(format!(
                "nothing moved for {} s (after {} s): {} events pending, {} dead-lettered, {} runs unsettled",
                STALL.as_secs(),
                working.elapsed().as_secs(),
                poll.pending,
                poll.dead.map_or_else(|| "?".to_owned(), |d| d.to_string()),
                poll.unsettled
            ));
            break;
        }
    }
    let work_time = working.elapsed();
    totals.abort();
    // The last figures, read whatever their cost.
    let last = verify::poll(&mut provider, true).await?;
    progress.update(last.snapshot.map(|s| (s, Instant::now())), Duration::ZERO);
    let rates = progress.finish();
    let stopping = Instant::now();

    // Stop everything, each after what it was doing.
    let _ = stop.send(true);
    for worker in workers {
        let _ = worker.await;
    }
    let sweeps = sweeper.shutdown().await;
    let first = match first_dispatchers.take() {
        Some(first) => dispatch::shutdown(first).await,
        None => dispatch_totals,
    };
    let fixed = dispatch::shutdown(fixed_dispatcher).await;
    let runner = match (runner, users) {
        (Some(report), _) => report,
        (None, Some(users)) => {
            // A run shorter than the personas' few ticks: let them have
            // them (the ghost's stale run must be reaped).
            tokio::time::sleep_until((users_started + users::RUNS_FOR).into()).await;
            users.stop().await?
        }
        (None, None) => unreachable!("the users are stopped once, with their report kept"),
    };
    carrier.abort();
    customers.abort();
    // Done emitting, or stuck: an emitter still waiting for room is
    // stopped, not waited for.
    emitters.shutdown().await;
    let stop_time = stopping.elapsed();

    let checking = Instant::now();
    reconcile::settle_stranded(&admin, &mut provider, &shared).await?;
    let found = verify::read_back(&mut provider, &admin).await?;
    let personas = users::read_back(&admin, &session).await?;
    tracing::info!(took = ?checking.elapsed(), "invariants read back");
    let redriven = redriven
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut summary = Summary {
        options: options.clone(),
        emitted,
        first,
        fixed,
        dead_letters,
        found,
        personas,
        runner,
        sweeps,
        redriven,
        crash,
        recovered: Vec::new(),
        shared,
        outside,
        stuck,
        setup_time: working - started,
        work_time,
        rates,
        stop_time,
        check_time: Duration::ZERO,
        total_time: Duration::ZERO,
    };
    summary.read_recovered(&admin).await?;
    summary.check_time = checking.elapsed();
    summary.total_time = started.elapsed();
    summary.print();
    summary.print_timeline(&admin, &mut provider).await?;
    summary.verdict()
}

/// Opens a store of its own (`connections` in its pool) on `url`.
async fn open(url: &str, connections: usize, config: StoreConfig) -> Result<DieselStore> {
    DieselStore::open(url, config.pool_size(connections))
        .await
        .with_context(|| format!("cannot open {}", backend::redact(url)))
}
