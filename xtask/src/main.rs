//! `cargo xtask`: the workspace's own tasks, in Rust so they run wherever
//! cargo does.
//!
//! `main` reads the command line with `clap` (derive: the flags are the
//! fields of [`Command`], each with its `--help`) and hands each command to
//! its module's `run`: [`migrate`], [`demo`] (the main job),
//! [`bench`](mod@bench), [`test`](mod@test) and the operator's commands
//! `runs`, `events` and `stats` ([`ops`]). The tidy checks in `tidy.rs`
//! run under plain `cargo test`.

mod backend;
mod bench;
mod demo;
mod migrate;
mod ops;
mod test;
#[cfg(test)]
mod tidy;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// The workspace's tasks.
///
/// The default database is $DATABASE_URL, else an SQLite file under
/// target/ (migrate, runs, events, stats: target/flowstate.db; demo:
/// target/flowstate-demo.db).
/// Server URLs for bench and test: $FLOWSTATE_PG_URL (default
/// postgres://postgres@127.0.0.1:5432) and $FLOWSTATE_MYSQL_URL (default
/// mysql://root@127.0.0.1:3306).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// One task.
#[derive(Debug, Subcommand)]
enum Command {
    /// Apply, revert, list or add migrations (the embedded sets of
    /// flowstate-store-diesel).
    Migrate {
        #[command(subcommand)]
        action: MigrateAction,
    },
    /// The main job: every part of flowstate together (events, run leases,
    /// steps, waits, children, the effect journal, cancels, recovery after a
    /// crash, dead letters, virtual users), checked from the database.
    Demo(demo::Options),
    /// Throughput (median of rounds), contention and statements per
    /// operation, every dialect side by side.
    Bench(BenchArgs),
    /// fmt, clippy, tests and docs, as CI runs them.
    Test,
    /// Look at runs and cancel one: list (filters, pages), show (steps,
    /// attempts, state, children, lease, cause), cancel.
    Runs {
        #[command(flatten)]
        target: ops::Target,
        #[command(subcommand)]
        action: ops::runs::Action,
    },
    /// Look at events and redrive dead letters: list, show, redrive.
    Events {
        #[command(flatten)]
        target: ops::Target,
        #[command(subcommand)]
        action: ops::events::Action,
    },
    /// The store at a glance: runs by status, the oldest waiting step,
    /// leases held and expired, events due, retrying and dead-lettered.
    Stats(ops::Target),
    /// Retention by hand: delete settled runs, dispatched events, dead
    /// letters and finished virtual-user runs older than a window, never
    /// live work; --dry-run counts instead.
    Prune(ops::prune::Args),
}

/// What `migrate` does.
#[derive(Debug, Subcommand)]
enum MigrateAction {
    /// Apply pending migrations.
    Up {
        /// The database (else $DATABASE_URL, else target/flowstate.db).
        #[arg(long, value_name = "URL")]
        database_url: Option<String>,
    },
    /// Revert the last N applied migrations.
    Down {
        /// The database (else $DATABASE_URL, else target/flowstate.db).
        #[arg(long, value_name = "URL")]
        database_url: Option<String>,
        /// How many to revert.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive)]
        steps: usize,
    },
    /// List every migration, applied or pending.
    Status {
        /// The database (else $DATABASE_URL, else target/flowstate.db).
        #[arg(long, value_name = "URL")]
        database_url: Option<String>,
    },
    /// Add an empty migration NAME (up.sql and down.sql) for every dialect.
    New {
        /// Lowercase letters, digits and underscores, e.g. add_leases.
        name: String,
    },
}

/// The bench's flags.
#[derive(Debug, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent flags of the command line, not a state"
)]
struct BenchArgs {
    /// Bench these databases instead of the default three (repeatable).
    #[arg(long, value_name = "URL")]
    database_url: Vec<String>,
    /// Steps per round.
    #[arg(long, value_name = "N", value_parser = positive)]
    steps: Option<usize>,
    /// Worker counts to bench, comma-separated (e.g. 1,8,32).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', value_parser = positive)]
    concurrency: Vec<usize>,
    /// One more worker count (added to --concurrency).
    #[arg(long, value_name = "N", value_parser = positive)]
    workers: Option<usize>,
    /// Rounds per figure (the median is shown).
    #[arg(long, value_name = "N", value_parser = positive)]
    rounds: Option<usize>,
    /// Write the whole report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Compare this run's medians with an earlier --json report.
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
    /// CI's run: one small round, statement counts checked against the
    /// budgets (never timings).
    #[arg(long)]
    smoke: bool,
    /// Print each operation's SQL.
    #[arg(long)]
    verbose: bool,
    /// Run graphile-worker beside PostgreSQL's batched mode (needs Node.js).
    #[arg(long)]
    peers: bool,
    /// Start a throw-away 3-node MariaDB Galera cluster (needs galera-4) and
    /// measure per-step, batched, leases and events on it, each round in
    /// turn with the same work on the machine's MariaDB (12 workers unless
    /// --concurrency says otherwise).
    #[arg(long)]
    galera: bool,
    /// Steps per round on the Galera cluster (default: --steps, at most
    /// 5,000).
    #[arg(long, value_name = "N", value_parser = positive)]
    galera_steps: Option<usize>,
    /// Also measure per-step, batched, run leases and events beside a
    /// backlog of N queued steps, N runs held under a live lease, 2N
    /// history rows and N dispatched events, seeded in a second database,
    /// each round in turn with the same work without it
    /// (FLOWSTATE_BACKLOG_WORKS names the works to measure).
    #[arg(long, value_name = "N", value_parser = positive)]
    backlog: Option<usize>,
    /// Also run batched work with retention on for MINUTES, printing the
    /// rate and the tables' and indexes' size every minute.
    #[arg(long, value_name = "MINUTES", value_parser = clap::value_parser!(u32).range(1..))]
    soak: Option<u32>,
    /// Measure only these sections, comma-separated: per-step, prune,
    /// contention, statements, workloads, batched, backlog, soak, galera
    /// (the Galera section, also with --galera).
    #[arg(long, value_name = "SECTION,...", value_delimiter = ',')]
    only: Vec<String>,
}

