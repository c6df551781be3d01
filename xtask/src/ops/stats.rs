//! `cargo xtask stats`: the store at a glance: runs by status, the oldest
//! step waiting for a worker, leases held and run out, and events waiting,
//! retrying and dead-lettered.
//!
//! Every figure is a port call: runs are counted by paging
//! [`RunStore::list_runs`] per status (no port counts them), the oldest
//! waiting step is [`RecoveryStore::undispatched_steps`]' first row, leases
//! are [`RunLeaseStore::lease_state`] of each unsettled run (whether one
//! ran out is read on this host's clock, which no decision uses: the
//! store's own clock decides, and no port reads it), and events come from
//! [`EventStore::list_undispatched`] and [`EventStore::pending_events`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result};
// Named by the docs' links only.
#[cfg(doc)]
use flowstate_core::ports::{EventStore, RecoveryStore, RunLeaseStore, RunStore};
use flowstate_core::{
    EventFilter, RunCursor, RunId, RunQuery, RunStatus, Timestamp, UndispatchedStep,
};
use serde_json::{Map, Value, json};

use super::format::{ago, duration};
use super::{OpsStore, Target};

/// The most unsettled runs whose lease `stats` reads, one call each.
const LEASES_READ: usize = 10_000;

/// The figures `stats` prints.
#[derive(Debug, Default)]
pub struct Stats {
    /// Runs in each status (every status, zeros included).
    pub runs: BTreeMap<RunStatus, u64>,
    /// The oldest step waiting for a worker (pending, or failed with a
    /// retry due, in an unsettled run).
    pub oldest_step: Option<UndispatchedStep>,
    /// Unsettled runs whose lease is held and live.
    pub leases_held: u64,
    /// Unsettled runs whose lease ran out with its holder still named
    /// (the sweeper's reap frees them).
    pub leases_expired: u64,
    /// How many unsettled runs' leases were read (at most
    /// [`LEASES_READ`]).
    pub leases_read: usize,
    /// Events a dispatcher may take now.
    pub events_due: u64,
    /// Events waiting for their first dispatch or for a retry.
    pub events_waiting: u64,
    /// Events whose dispatch failed and will be tried again.
    pub events_retrying: u64,
    /// Dead-lettered events.
    pub events_dead: u64,
    /// Events that matched no activation.
    pub events_unmatched: u64,
}

/// Runs `stats` against the store `target` names.
pub async fn run(target: &Target) -> Result<()> {
    let opened = super::open(target).await?;
    let now = super::format::now();
    let stats = gather(&opened.store, now).await?;
    let human = format!(
        "flowstate on {}\n{}",
        opened.describe(),
        render(&stats, now)
    );
    super::emit(target, &human, &to_json(&stats))
}

/// Reads every figure of [`Stats`] through the ports.
pub async fn gather(store: &impl OpsStore, now: Timestamp) -> Result<Stats> {
    let mut stats = Stats::default();
    let mut unsettled: Vec<RunId> = Vec::new();
    for &status in RunStatus::ALL {
        let mut count = 0;
        let mut cursor: Option<RunCursor> = None;
        loop {
            let query = RunQuery {
                status: Some(status),
                limit: RunQuery::MAX_LIMIT,
                cursor,
                ..RunQuery::default()
            };
            let page = store.list_runs(&query).await.context("list_runs")?;
            count += page.items.len() as u64;
            if !status.is_settled() {
                let room = LEASES_READ.saturating_sub(unsettled.len());
                unsettled.extend(page.items.iter().take(room).map(|r| r.id));
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        stats.runs.insert(status, count);
    }
    stats.oldest_step = store
        .undispatched_steps(Duration::ZERO, 1)
        .await
        .context("undispatched_steps")?
        .into_iter()
        .next();
    for &id in &unsettled {
        let lease = store.lease_state(id).await.context("lease_state")?;
        match (lease.worker, lease.expires_at) {
            (Some(_), Some(at)) if at > now => stats.leases_held += 1,
            (Some(_), Some(_)) => stats.leases_expired += 1,
            _ => {}
        }
    }
    stats.leases_read = unsettled.len();
    let mut offset = 0;
    loop {
        let page = store
            .list_undispatched(&EventFilter::default(), 500, offset)
            .await
            .context("list_undispatched")?;
        for event in &page {
            match super::events::state(event) {
                "dead-lettered" => stats.events_dead += 1,
                "matched nothing" => stats.events_unmatched += 1,
                "retrying" => stats.events_retrying += 1,
                "waiting" => stats.events_waiting += 1,
                _ => {}
            }
        }
        if page.len() < 500 {
            break;
        }
        offset += 500;
    }
    stats.events_due = store
        .pending_events(1_000)
        .await
        .context("pending_events")?
        .len() as u64;
    Ok(stats)
}

fn render(stats: &Stats, now: Timestamp) -> String {
    let total: u64 = stats.runs.values().sum();
    let by: Vec<String> = stats
        .runs
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "  runs      {total} in all: {}", by.join(", "));
    let _ = writeln!(
        out,
        "  steps     {}",
        match &stats.oldest_step {
            Some(step) => format!(
                "oldest waiting for a worker: {:?} ({}) of run {}, unchanged for {}",
                step.name,
                step.status,
                step.run,
                duration(now.since(step.updated_at))
            ),
            None => "none waiting for a worker".to_owned(),
        }
    );
    let _ = writeln!(
        out,
        "  leases    {} held, {} expired (not yet reaped){}",
        stats.leases_held,
        stats.leases_expired,
        if stats.leases_read == LEASES_READ {
            format!(", among the first {LEASES_READ} unsettled runs")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  events    {} due now, {} waiting, {} retrying, {} dead-lettered, {} matched nothing",
        if stats.events_due >= 1_000 {
            "1000+".to_owned()
        } else {
            stats.events_due.to_string()
        },
        stats.events_waiting,
        stats.events_retrying,
        stats.events_dead,
        stats.events_unmatched
    );
    if stats.events_dead > 0 {
        out.push_str("  see them: cargo xtask events list --dead-lettered\n");
    }
    if let Some(step) = &stats.oldest_step {
        let _ = writeln!(
            out,
            "  oldest step last moved {}: cargo xtask runs show {}",
            ago(step.updated_at, now),
            step.run
        );
    }
    out
}

fn to_json(stats: &Stats) -> Value {
    let runs: Map<String, Value> = stats
        .runs
        .iter()
        .map(|(status, n)| (status.to_string(), json!(n)))
        .collect();
    json!({
        "runs": runs,
        "oldest_waiting_step": stats.oldest_step,
        "leases": {
            "held": stats.leases_held,
            "expired": stats.leases_expired,
            "read": stats.leases_read,
        },
        "events": {
            "due": stats.events_due,
            "waiting": stats.events_waiting,
            "retrying": stats.events_retrying,
            "dead_lettered": stats.events_dead,
            "matched_nothing": stats.events_unmatched,
        },
    })
}
