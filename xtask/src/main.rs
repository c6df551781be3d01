//! `cargo xtask`: the workspace's own tasks, in Rust so they run wherever
//! cargo does.
//!
//! `main` reads the command line by hand (no argument-parsing crate: xtask
//! must build fast) and hands each command to its module's `run`:
//! [`migrate`], [`demo`] (the main job), [`bench`](mod@bench) and
//! [`test`](mod@test). The tidy checks in `tidy.rs` run under plain
//! `cargo test`.

mod backend;
mod bench;
mod demo;
mod migrate;
mod test;
#[cfg(test)]
mod tidy;

use std::process::ExitCode;

use anyhow::{Context, Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command> [flags]

commands:
  migrate up     [--database-url URL]            apply pending migrations
  migrate down   [--database-url URL] [--steps N] revert the last N (default 1)
  migrate status [--database-url URL]            list migrations, applied or pending
  migrate new NAME                               add an empty migration for every dialect
  demo  [--database-url URL] [--runs N] [--steps N] [--workers N]
                                                 the main job: runs claimed and completed
                                                 by workers, every step delivered twice
  bench [--database-url URL]... [--steps N] [--concurrency N,N,...] [--workers N] [--rounds N]
        [--json FILE] [--compare FILE] [--smoke] [--verbose] [--peers]
                                                 throughput (median of rounds), contention
                                                 and statements per operation, every
                                                 dialect side by side; --peers runs
                                                 graphile-worker beside PostgreSQL's
                                                 batched mode (needs Node.js)
  test                                           fmt, clippy, tests and docs, as CI runs them

The default database is $DATABASE_URL, else an SQLite file under target/
(migrate: target/flowstate.db; demo: a fresh target/flowstate-demo.db).
Server URLs for bench and test: $FLOWSTATE_PG_URL (default
postgres://postgres@127.0.0.1:5432) and $FLOWSTATE_MYSQL_URL (default
mysql://root@127.0.0.1:3306).";

fn main() -> ExitCode {
    match dispatch(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: Vec<String>) -> Result<()> {
    let mut args = Args(args);
    if args.0.first().is_none_or(|first| first.starts_with("--")) {
        println!("{USAGE}");
        return Ok(());
    }
    let command = args.0.remove(0);
    match command.as_str() {
        "migrate" => {
            // Flags first, so a flag's value is never taken for a word.
            let url = args.value("--database-url")?;
            let steps = args.number("--steps")?;
            let action = match args.positional().as_deref() {
                Some("up") => migrate::Action::Up,
                Some("down") => migrate::Action::Down {
                    steps: steps.unwrap_or(1),
                },
                Some("status") => migrate::Action::Status,
                Some("new") => migrate::Action::New {
                    name: args.positional().context(
                        "`migrate new` needs a NAME, e.g. `cargo xtask migrate new add_leases`",
                    )?,
                },
                other => bail!("`migrate` needs up, down, status or new, not {other:?}\n\n{USAGE}"),
            };
            if steps.is_some() && !matches!(action, migrate::Action::Down { .. }) {
                bail!("--steps only goes with `migrate down`");
            }
            args.finish()?;
            block_on(migrate::run(action, url))
        }
        "demo" => {
            let defaults = demo::Options::default();
            let options = demo::Options {
                url: args.value("--database-url")?,
                runs: args.number("--runs")?.unwrap_or(defaults.runs),
                steps_per_run: args.number("--steps")?.unwrap_or(defaults.steps_per_run),
                workers: args.number("--workers")?.unwrap_or(defaults.workers),
            };
            args.finish()?;
            block_on(demo::run(options))
        }
        "bench" => {
            let defaults = bench::Options::default();
            let smoke = args.switch("--smoke");
            let mut options = bench::Options {
                urls: args.values("--database-url")?,
                steps: args.number("--steps")?.unwrap_or(defaults.steps),
                concurrency: args
                    .numbers("--concurrency")?
                    .into_iter()
                    .chain(args.number("--workers")?)
                    .collect(),
                rounds: args.number("--rounds")?.unwrap_or(defaults.rounds),
                verbose: args.switch("--verbose"),
                json: args.value("--json")?.map(Into::into),
                compare: args.value("--compare")?.map(Into::into),
                peers: args.switch("--peers"),
                ..defaults
            };
            if smoke {
                options = options.smoke();
            }
            args.finish()?;
            block_on(bench::run(options))
        }
        "test" => {
            args.finish()?;
            test::run()
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
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

/// The arguments left to read; each read removes what it consumed, and
/// [`Args::finish`] refuses whatever nobody asked for.
struct Args(Vec<String>);

impl Args {
    /// The next argument that is not a flag.
    fn positional(&mut self) -> Option<String> {
        let index = self.0.iter().position(|arg| !arg.starts_with("--"))?;
        Some(self.0.remove(index))
    }

    /// Every value of `--flag VALUE` or `--flag=VALUE`, in order.
    fn values(&mut self, flag: &str) -> Result<Vec<String>> {
        let mut found = Vec::new();
        let mut index = 0;
        while index < self.0.len() {
            if self.0[index] == flag {
                self.0.remove(index);
                if index >= self.0.len() || self.0[index].starts_with("--") {
                    bail!("{flag} needs a value");
                }
                found.push(self.0.remove(index));
            } else if let Some(value) = self.0[index].strip_prefix(&format!("{flag}=")) {
                found.push(value.to_owned());
                self.0.remove(index);
            } else {
                index += 1;
            }
        }
        Ok(found)
    }

    /// The value of a flag given at most once.
    fn value(&mut self, flag: &str) -> Result<Option<String>> {
        let mut values = self.values(flag)?;
        if values.len() > 1 {
            bail!("{flag} given {} times; give it once", values.len());
        }
        Ok(values.pop())
    }

    /// The value of a flag that takes a positive whole number.
    fn number(&mut self, flag: &str) -> Result<Option<usize>> {
        self.value(flag)?
            .map(|text| match text.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("{flag} takes a positive whole number, not {text:?}"),
            })
            .transpose()
    }

    /// The values of a flag that takes a comma-separated list of positive
    /// whole numbers (`--concurrency 1,8,32`), given at most once.
    fn numbers(&mut self, flag: &str) -> Result<Vec<usize>> {
        let Some(text) = self.value(flag)? else {
            return Ok(Vec::new());
        };
        text.split(',')
            .map(|part| match part.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("{flag} takes positive whole numbers separated by commas, not {text:?}"),
            })
            .collect()
    }

    /// Whether a flag without a value was given.
    fn switch(&mut self, flag: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|arg| arg != flag);
        self.0.len() != before
    }

    /// Fails on any argument no command read.
    fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            bail!("unexpected arguments: {}\n\n{USAGE}", self.0.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Args;

    fn args(line: &str) -> Args {
        Args(line.split_whitespace().map(str::to_owned).collect())
    }

    #[test]
    fn flags_are_read_in_either_form_and_leftovers_refused() {
        let mut a = args("up --database-url sqlite://x.db --steps=3 --verbose");
        assert_eq!(a.positional().as_deref(), Some("up"));
        assert_eq!(
            a.value("--database-url").unwrap().as_deref(),
            Some("sqlite://x.db")
        );
        assert_eq!(a.number("--steps").unwrap(), Some(3));
        assert!(a.switch("--verbose"));
        assert!(a.finish().is_ok());

        let mut a = args("--database-url a --database-url b --runs 0 --what");
        assert_eq!(a.values("--database-url").unwrap(), ["a", "b"]);
        assert!(a.number("--runs").is_err());
        assert!(a.finish().is_err());

        assert!(args("--database-url").value("--database-url").is_err());
        assert!(args("--steps x").number("--steps").is_err());

        let mut a = args("--concurrency 1,8,32");
        assert_eq!(a.numbers("--concurrency").unwrap(), [1, 8, 32]);
        assert!(args("--concurrency 1,0").numbers("--concurrency").is_err());
        assert!(args("--concurrency 1,x").numbers("--concurrency").is_err());
        assert!(args("").numbers("--concurrency").unwrap().is_empty());
    }
}
