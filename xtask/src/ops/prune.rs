//! `cargo xtask prune --older-than DURATION [--dry-run]`: retention by
//! hand. Deletes what settled longer ago than the window (settled runs
//! with their steps, history, state and effects; dispatched events and
//! dead letters with their deliveries; finished virtual-user runs with
//! their transcripts), never a live, waiting or leased run nor the parent
//! of a live child: the store decides ([`RetentionStore`]), batch by
//! batch, through `flowstate-recovery`'s [`Pruner`]. `--dry-run` counts
//! instead ([`RetentionStore::count_prunable`]).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::PruneKind;
use flowstate_core::ports::RetentionStore;
use flowstate_core::retention::MAX_PRUNE_LIMIT;
use flowstate_recovery::{Pruner, RetentionPolicy};
use serde_json::{Map, Value, json};

use super::Target;
use super::format::{duration, parse_duration};

/// The flags of `prune`.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Delete what settled longer ago than this (90s, 15m, 1h30m, 7d):
    /// settled runs, dispatched events, dead letters never redriven and
    /// finished virtual-user runs.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Duration,
    /// Keep dead letters longer than the rest (default: --older-than).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub dead_letters_older_than: Option<Duration>,
    /// Count what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Records per delete statement.
    #[arg(long, value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PRUNE_LIMIT)))]
    pub batch: u32,
    #[command(flatten)]
    pub target: Target,
}

/// Runs `prune` against the store `args.target` names.
pub async fn run(args: &Args) -> Result<()> {
    let opened = super::open(&args.target).await?;
    let policy = RetentionPolicy {
        dead_letters: Some(args.dead_letters_older_than.unwrap_or(args.older_than)),
        batch: args.batch,
        max_batches: u32::MAX,
        ..RetentionPolicy::uniform(args.older_than)
    };
    let described = opened.describe();
    let store = Arc::new(opened.store);
    let counts = if args.dry_run {
        count(&*store, &policy).await?
    } else {
        let report = Pruner::new(Arc::clone(&store), policy)
            .pass()
            .await
            .context("prune")?;
        PruneKind::ALL
            .iter()
            .map(|kind| (*kind, report.deleted.get(kind).copied().unwrap_or(0)))
            .collect()
    };
    let human = format!("flowstate on {described}\n{}", render(args, &counts));
    super::emit(&args.target, &human, &to_json(args, &counts))
}

/// What a prune by `policy` would delete now, per kind.
pub async fn count(
    store: &impl RetentionStore,
    policy: &RetentionPolicy,
) -> Result<Vec<(PruneKind, u64)>> {
    let mut counts = Vec::new();
    for kind in PruneKind::ALL {
        let n = match policy.window(kind) {
            Some(window) => store
                .count_prunable(kind, window)
                .await
                .with_context(|| format!("count_prunable {kind}"))?,
            None => 0,
        };
        counts.push((kind, n));
    }
    Ok(counts)
}

/// What a person reads: the window, a line per kind, the total.
fn render(args: &Args, counts: &[(PruneKind, u64)]) -> String {
    let mut out = String::new();
    let dead = args.dead_letters_older_than.unwrap_or(args.older_than);
    let _ = write!(
        out,
        "settled more than {} ago (dead letters {})",
        duration(args.older_than),
        duration(dead)
    );
    let verb = if args.dry_run {
        out.push_str(", dry run: nothing deleted\n");
        "would be deleted"
    } else {
        out.push('\n');
        "deleted"
    };
    for (kind, n) in counts {
        let _ = writeln!(out, "  {:<18} {n}", kind.as_str());
    }
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    let _ = writeln!(out, "{total} {verb}");
    out
}

/// The `--json` document: the windows in seconds, each kind's count, the
/// total.
fn to_json(args: &Args, counts: &[(PruneKind, u64)]) -> Value {
    let mut kinds = Map::new();
    for (kind, n) in counts {
        kinds.insert(kind.as_str().to_owned(), json!(n));
    }
    let dead = args.dead_letters_older_than.unwrap_or(args.older_than);
    json!({
        "dry_run": args.dry_run,
        "older_than_secs": args.older_than.as_secs(),
        "dead_letters_older_than_secs": dead.as_secs(),
        "counts": kinds,
        "total": counts.iter().map(|(_, n)| n).sum::<u64>(),
    })
}
