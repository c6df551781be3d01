//! `cargo xtask bench`: every backend side by side.
//!
//! For each database (by default every backend this build has: a fresh
//! SQLite file under `target/`, and database `flowstate_bench` on the
//! PostgreSQL and MariaDB servers, created if missing) it resets the
//! flowstate tables, then measures:
//! - throughput: steps per second for claim + succeed with N workers, each
//!   on a connection of its own ([`throughput`]), for every worker count of
//!   `--concurrency`, over `--rounds` rounds (median, min and max shown);
//! - contention: 32 workers racing for the same 1,000 steps, which must end
//!   with each step won exactly once ([`contention`]);
//! - statements per operation, counted with `StatementLog`
//!   ([`statements`]): budgets are counted, not timed;
//! - batched mode, a column beside each dialect's: the same number of steps
//!   through `flowstate-pool`'s `WorkerPool` (claims of 500, completions
//!   group-committed), with its statements per step (`batched`);
//! - the workloads beside steps, in the dialect's column ([`workloads`]):
//!   run leasing (half as many runs as steps, `claim_run` + `finish`; and
//!   batched, `claim_runs` of 32 + `finish` each, its rounds taken in turn
//!   with the one-run claims') and events (a quarter as many, emitted for
//!   a later dispatch, then dispatched until drained), each checked
//!   exactly-once; under the table, each workload's median against the
//!   column's per-step median ([`report::StepRatio`]).
//!
//! `--peers` adds graphile-worker's fast preset beside PostgreSQL's batched
//! mode, its rounds taken in turn with flowstate's ([`peer`]), and prints
//! the ratio of each pair as for the baseline below.
//!
//! `--json FILE` writes the whole report ([`report`]); `--compare FILE`
//! prints this run's medians against that earlier report's. `--smoke` is
//! CI's run: tiny sizes, and a statement count off its budget fails it.
//!
//! With the `postgres` feature it also runs the same claim + succeed work as
//! hand-written SQL on PostgreSQL (`baseline`), the figure DESIGN.md asks
//! flowstate to come close to, and with the `mysql` feature on MySQL/MariaDB
//! (`mysql_baseline`). Their rounds alternate with the dialect's per-step
//! rounds ([`interleaved`]), and the ratio of each pair is printed under
//! the table and written in the JSON (`Report::paired_rounds`): measured one
//! section after the other, the same code differed by a quarter on a 2-core
//! machine.
//!
//! On SQLite the per-step rounds are taken in turn with the same work on
//! a file without the batch claim's two partial indexes, and the ratio of
//! the pair is what they cost a per-step claim ([`index_cost`]).
//! `--backlog N` adds per-step, batched, run lease and event rounds on a
//! second database holding a backlog of `N` queued steps, held and
//! sleeping runs, history rows and dispatched events, each round in turn
//! with the same work on a database without one ([`backlog`]).
//! `--soak MINUTES` runs batched work with retention on for that long and
//! prints the rate and the tables' and indexes' size every minute
//! ([`soak`]). `--only SECTIONS` measures some sections only (see
//! [`SECTIONS`]).
//!
//! `--galera` (with the `mysql` feature and `galera-4` installed) starts a
//! throw-away 3-node MariaDB Galera cluster and measures per-step, batched,
//! run leases and events on it with the workers spread over the nodes,
//! each round in turn with the same work on the machine's MariaDB, and
//! prints the ratio of each pair and the conflicts the store retried and
//! let through ([`galera`]); `--galera-steps N` sizes its rounds. Neither
//! `--smoke` nor a plain run starts the cluster; `--smoke --galera` takes
//! its tiny round.
//!
//! With the `postgres` feature and PgBouncer installed, it also measures
//! PostgreSQL's per-step and batched work through a throw-away PgBouncer
//! in transaction mode (`?pool_mode=transaction`), each round taken in
//! turn with the direct one's, and prints the ratio of each pair
//! ([`pgbouncer`]); `--smoke` takes its tiny round too. Without PgBouncer
//! it says so loudly and measures the rest.

mod backlog;
#[cfg(feature = "postgres")]
mod baseline;
mod batched;
mod contention;
#[cfg(feature = "mysql")]
mod galera;
#[cfg(feature = "sqlite")]
mod index_cost;
#[cfg(feature = "mysql")]
mod mysql_baseline;
mod peer;
#[cfg(feature = "postgres")]
mod pgbouncer;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod prepared;
mod prune;
mod report;
mod soak;
mod statements;
mod throughput;
mod workloads;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use flowstate_store_diesel::{Dialect, migrate};