impl BenchArgs {
    fn into_options(self) -> bench::Options {
        let defaults = bench::Options::default();
        let options = bench::Options {
            urls: self.database_url,
            steps: self.steps.unwrap_or(defaults.steps),
            concurrency: self.concurrency.into_iter().chain(self.workers).collect(),
            rounds: self.rounds.unwrap_or(defaults.rounds),
            verbose: self.verbose,
            json: self.json,
            compare: self.compare,
            peers: self.peers,
            galera: self.galera,
            galera_steps: self.galera_steps,
            backlog: self.backlog,
            soak: self.soak,
            only: self.only,
            ..defaults
        };
        if self.smoke { options.smoke() } else { options }
    }
}

/// A positive whole number, for the flags that count something.
fn positive(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("takes a positive whole number, not {text:?}")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Command) -> Result<()> {
    match command {
        Command::Migrate { action } => {
            let (action, url) = match action {
                MigrateAction::Up { database_url } => (migrate::Action::Up, database_url),
                MigrateAction::Down {
                    database_url,
                    steps,
                } => (migrate::Action::Down { steps }, database_url),
                MigrateAction::Status { database_url } => (migrate::Action::Status, database_url),
                MigrateAction::New { name } => (migrate::Action::New { name }, None),
            };
            block_on(migrate::run(action, url))
        }
        Command::Demo(options) => {
            demo::init_tracing(options.verbose);
            block_on(demo::run(options))
        }
        Command::Bench(args) => block_on(bench::run(args.into_options())),
        Command::Test => test::run(),
        Command::Runs { target, action } => block_on(ops::runs::run(&target, action)),
        Command::Events { target, action } => block_on(ops::events::run(&target, action)),
        Command::Stats(target) => block_on(ops::stats::run(&target)),
        Command::Prune(args) => block_on(ops::prune::run(&args)),
    }
}

/// Runs an async command on a multi-threaded runtime: the demo's and the
/// bench's workers run in parallel, as an engine's would.
fn block_on(command: impl Future<Output = Result<()>>) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?
        .block_on(command)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command, MigrateAction};

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(line.split_whitespace()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_keeps_the_flags_ci_and_the_readme_use() {
        let Command::Migrate {
            action:
                MigrateAction::Down {
                    database_url,
                    steps,
                },
        } = parse("migrate down --database-url sqlite://x.db --steps=3")
            .unwrap()
            .command
        else {
            panic!("migrate down");
        };
        assert_eq!((database_url.as_deref(), steps), (Some("sqlite://x.db"), 3));
        assert!(parse("migrate down --steps 0").is_err());
        assert!(
            parse("migrate up --steps 2").is_err(),
            "--steps only goes with down"
        );
        assert!(matches!(
            parse("migrate new add_leases").unwrap().command,
            Command::Migrate { action: MigrateAction::New { name } } if name == "add_leases"
        ));

        let Command::Bench(bench) = parse("bench --smoke").unwrap().command else {
            panic!("bench");
        };
        assert!(bench.into_options().smoke);
        let Command::Bench(bench) = parse(
            "bench --database-url a --database-url b --concurrency 1,8,32 --workers 4 --rounds 2",
        )
        .unwrap()
        .command
        else {
            panic!("bench");
        };
        let options = bench.into_options();
        assert_eq!(options.urls, ["a", "b"]);
        assert_eq!(options.concurrency, [1, 8, 32, 4]);
        assert_eq!(options.rounds, 2);
        let Command::Bench(bench) = parse("bench --backlog 200000 --only per-step,backlog")
            .unwrap()
            .command
        else {
            panic!("bench");
        };
        let options = bench.into_options();
        assert_eq!(options.backlog, Some(200_000));
        assert_eq!(options.only, ["per-step", "backlog"]);
        let Command::Bench(bench) = parse("bench --soak 30 --only soak").unwrap().command else {
            panic!("bench");
        };
        assert_eq!(bench.into_options().soak, Some(30));
        assert!(parse("bench --soak 0").is_err());
        let Command::Bench(bench) = parse("bench --smoke --galera --galera-steps 300")
            .unwrap()
            .command
        else {
            panic!("bench");
        };
        let options = bench.into_options();
        assert!(options.smoke && options.galera);
        assert_eq!(options.galera_steps, Some(300));
        assert!(parse("bench --galera-steps 0").is_err());
        assert!(parse("bench --concurrency 1,0").is_err());
        assert!(parse("bench --what").is_err());

        let Command::Demo(demo) =
            parse("demo --database-url postgres://h/db --events 500 --workers 4 --fresh -v")
                .unwrap()
                .command
        else {
            panic!("demo");
        };
        assert_eq!(demo.url.as_deref(), Some("postgres://h/db"));
        assert_eq!(
            (demo.events, demo.workers, demo.fresh, demo.verbose),
            (500, 4, true, 1)
        );
        assert!(parse("demo --events 0").is_err());
        assert!(matches!(parse("test").unwrap().command, Command::Test));
        for help in [
            "--help",
            "migrate --help",
            "migrate up --help",
            "demo --help",
            "bench --help",
            "test --help",
        ] {
            let err = parse(help).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{help}");
        }
    }
}
