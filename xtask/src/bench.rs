//! `cargo xtask bench`: every backend side by side.
//!
//! For each database (by default every backend this build has: a fresh
//! SQLite file under `target/`, and database `flowstate_bench` on the
//! PostgreSQL and MariaDB servers, created if missing) it resets the
//! flowstate tables, then measures:
//! - throughput: steps per second for claim + succeed with N workers, each
//!   on a connection of its own ([`throughput`]);
//! - statements per operation, counted with `StatementLog`
//!   ([`statements`]): budgets are counted, not timed.
//!
//! With the `postgres` feature it also runs the same claim + succeed work as
//! hand-written SQL on PostgreSQL (`baseline`), the figure DESIGN.md asks
//! flowstate to come close to.

#[cfg(feature = "postgres")]
mod baseline;
mod statements;
mod throughput;

use anyhow::{Context, Result, bail};
use flowstate_store_diesel::{Dialect, migrate};

use self::statements::{Counted, OPERATIONS};
use self::throughput::Throughput;
use crate::backend::{self, DialectExt};

/// What the bench measures, and where.
#[derive(Clone, Debug)]
pub struct Options {
    /// The databases; none means every backend this build has, on its bench
    /// database.
    pub urls: Vec<String>,
    /// Steps claimed and succeeded per database. The default, 20,000, keeps
    /// the first use of each statement on each of 32 connections (a prepare)
    /// from weighing on the figure: at 4,000 it cost PostgreSQL a third.
    pub steps: usize,
    /// Workers per database; `None` is 32 on a server, 4 on SQLite.
    pub workers: Option<usize>,
    /// Print the SQL each operation sent.
    pub verbose: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            steps: 20_000,
            workers: None,
            verbose: false,
        }
    }
}

/// The name of the database the bench creates on each server.
const BENCH_DATABASE: &str = "flowstate_bench";

/// One column of the table.
struct Column {
    label: String,
    throughput: Result<Throughput>,
    statements: Result<Vec<Counted>>,
}

/// Runs the bench and prints the table; fails if any measurement failed.
pub async fn run(options: Options) -> Result<()> {
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
        "flowstate bench: {} steps claimed and succeeded per database",
        options.steps
    );
    if cfg!(debug_assertions) {
        println!(
            "(a debug build: for figures worth quoting, `cargo run --release -p xtask -- bench`)"
        );
    }
    let mut columns = Vec::new();
    for (dialect, url, ours) in targets {
        let workers = options.workers.unwrap_or_else(|| dialect.default_workers());
        println!(
            "  {} {}: resetting the flowstate tables",
            dialect.name(),
            backend::redact(&url)
        );
        let column = match reset(&url, ours).await {
            Ok(()) => {
                println!(
                    "  {}: throughput with {workers} workers ...",
                    dialect.name()
                );
                let throughput = throughput::measure(&url, workers, options.steps).await;
                println!("  {}: statements per operation ...", dialect.name());
                let statements = statements::measure(&url).await;
                Column {
                    label: dialect.name().to_owned(),
                    throughput,
                    statements,
                }
            }
            Err(err) => Column {
                label: dialect.name().to_owned(),
                throughput: Err(anyhow::anyhow!("{err:#}")),
                statements: Err(err),
            },
        };
        #[cfg(feature = "postgres")]
        let baseline =
            (dialect == Dialect::Postgres && column.throughput.is_ok()).then(|| url.clone());
        columns.push(column);
        #[cfg(feature = "postgres")]
        if let Some(url) = baseline {
            println!("  postgres: the same work as hand-written SQL, {workers} workers ...");
            columns.push(Column {
                label: "pg hand SQL".to_owned(),
                throughput: baseline::measure(&url, workers, options.steps).await,
                statements: Ok(baseline::statements()),
            });
        }
    }
    print_table(&columns, options.verbose);
    let failures: Vec<String> = columns
        .iter()
        .flat_map(|c| {
            let t = c
                .throughput
                .as_ref()
                .err()
                .map(|e| format!("{} throughput: {e:#}", c.label));
            let s = c
                .statements
                .as_ref()
                .err()
                .map(|e| format!("{} statements: {e:#}", c.label));
            t.into_iter().chain(s)
        })
        .collect();
    if !failures.is_empty() {
        bail!("bench failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

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

fn print_table(columns: &[Column], verbose: bool) {
    const W: usize = 13;
    let row = |label: &str, cells: &mut dyn Iterator<Item = String>| {
        use std::fmt::Write as _;
        let mut line = format!("{label:<30}");
        for cell in cells {
            let _ = write!(line, "{cell:>W$}");
        }
        println!("{line}");
    };
    println!();
    row("", &mut columns.iter().map(|c| c.label.clone()));
    row(
        "workers",
        &mut columns.iter().map(|c| {
            c.throughput
                .as_ref()
                .map_or("-".to_owned(), |t| t.workers.to_string())
        }),
    );
    row(
        "claim + succeed, steps/s",
        &mut columns.iter().map(|c| {
            c.throughput
                .as_ref()
                .map_or("error".to_owned(), |t| format!("{:.0}", t.per_second()))
        }),
    );
    println!("statements per operation (BEGIN and COMMIT count)");
    for operation in OPERATIONS {
        row(
            &format!("  {operation}"),
            &mut columns.iter().map(|c| match &c.statements {
                Ok(counted) => counted
                    .iter()
                    .find(|c| c.operation == operation)
                    .map_or("-".to_owned(), |c| c.statements.len().to_string()),
                Err(_) => "error".to_owned(),
            }),
        );
    }
    for column in columns {
        if let Err(err) = &column.throughput {
            println!("{}: throughput failed: {err:#}", column.label);
        }
        if let Err(err) = &column.statements {
            println!("{}: statement count failed: {err:#}", column.label);
        }
    }
    if verbose {
        for column in columns {
            let Ok(counted) = &column.statements else {
                continue;
            };
            println!("\n{}: the SQL of each operation", column.label);
            for c in counted {
                println!("  {}:", c.operation);
                for sql in &c.statements {
                    println!(
                        "    {}",
                        sql.split_whitespace().collect::<Vec<_>>().join(" ")
                    );
                }
            }
        }
    }
}