use self::report::{Column, Report, Rounds, Workload};
use crate::backend::{self, DialectExt};

/// What the bench measures, and where.
#[derive(Clone, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches of the command line, not a state"
)]
pub struct Options {
    /// The databases; none means every backend this build has, on its bench
    /// database.
    pub urls: Vec<String>,
    /// Steps claimed and succeeded per round. The default, 20,000, keeps
    /// the first use of each statement on each of 32 connections (a prepare)
    /// from weighing on the figure: at 4,000 it cost PostgreSQL a third.
    pub steps: usize,
    /// The worker counts to measure, each in its own rounds; empty means
    /// one count per dialect: 32 on a server, 4 on SQLite.
    pub concurrency: Vec<usize>,
    /// Rounds per worker count; the table shows their median, min and max.
    pub rounds: usize,
    /// Workers and steps of the contention race.
    pub contention: (usize, usize),
    /// Print the SQL each operation sent.
    pub verbose: bool,
    /// Write the report as JSON here.
    pub json: Option<PathBuf>,
    /// Compare with the JSON report of an earlier run.
    pub compare: Option<PathBuf>,
    /// Tiny sizes, for CI: one round of 200 steps with 4 workers, a race of
    /// 8 workers for 50 steps, and a statement count other than the
    /// budget's fails the run. Never a timing assertion.
    pub smoke: bool,
    /// Beside PostgreSQL's batched mode, run graphile-worker's fast preset
    /// on the same server, round for round ([`peer`]); needs Node.js.
    pub peers: bool,
    /// Start a throw-away 3-node Galera cluster and measure it beside the
    /// machine's MariaDB, round for round ([`galera`]).
    pub galera: bool,
    /// Steps per round on the cluster; `None` means `steps`, at most
    /// 5,000.
    pub galera_steps: Option<usize>,
    /// Per-step, batched, run leases and events beside a backlog of this
    /// many queued steps, held and sleeping runs, history rows and
    /// dispatched events ([`backlog`]).
    pub backlog: Option<usize>,
    /// Batched work with retention on for this many minutes ([`soak`]).
    pub soak: Option<u32>,
    /// The sections to measure, by their names in [`SECTIONS`]; empty means
    /// every one (`backlog` only with [`Options::backlog`], `soak` only
    /// with [`Options::soak`]).
    pub only: Vec<String>,
}

/// The bench's sections, by the names `--only` takes (`galera` only with
/// `--galera`, or named): `per-step` (with the
/// hand-written baselines and PgBouncer), `prune`, `contention`,
/// `statements`, `workloads` (leases and events), `batched`, `backlog`,
/// `soak`.
pub const SECTIONS: [&str; 9] = [
    "per-step",
    "prune",
    "contention",
    "statements",
    "workloads",
    "batched",
    "backlog",
    "soak",
    "galera",
];

impl Default for Options {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            steps: 20_000,
            concurrency: Vec::new(),
            rounds: 3,
            contention: (32, 1_000),
            verbose: false,
            json: None,
            compare: None,
            smoke: false,
            peers: false,
            galera: false,
            galera_steps: None,
            backlog: None,
            soak: None,
            only: Vec::new(),
        }
    }
}

impl Options {
    /// The smoke sizes over `self` (see [`Options::smoke`]).
    pub fn smoke(self) -> Self {
        Self {
            steps: 200,
            concurrency: vec![4],
            rounds: 1,
            contention: (8, 50),
            smoke: true,
            ..self
        }
    }

    /// Whether `section` (one of [`SECTIONS`]) is measured.
    fn runs(&self, section: &str) -> bool {
        debug_assert!(SECTIONS.contains(&section), "{section}");
        (self.only.is_empty() || self.only.iter().any(|s| s == section))
            && (section != "backlog" || self.backlog.is_some())
            && (section != "galera" || self.galera || !self.only.is_empty())
            && (section != "soak" || self.soak.is_some())
    }
}

/// The name of the database the bench creates on each server.
const BENCH_DATABASE: &str = "flowstate_bench";

