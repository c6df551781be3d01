//! The peer beside batched mode: graphile-worker's documented fast preset
//! (a local queue of 500, completions batched), run by the script in
//! `peers/graphile-worker/` on the same PostgreSQL server, its rounds taken
//! in turn with flowstate's batched rounds so a slow spell of the machine
//! falls on both (`--peers`; never in CI).
//!
//! Issue 12 states its target against this peer: batched mode must beat the
//! fast preset while still writing a history row per attempt, which
//! graphile-worker does not keep. An absolute figure says little on a
//! shared 2-core machine, where the peer itself moved between 15k and 34k
//! jobs/s from one session to the next; the ratio of rounds run side by side
//! is the comparison that holds.
//!
//! Each round is one `node run.mjs` with `ROUNDS=1`: its jobs are inserted
//! untimed, then the time runs from the worker's start until every job ran
//! and its row is gone (see the script's README). The preset's own
//! concurrency (24 jobs at once, a pool of 25) is kept as documented, not
//! matched to the bench's worker count.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

use super::throughput::Throughput;
use crate::backend::{self, ServerUrl};

/// The peer's column label.
pub const LABEL: &str = "graphile fast";

/// The database the peer's script works in, on the bench's PostgreSQL
/// server.
const DATABASE: &str = "peer_graphile";

/// The peer, ready to run: its script, installed, and its database URL.
#[derive(Clone, Debug)]
pub struct Peer {
    folder: PathBuf,
    url: String,
}

impl Peer {
    /// Readies the peer beside the PostgreSQL database `url`: checks that
    /// `node` runs, installs the script's pinned packages if they are
    /// missing (`npm ci`), and recreates its database on the same server.
    pub async fn prepare(url: &str) -> Result<Self> {
        let folder = backend::workspace_root().join("peers/graphile-worker");
        ensure!(
            folder.join("run.mjs").is_file(),
            "the peer script {} is missing",
            folder.join("run.mjs").display()
        );
        run_quietly(Command::new("node").arg("--version"))
            .context("--peers needs Node.js (`node`) on the PATH")?;
        if !folder.join("node_modules/graphile-worker").is_dir() {
            println!("  peer: installing graphile-worker's pinned packages (npm ci)");
            run_quietly(
                Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund"])
                    .current_dir(&folder),
            )
            .context("cannot install the peer's packages")?;
        }
        let url = ServerUrl::split(url)?.with_database(DATABASE);
        backend::prepare(&url, true)
            .await
            .context("cannot create the peer's database")?;
        Ok(Self { folder, url })
    }

    /// One round of `jobs` no-op jobs through the fast preset.
    pub async fn measure(&self, jobs: usize) -> Result<Throughput> {
        let peer = self.clone();
        tokio::task::spawn_blocking(move || peer.measure_blocking(jobs))
            .await
            .context("the peer's round panicked")?
    }

    fn measure_blocking(&self, jobs: usize) -> Result<Throughput> {
        let output = Command::new("node")
            .arg(self.folder.join("run.mjs"))
            .current_dir(&self.folder)
            .env("JOBS", jobs.to_string())
            .env("ROUNDS", "1")
            .env("DATABASE_URL", &self.url)
            .output()
            .context("cannot start node")?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "the peer's script failed ({}):\n{}{}",
                output.status,
                stdout,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        parse_round(&stdout)
            .with_context(|| format!("cannot read the peer's round from its output:\n{stdout}"))
    }
}

/// The first `round N: jobs=J seconds=S ...` line of the script's output.
fn parse_round(stdout: &str) -> Result<Throughput> {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("round "))
        .context("no round line")?;
    let field = |name: &str| -> Result<&str> {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name))
            .with_context(|| format!("no {name} in {line:?}"))
    };
    let steps: usize = field("jobs=")?.parse().context("jobs= is not a count")?;
    let seconds: f64 = field("seconds=")?
        .parse()
        .context("seconds= is not a number")?;
    ensure!(
        seconds.is_finite() && seconds > 0.0,
        "seconds={seconds} is no duration"
    );
    Ok(Throughput {
        steps,
        elapsed: Duration::from_secs_f64(seconds),
    })
}

/// Runs `command` with its output captured; fails with that output if it
/// exits non-zero.
fn run_quietly(command: &mut Command) -> Result<()> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    ensure!(
        output.status.success(),
        "{program} exited with {}:\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_line_reads_as_jobs_over_seconds() {
        let out = "graphile-worker 0.18.0 | node v20\n\
                   mode=fast jobs=30000 rounds=1\n\
                   round 1: jobs=30000 seconds=1.947 jobs/s=15412  (worker startup 8ms included)\n\
                   summary: mode=fast jobs=30000 rounds=1 jobs/s median=15412\n";
        let round = parse_round(out).unwrap();
        assert_eq!(round.steps, 30_000);
        assert_eq!(round.elapsed, Duration::from_millis(1947));
        assert_eq!(round.per_second().round() as u64, 15_408);
    }

    #[test]
    fn output_without_a_round_is_an_error() {
        assert!(parse_round("mode=fast jobs=30000 rounds=1\n").is_err());
        assert!(parse_round("round 1: jobs=x seconds=1.0\n").is_err());
        assert!(parse_round("round 1: jobs=10 seconds=0\n").is_err());
        assert!(parse_round("round 1: jobs=10\n").is_err());
    }
}
