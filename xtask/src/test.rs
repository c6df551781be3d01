//! `cargo xtask test`: what CI runs, in order, stopping at the first
//! failure: the servers checked, then `cargo fmt --check`, clippy with
//! `-D warnings`, the whole workspace's tests with every feature, every
//! library crate's example run as a user runs it, the library crates
//! packaged (`cargo package --no-verify`: manifests, versions, the store's
//! embedded migrations; offline, under a second), and the docs built as
//! docs.rs builds them (every feature, `--cfg docsrs`) with `-D warnings`.
//!
//! The store-diesel tests run against PostgreSQL and MariaDB every time: a
//! server that does not answer fails this command up front. No backend is
//! ever skipped.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use flowstate_store_diesel::Dialect;

use crate::backend::{self, DialectExt};

/// One cargo invocation.
struct Step {
    what: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// `cargo run -p CRATE --example NAME`: a library crate's example, as its
/// README tells a user to run it.
macro_rules! example {
    ($krate:literal, $name:literal) => {
        Step {
            what: concat!("example ", $name),
            args: &["run", "--quiet", "-p", $krate, "--example", $name],
            env: &[],
        }
    };
}

const STEPS: &[Step] = &[
    Step {
        what: "format",
        args: &["fmt", "--all", "--", "--check"],
        env: &[],
    },
    Step {
        what: "lint",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        what: "test",
        args: &["test", "--workspace", "--all-features"],
        env: &[],
    },
    example!("flowstate-store-diesel", "worker"),
    example!("flowstate-events", "dispatch"),
    example!("flowstate-recovery", "sweeper"),
    example!("flowstate-virtual-users", "tick"),
    example!("flowstate-pool", "pool"),
    example!("flowstate-metrics", "counts"),
    example!("flowstate-testkit", "own_store"),
    Step {
        what: "package",
        args: &[
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "flowstate-faults",
            "--no-verify",
            "--allow-dirty",
            "--offline",
        ],
        env: &[],
    },
    Step {
        what: "doc (as docs.rs builds it)",
        args: &["doc", "--workspace", "--all-features", "--no-deps"],
        env: &[("RUSTDOCFLAGS", "--cfg docsrs -D warnings")],
    },
];

/// Runs every step; the first failure ends it with an error.
pub fn run() -> Result<()> {
    let started = Instant::now();
    servers_reachable()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for step in STEPS {
        let env: Vec<String> = step
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v:?} "))
            .collect();
        println!(
            "\n==> xtask test: {} — {}cargo {}",
            step.what,
            env.concat(),
            step.args.join(" ")
        );
        let at = Instant::now();
        let status = Command::new(&cargo)
            .args(step.args)
            .envs(step.env.iter().copied())
            .current_dir(backend::workspace_root())
            .status()
            .with_context(|| format!("cannot run {cargo}"))?;
        if !status.success() {
            bail!("`cargo {}` failed ({status})", step.args.join(" "));
        }
        println!(
            "==> {} passed in {:.0} s",
            step.what,
            at.elapsed().as_secs_f64()
        );
    }
    println!(
        "\nxtask test: all passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Checks every server backend answers on its port before anything slow
/// starts.
fn servers_reachable() -> Result<()> {
    println!("==> xtask test: servers");
    // `Dialect::ALL` lists the servers first, PostgreSQL then MySQL.
    for dialect in Dialect::ALL {
        let (Some((var, _)), Some(url)) = (dialect.server_env(), dialect.server_url()) else {
            continue;
        };
        let default_port = if dialect == Dialect::Postgres {
            5432
        } else {
            3306
        };
        match backend::reachable(&url, default_port) {
            Ok(()) => println!("  {:<8} {} answers", dialect.name(), backend::redact(&url)),
            Err(err) => bail!(
                "{} is not reachable at {} ({var}): {err:#}\n\
                 the store-diesel tests need it and no backend is ever skipped; \
                 start it (`.ci/run` shows how) or point {var} at a running server",
                dialect.name(),
                backend::redact(&url)
            ),
        }
    }
    Ok(())
}