/// Runs the bench and prints the table; fails if any measurement failed
/// (and, with `--smoke`, if any statement count is off its budget).
pub async fn run(options: Options) -> Result<()> {
    if let Some(unknown) = options
        .only
        .iter()
        .find(|s| !SECTIONS.contains(&s.as_str()))
    {
        bail!("--only {unknown}: the sections are {}", SECTIONS.join(", "));
    }
    let earlier = options
        .compare
        .as_deref()
        .map(report::read_json)
        .transpose()?;
    let targets: Vec<(Dialect, String, bool)> = if options.urls.is_empty() {
        for dialect in backend::in_print_order().iter().filter(|d| !d.compiled()) {
            println!(
                "(this xtask build leaves out {}: build it with its feature)",
                dialect.name()
            );
        }
        backend::in_print_order()
            .into_iter()
            .filter(|d| d.compiled())
            .map(|d| (d, d.database_url(BENCH_DATABASE), true))
            .collect()
    } else {
        options
            .urls
            .iter()
            .map(|url| Ok((backend::parse_url(url)?.dialect, url.clone(), false)))
            .collect::<Result<_>>()?
    };
    println!(
        "flowstate bench: claim + succeed, {} steps per round, {} round(s) per worker count",
        options.steps, options.rounds
    );
    if cfg!(debug_assertions) {
        println!(
            "(a debug build: for figures worth quoting, `cargo run --release -p xtask -- bench`)"
        );
    }
    let mut columns = Vec::new();
    let mut off_budget = Vec::new();
    let mut peer_failures = Vec::new();
    let mut prune_lines = Vec::new();
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut backlogs = Vec::new();
    let mut soaks = Vec::new();
    #[cfg(feature = "mysql")]
    let single_mysql = targets
        .iter()
        .find(|(dialect, _, _)| *dialect == Dialect::Mysql)
        .map_or_else(
            || Dialect::Mysql.database_url(BENCH_DATABASE),
            |(_, url, _)| url.clone(),
        );
    let per_dialect = SECTIONS
        .iter()
        .any(|section| *section != "galera" && options.runs(section));
    let targets = if per_dialect { targets } else { Vec::new() };
    for (dialect, url, ours) in targets {
        let name = dialect.name();
        println!(
            "  {name} {}: resetting the flowstate tables",
            backend::redact(&url)
        );
        if let Err(err) = reset(&url, ours).await {
            columns.push(Column {
                label: name.to_owned(),
                throughput: Err(anyhow::anyhow!("{err:#}")),
                contention: None,
                statements: Err(err),
                statements_per_step: None,
                workloads: Vec::new(),
            });
            continue;
        }
        let concurrency = if options.concurrency.is_empty() {
            vec![dialect.default_workers()]
        } else {
            options.concurrency.clone()
        };
        #[cfg(feature = "postgres")]
        let bouncer = if dialect == Dialect::Postgres
            && (options.runs("per-step") || options.runs("batched"))
        {
            let workers = concurrency.iter().copied().max().unwrap_or(1);
            match pgbouncer::start(&url, workers).await {
                Ok(bouncer) => bouncer,
                Err(err) => {
                    columns.push(Column::rounds(
                        pgbouncer::LABEL,
                        Err(err.context("PgBouncer for the bench")),
                    ));
                    None
                }
            }
        } else {
            None
        };
        #[cfg(feature = "postgres")]
        let pooled = bouncer.as_ref().map(|b| b.url.as_str());
        #[cfg(not(feature = "postgres"))]
        let pooled: Option<&str> = None;
        let (throughput, hand, through_pooler) = if options.runs("per-step") {
            per_step(dialect, &url, pooled, &concurrency, &options).await
        } else {
            (Ok(Vec::new()), Vec::new(), None)
        };
        if options.runs("prune") {
            // Per-step beside a prune, each round in turn with the same
            // work alone (issue 31).
            prune_section(
                name,
                &url,
                &concurrency,
                &options,
                &mut prune_lines,
                &mut columns,
            )
            .await;
        }
        let contention = if options.runs("contention") {
            let (race_workers, race_steps) = options.contention;
            println!("  {name}: contention, {race_workers} workers racing for {race_steps} steps");
            Some(contention::measure(&url, race_workers, race_steps).await)
        } else {
            None
        };
        let statements = if options.runs("statements") {
            println!("  {name}: statements per operation");
            let statements = statements::measure(&url).await;
            if let Ok(counted) = &statements {
                off_budget.extend(statements::unexpected(dialect, counted));
            }
            statements
        } else {
            Ok(Vec::new())
        };
        let workloads = if options.runs("workloads") {
            workloads_section(name, &url, &concurrency, &options).await
        } else {
            Vec::new()
        };
        columns.push(Column {
            label: name.to_owned(),
            throughput,
            contention,
            statements,
            statements_per_step: None,
            workloads,
        });
        // Through PgBouncer, beside the direct column it was measured with.
        if let Some(throughput) = through_pooler {
            columns.push(Column::rounds(POOLED, throughput));
            pairs.push((POOLED.to_owned(), name.to_owned()));
        }
        if options.runs("batched") {
            let peer = if options.peers && dialect == Dialect::Postgres {
                peer::Peer::prepare(&url)
                    .await
                    .map_err(|err| peer_failures.push(format!("{}: {err:#}", peer::LABEL)))
                    .ok()
            } else {
                None
            };
            let (batch, others) =
                batched::column(name, &url, &concurrency, &options, peer.as_ref(), pooled).await;
            let batch_label = batch.label.clone();
            columns.push(batch);
            for other in others {
                if other.label == peer::LABEL {
                    pairs.push((batch_label.clone(), other.label.clone()));
                } else {
                    pairs.push((other.label.clone(), batch_label.clone()));
                }
                columns.push(other);
            }
        }
        for hand in hand {
            pairs.push((name.to_owned(), hand.label.clone()));
            columns.push(hand);
        }
        if let (true, Some(n)) = (options.runs("backlog"), options.backlog) {
            match backlog_section(dialect, &url, n, &concurrency, &options, &mut pairs).await {
                Ok((seeded, measured)) => {
                    backlogs.push(seeded.to_json());
                    columns.extend(measured);
                }
                Err(err) => columns.push(Column::rounds(
                    &backlog::label(name, "", n),
                    Err(err.context("the backlog")),
                )),
            }
        }
        if let (true, Some(minutes)) = (options.runs("soak"), options.soak) {
            let workers = concurrency.iter().copied().max().unwrap_or(1);
            let settings = soak::Settings::minutes(minutes, options.steps, workers);
            match soak::run(dialect, &url, settings).await {
                Ok(soaked) => soaks.push(soaked),
                Err(err) => columns.push(Column::rounds(
                    &format!("{name} soak"),
                    Err(err.context("the soak")),
                )),
            }
        }
    }
    let mut workload_pairs = Vec::new();
    let mut galera_json = None;
    let mut galera_lines = Vec::new();
    #[cfg(feature = "mysql")]
    if options.runs("galera") {
        match galera::section(&single_mysql, &options).await {
            Ok(found) => {
                columns.extend(found.columns);
                pairs.extend(found.pairs);
                workload_pairs.extend(found.workload_pairs);
                galera_json = Some(found.json);
                galera_lines = found.lines;
            }
            Err(err) => columns.push(Column::rounds(
                galera::LABEL,
                Err(err.context("the Galera section")),
            )),
        }
    }
    #[cfg(not(feature = "mysql"))]
    if options.runs("galera") {
        println!("  !! --galera needs the mysql feature: this xtask build leaves it out");
    }
    let report = Report {
        steps: options.steps,
        rounds: options.rounds,
        columns,
        pairs,
        backlogs,
        workload_pairs,
        galera: galera_json,
        soaks: soaks.iter().map(soak::Soak::to_json).collect(),
    };
    println!("\n{}", report.table(options.verbose));
    for (ours, theirs) in &report.pairs {
        let goal = if ours.starts_with(POOLED) || ours.contains(" +") || theirs == HAND_MYSQL {
            " (goal: at least 0.90x)"
        } else {
            ""
        };
        let goal = if ours.starts_with(GALERA) {
            " (goal: at least 0.50x)"
        } else {
            goal
        };
        for line in report.paired_ratios(ours, theirs) {
            println!("{line}{goal}");
        }
    }
    for (ours, theirs, title) in &report.workload_pairs {
        for line in report.paired_workload_ratios(ours, theirs, title) {
            println!("{line}");
        }
    }
    for ratio in report.step_ratios() {
        println!("{}", ratio.line());
    }
    for line in &galera_lines {
        println!("{line}");
    }
    for line in soaks.iter().flat_map(soak::Soak::summary) {
        println!("{line}");
    }
    for line in &prune_lines {
        println!("{line}");
    }
    for line in &off_budget {
        println!("off budget: {line}");
    }
    if let Some(path) = &options.json {
        report.write_json(path)?;
        println!("report written to {}", path.display());
    }
    if let Some(earlier) = &earlier {
        println!("{}", report::compare(&report.to_json(), earlier));
    }
    let mut failures: Vec<String> = report.columns.iter().flat_map(Column::failures).collect();
    if options.smoke {
        failures.extend(off_budget);
    }
    failures.extend(peer_failures);
    if !failures.is_empty() {
        bail!("bench failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

/// Per-step beside a prune on `url`, each round in turn with the same
/// work alone: the column, and the ratio lines ([`prune::ratios`]).
async fn prune_section(
    name: &str,
    url: &str,
    concurrency: &[usize],
    options: &Options,
    lines: &mut Vec<String>,
    columns: &mut Vec<Column>,
) {
    let prune_label = prune::label(name);
    let deleted = std::sync::Mutex::new(Vec::new());
    let [alone, beside] = interleaved(
        [name, prune_label.as_str()],
        concurrency,
        options,
        async |index, workers, label| {
            if index == 0 {
                return throughput::measure(url, workers, options.steps, label).await;
            }
            let (measured, during) = prune::measure(url, workers, options.steps, label).await?;
            deleted
                .lock()
                .expect("deleted")
                .push((during, measured.elapsed));
            Ok(measured)
        },
    )
    .await;
    if let (Ok(alone), Ok(beside)) = (&alone, &beside) {
        lines.extend(prune::ratios(
            name,
            alone,
            beside,
            &deleted.lock().expect("deleted"),
        ));
    }
    columns.push(Column::rounds(&prune_label, beside));
}

/// The run leases' workload title (its rows in the table).
const LEASES_TITLE: &str = "run leases: claim_run + finish, runs/s";

/// The batched run leases' workload title (its rows in the table); the
/// batch is [`workloads::LEASE_BATCH`].
const LEASES_BATCHED_TITLE: &str = "run leases batched: claim_runs(32) + finish, runs/s";

/// The events' workload title (its rows in the table).
const EVENTS_TITLE: &str = "events: emit_batch(64) deferred + dispatch(64), events/s";

/// The label the Galera section's columns start with, whose ratios have a
/// goal.
#[cfg(feature = "mysql")]
const GALERA: &str = galera::LABEL;
#[cfg(not(feature = "mysql"))]
const GALERA: &str = "galera";

/// Run leases (one run a claim, and [`workloads::LEASE_BATCH`] a claim,
/// their rounds taken in turn) and events on `url`, in the dialect's
/// column.
async fn workloads_section(
    name: &str,
    url: &str,
    concurrency: &[usize],
    options: &Options,
) -> Vec<Workload> {
    let (leases, events) = match chosen_workloads() {
        Ok(chosen) => chosen,
        Err(err) => {
            return vec![Workload {
                title: EVENTS_TITLE,
                rounds: Err(err),
            }];
        }
    };
    let mut measured = Vec::new();
    if leases {
        measured.extend(leases_workloads(name, url, concurrency, options).await);
    }
    if events {
        measured.push(Workload {
            title: EVENTS_TITLE,
            rounds: rounds(
                &format!("{name} events"),
                concurrency,
                options,
                async |workers, _| workloads::events(url, workers, options.steps / 4).await,
            )
            .await,
        });
    }
    measured
}

/// The variable naming the workloads [`workloads_section`] measures,
/// comma-separated: `leases` (one run a claim and batched, taken in turn)
/// and `events`; both without it. Profiling one workload need not wait
/// for the other's rounds.
const WORKLOADS_VARIABLE: &str = "FLOWSTATE_BENCH_WORKLOADS";

/// Whether [`WORKLOADS_VARIABLE`] asks for (leases, events).
fn chosen_workloads() -> Result<(bool, bool)> {
    let Ok(names) = std::env::var(WORKLOADS_VARIABLE) else {
        return Ok((true, true));
    };
    let (mut leases, mut events) = (false, false);
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "leases" => leases = true,
            "events" => events = true,
            other => bail!("{WORKLOADS_VARIABLE}: no workload {other:?} (leases, events)"),
        }
    }
    Ok((leases, events))
}

/// Run leases, one run a claim and [`workloads::LEASE_BATCH`] a claim,
/// their rounds taken in turn, on `url`.
async fn leases_workloads(
    name: &str,
    url: &str,
    concurrency: &[usize],
    options: &Options,
) -> [Workload; 2] {
    let runs = options.steps / 2;
    let [one, batched] = interleaved(
        [
            format!("{name} leases").as_str(),
            format!("{name} leases batched").as_str(),
        ],
        concurrency,
        options,
        async |index, workers, _| {
            if index == 0 {
                workloads::leases(url, workers, runs).await
            } else {
                workloads::leases_batched(url, workers, runs, workloads::LEASE_BATCH).await
            }
        },
    )
    .await;
    [
        Workload {
            title: LEASES_TITLE,
            rounds: one,
        },
        Workload {
            title: LEASES_BATCHED_TITLE,
            rounds: batched,
        },
    ]
}

/// Seeds a backlog of `n` beside `url` ([`backlog::seed`]), then measures
/// per-step and batched, run leases (one run a claim, then
/// [`workloads::LEASE_BATCH`] a claim) and events there, each round in turn
/// with the same work on `url`, at the sizes [`workloads_section`] takes:
/// what was seeded, and two columns a work (each pair added to `pairs`).
async fn backlog_section(
    dialect: Dialect,
    url: &str,
    n: usize,
    concurrency: &[usize],
    options: &Options,
    pairs: &mut Vec<(String, String)>,
) -> Result<(backlog::Seeded, Vec<Column>)> {
    let name = dialect.name();
    let beside = backlog::url_beside(dialect, url)?;
    println!(
        "  {name}: seeding a backlog of {n} in {}",
        backend::redact(&beside)
    );
    let works = backlog::works()?;
    let seeded = backlog::seed(dialect, &beside, n).await?;
    backlog::refresh(dialect, url).await?;
    println!("  {name}: seeded in {:.1} s", seeded.elapsed.as_secs_f64());
    let mut columns = Vec::new();
    for work in works {
        let (without, with) = (backlog::label(name, work, 0), backlog::label(name, work, n));
        let [alone, backlogged] = interleaved(
            [without.as_str(), with.as_str()],
            concurrency,
            options,
            async |index, workers, label| {
                let target = if index == 0 { url } else { beside.as_str() };
                backlog_work(work, target, workers, options, label).await
            },
        )
        .await;
        columns.push(Column::rounds(&without, alone));
        columns.push(Column::rounds(&with, backlogged));
        pairs.push((with, without));
    }
    Ok((seeded, columns))
}

/// One round of the backlog section's `work` (one of [`backlog::WORKS`])
/// on `url`.
async fn backlog_work(
    work: &str,
    url: &str,
    workers: usize,
    options: &Options,
    label: &str,
) -> Result<throughput::Throughput> {
    match work {
        "" => throughput::measure(url, workers, options.steps, label).await,
        " batch" => batched::measure(url, workers, options.steps, label)
            .await
            .map(|round| round.throughput),
        " leases" => workloads::leases(url, workers, options.steps / 2).await,
        " leases batched" => {
            workloads::leases_batched(url, workers, options.steps / 2, workloads::LEASE_BATCH).await
        }
        " events" => workloads::events(url, workers, options.steps / 4).await,
        other => bail!("no backlog work {other:?}"),
    }
}

/// Measures every worker count in `concurrency`, `options.rounds` times
/// each, printing a line per round as it goes.
async fn rounds(
    label: &str,
    concurrency: &[usize],
    options: &Options,
    measure: impl AsyncFn(usize, &str) -> Result<throughput::Throughput>,
) -> Result<Vec<Rounds>> {
    let [rounds] = interleaved(
        [label],
        concurrency,
        options,
        async |_, workers, progress| measure(workers, progress).await,
    )
    .await;
    rounds
}

/// [`rounds`] of several measurements taken in turn: each round measures
/// the first label, then the second, and so on, so a slow spell of the
/// machine falls on all of them alike and their ratio in one run is fair
/// (run one after the other, two sections of the same code differed by a
/// quarter on this kind of machine). `measure(index, workers, progress)`
/// takes one round of `labels[index]`'s work. A measurement that fails
/// answers its error and is not taken again; the others go on.
async fn interleaved<const N: usize>(
    labels: [&str; N],
    concurrency: &[usize],
    options: &Options,
    measure: impl AsyncFn(usize, usize, &str) -> Result<throughput::Throughput>,
) -> [Result<Vec<Rounds>>; N] {
    let all = interleaved_all(&labels, concurrency, options, measure).await;
    <[Result<Vec<Rounds>>; N]>::try_from(all)
        .unwrap_or_else(|_| unreachable!("one result per label"))
}

/// [`interleaved`] over as many labels as there are: one result each, in
/// their order.
async fn interleaved_all(
    labels: &[&str],
    concurrency: &[usize],
    options: &Options,
    measure: impl AsyncFn(usize, usize, &str) -> Result<throughput::Throughput>,
) -> Vec<Result<Vec<Rounds>>> {
    let mut all: Vec<Result<Vec<Rounds>>> = labels.iter().map(|_| Ok(Vec::new())).collect();
    for &workers in concurrency {
        let mut per_second: Vec<Vec<f64>> = labels.iter().map(|_| Vec::new()).collect();
        for round in 1..=options.rounds {
            for (index, label) in labels.iter().enumerate() {
                if all[index].is_err() {
                    continue;
                }
                let progress = format!(
                    "{label}, {workers} workers, round {round}/{}",
                    options.rounds
                );
                match measure(index, workers, &progress).await {
                    Ok(measured) => {
                        println!("  {progress}: {:.0}/s", measured.per_second());
                        per_second[index].push(measured.per_second());
                    }
                    Err(err) => all[index] = Err(err.context(format!("{progress} failed"))),
                }
            }
        }
        for (index, per_second) in per_second.into_iter().enumerate() {
            if let Ok(rounds) = &mut all[index] {
                rounds.push(Rounds {
                    workers,
                    per_second,
                });
            }
        }
    }
    all
}

/// Per-step throughput on `url`, and on PostgreSQL the hand-written
/// baseline's and, given its `pooled` URL, the same work's through
/// PgBouncer, their rounds interleaved ([`interleaved`]): the ratios
/// DESIGN.md's target and issue 34's are stated in.
async fn per_step(
    dialect: Dialect,
    url: &str,
    pooled: Option<&str>,
    concurrency: &[usize],
    options: &Options,
) -> (
    Result<Vec<Rounds>>,
    Vec<Column>,
    Option<Result<Vec<Rounds>>>,
) {
    let name = dialect.name();
    let ours =
        async |workers, label: &str| throughput::measure(url, workers, options.steps, label).await;
    #[cfg(feature = "postgres")]
    if dialect == Dialect::Postgres {
        let forms = baseline::Form::ALL;
        let mut labels = vec![name];
        labels.extend(forms.map(baseline::Form::label));
        labels.extend(pooled.map(|_| pgbouncer::LABEL));
        let mut all = interleaved_all(
            &labels,
            concurrency,
            options,
            async |index, workers, label| match (forms.get(index.wrapping_sub(1)), pooled) {
                _ if index == 0 => ours(workers, label).await,
                (Some(&form), _) => baseline::measure(url, workers, options.steps, form).await,
                (None, Some(pooled)) => {
                    throughput::measure(pooled, workers, options.steps, label).await
                }
                (None, None) => unreachable!("a label past the forms only with a pooled URL"),
            },
        )
        .await;
        let through_pooler = pooled.and_then(|_| all.pop());
        let mut all = all.drain(..);
        let ours = all
            .next()
            .unwrap_or_else(|| unreachable!("one result per label"));
        let hand: Vec<Column> = all
            .zip(forms)
            .map(|(rounds, form)| Column {
                statements: Ok(baseline::statements(form)),
                ..Column::rounds(form.label(), rounds)
            })
            .collect();
        return (ours, hand, through_pooler);
    }
    #[cfg(feature = "mysql")]
    if dialect == Dialect::Mysql {
        // Each hand-written form on a database of its own beside the
        // bench's (see `mysql_baseline`), taken in turn with flowstate's;
        // the multi-table form only when asked (`JOIN_FORM_VARIABLE`): it
        // is the weaker baseline, and twice, under a loaded machine, its
        // statement crashed the MariaDB 10.11 server it ran on (signal 11
        // freeing a temporary table whose file had gone).
        let join_form = !options.smoke && std::env::var_os(JOIN_FORM_VARIABLE).is_some();
        let beside = [
            mysql_baseline::prepare_database(url, true).await,
            if join_form {
                mysql_baseline::prepare_database(url, false).await
            } else {
                Err(anyhow::anyhow!("not asked"))
            },
        ];
        let labels: &[&str] = if join_form {
            &[name, mysql_baseline::LABEL, mysql_baseline::JOIN_LABEL]
        } else {
            &[name, mysql_baseline::LABEL]
        };
        let mut all = interleaved_all(
            labels,
            concurrency,
            options,
            async |index, workers, label| {
                if index == 0 {
                    return ours(workers, label).await;
                }
                match &beside[index - 1] {
                    Ok(beside) => {
                        mysql_baseline::measure(beside, workers, options.steps, index == 1).await
                    }
                    Err(err) => Err(anyhow::anyhow!("{err:#}")),
                }
            },
        )
        .await;
        let mut all = all.drain(..);
        let ours_rounds = all
            .next()
            .unwrap_or_else(|| unreachable!("one result per label"));
        let hand = all
            .zip([true, false])
            .map(|(rounds, trigger)| {
                let label = if trigger {
                    mysql_baseline::LABEL
                } else {
                    mysql_baseline::JOIN_LABEL
                };
                Column {
                    statements: Ok(mysql_baseline::statements(trigger)),
                    ..Column::rounds(label, rounds)
                }
            })
            .collect();
        return (ours_rounds, hand, None);
    }
    #[cfg(feature = "sqlite")]
    if dialect == Dialect::Sqlite && !options.smoke {
        // The same work on a file without the batch claim's indexes,
        // taken in turn with flowstate's: what they cost a per-step claim
        // (see `index_cost`).
        let beside = index_cost::prepare_database(url).await;
        let mut all = interleaved_all(
            &[name, index_cost::LABEL],
            concurrency,
            options,
            async |index, workers, label| match (index, &beside) {
                (0, _) => ours(workers, label).await,
                (_, Ok(beside)) => throughput::measure(beside, workers, options.steps, label).await,
                (_, Err(err)) => Err(anyhow::anyhow!("{err:#}")),
            },
        )
        .await;
        let without = all
            .pop()
            .map(|rounds| Column::rounds(index_cost::LABEL, rounds))
            .into_iter()
            .collect();
        let ours = all
            .pop()
            .unwrap_or_else(|| unreachable!("one result per label"));
        return (ours, without, None);
    }
    let _ = pooled;
    (
        rounds(name, concurrency, options, ours).await,
        Vec::new(),
        None,
    )
}

/// Set (to anything), the bench also runs MariaDB's multi-table
/// hand-written form beside the per-step rounds (never with `--smoke`).
#[cfg(feature = "mysql")]
const JOIN_FORM_VARIABLE: &str = "FLOWSTATE_BENCH_JOIN_FORM";

/// The per-step column's label through PgBouncer.
#[cfg(feature = "postgres")]
const POOLED: &str = pgbouncer::LABEL;
#[cfg(not(feature = "postgres"))]
const POOLED: &str = "pgbouncer";

/// The label of MariaDB's hand-written column, whose ratio has a goal.
#[cfg(feature = "mysql")]
const HAND_MYSQL: &str = mysql_baseline::LABEL;
#[cfg(not(feature = "mysql"))]
const HAND_MYSQL: &str = "mysql hand SQL";

/// Makes `url` an empty, migrated flowstate database: a bench database of
/// ours is recreated; a database the user named keeps everything but the
/// flowstate tables, which are reverted and applied again.
async fn reset(url: &str, ours: bool) -> Result<()> {
    backend::prepare(url, ours).await?;
    if !ours {
        migrate::down(url, usize::MAX)
            .await
            .context("migrate down failed")?;
    }
    migrate::up(url).await.context("migrate up failed")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batched_leases_title_names_the_batch() {
        let batch = format!("claim_runs({})", workloads::LEASE_BATCH);
        assert!(LEASES_BATCHED_TITLE.contains(&batch), "{batch}");
    }
}
