//! The demo's end: the summary, the timeline of the run that was retried
//! and recovered after the crash, and the verdict, which names every
//! invariant that did not hold. The invariants' figures come from
//! [`super::verify`] (the database); the counters kept in memory are shown
//! beside them as what the parts saw, never as the proof.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{RunId, RunQuery, RunStatus};
use flowstate_recovery::{Reason, SweeperReport};
use flowstate_store_diesel::DieselStore;
use flowstate_virtual_users::RunnerReport;

use super::Options;
use super::crash::CrashNotice;
use super::definitions::PICKED_UP;
use super::dispatch::Dispatched;
use super::emit::{Emitted, VIEWED_EVERY};
use super::engine::Shared;
use super::outside::Outside;
use super::progress::Rates;
use super::provider::Provider;
use super::users::Personas;
use super::verify::Found;

/// Everything the demo saw and found.
pub struct Summary {
    /// What it ran.
    pub options: Options,
    /// What the emitters recorded.
    pub emitted: Emitted,
    /// What the first (capped) dispatchers did.
    pub first: Dispatched,
    /// What the fixed dispatcher did.
    pub fixed: Dispatched,
    /// Dead letters listed and redriven.
    pub dead_letters: (u64, u64),
    /// The database, read back.
    pub found: Found,
    /// The virtual users, read back.
    pub personas: Personas,
    /// What the runner did.
    pub runner: RunnerReport,
    /// What the sweeper did.
    pub sweeps: SweeperReport,
    /// The runs the sweeps re-drove.
    pub redriven: Vec<(RunId, Reason)>,
    /// The crash, and when it happened.
    pub crash: Option<(CrashNotice, Instant)>,
    /// The crashed worker's runs as they ended.
    pub recovered: Vec<(RunId, RunStatus)>,
    /// The workers' shared counters.
    pub shared: Arc<Shared>,
    /// The carrier's and the customers' counters.
    pub outside: Arc<Outside>,
    /// Why the demo stopped waiting, if it did.
    pub stuck: Option<String>,
    /// From the start to the first emit: migrations, definitions, tables,
    /// connections.
    pub setup_time: Duration,
    /// From the first emit to the last run settled.
    pub work_time: Duration,
    /// The step rate over each fifth of the work, and the machine's load.
    pub rates: Rates,
    /// Stopping the workers, the sweeper, the dispatchers and the users.
    pub stop_time: Duration,
    /// Reading every invariant back (stranded effects settled first).
    pub check_time: Duration,
    /// The whole demo, setup and checks included.
    pub total_time: Duration,
}

fn row(label: &str, value: impl std::fmt::Display, note: &str) {
    if note.is_empty() {
        println!("  {label:<34}{value:>9}");
    } else {
        println!("  {label:<34}{value:>9}   {note}");
    }
}

impl Summary {
    /// Reads back the crashed worker's runs as they ended.
    pub async fn read_recovered(&mut self, store: &DieselStore) -> Result<()> {
        if let Some((notice, _)) = &self.crash {
            for &run in &notice.held {
                self.recovered.push((run, store.get_run(run).await?.status));
            }
        }
        Ok(())
    }

    /// Prints the summary.
    pub fn print(&self) {
        let f = &self.found;
        let o = &self.options;
        let secs = self.work_time.as_secs_f64().max(1e-9);
        let s = &self.shared;
        println!("summary");
        println!(" events");
        row(
            "order.placed recorded",
            f.events[0],
            &format!("({} orders)", o.events),
        );
        row(
            "duplicates suppressed",
            self.emitted.duplicates,
            "(same dedupe key: recorded once, no second run)",
        );
        row(
            "unmatched (order.viewed)",
            f.events[2],
            "(no activation: recorded, started nothing)",
        );
        row(
            "dispatched in the emit",
            self.emitted.dispatched_now,
            "(Dispatch::Now)",
        );
        row(
            "dispatched by dispatchers",
            self.first.events + self.fixed.events,
            &format!("({} dispatch_queued runners)", o.dispatchers),
        );
        row(
            "dispatch failures",
            self.first.failed + self.fixed.failed,
            "(the poison, backing off)",
        );
        row(
            "dead-lettered",
            self.first.dead_lettered,
            &format!("(listed: {})", self.dead_letters.0),
        );
        row(
            "redriven",
            self.dead_letters.1,
            &format!("(after the fix; {} now dead: must be 0)", f.dead_now),
        );
        row(
            "events with the wrong runs",
            f.wrong_runs.iter().sum::<i64>(),
            "(must be 0)",
        );
        println!(" runs");
        row("orders completed", f.orders.0, "");
        row(
            "orders cancelled",
            f.orders.1,
            &format!(
                "({} cancels requested mid-flight)",
                self.outside.cancels.load(Ordering::Relaxed)
            ),
        );
        row("orders failed", f.orders.2, "(must be 0)");
        row(
            "notify children completed",
            f.completed.0,
            &format!(
                "({} completed orders without one: must be 0)",
                f.orders_without_child
            ),
        );
        row(
            "refunds completed",
            f.completed.1,
            &format!("({} order.cancelled events)", f.events[1]),
        );
        row("imports completed", f.completed.2, "(the poison, redriven)");
        row(
            "recovered after the crash",
            self.recovered
                .iter()
                .filter(|(_, s)| s.is_settled())
                .count(),
            &format!("(of {} runs the crashed worker held)", self.recovered.len()),
        );
        row("lost or unsettled runs", f.unsettled, "(must be 0)");
        row(
            "pickup signals sent",
            self.outside.signals.load(Ordering::Relaxed),
            &format!(
                "({} too late: order already cancelled)",
                self.outside.signals_too_late.load(Ordering::Relaxed)
            ),
        );
        println!(" steps and effects");
        row(
            "steps executed",
            f.executions,
            "(attempts, from demo_executions)",
        );
        row("retries", f.retries, "(attempts after the first)");
        row(
            "double executions",
            f.double_executions,
            "(an attempt run twice: must be 0)",
        );
        row("effects performed", f.effects, "(rows of demo_effects)");
        row("effects repeated", f.effects_repeated, "(must be 0)");
        row(
            "effects missing",
            f.effects_missing,
            "(a completed run without its effect: must be 0)",
        );
        row(
            "effects replayed from the journal",
            s.effects_replayed.load(Ordering::Relaxed),
            "",
        );
        row(
            "stranded effects resolved",
            s.stranded_resolved.load(Ordering::Relaxed),
            &format!("({} left stranded: must be 0)", f.stranded),
        );
        println!(" recovery");
        row("leases reaped", self.sweeps.reaped, "");
        row("step claims taken back", self.sweeps.expired_claims, "");
        row(
            "runs re-driven by the sweeps",
            self.redriven.len(),
            &format!("({} passes)", self.sweeps.passes),
        );
        row(
            "lease fencing refusals",
            s.fencing_refusals.load(Ordering::Relaxed),
            "(writes refused: lease or claim lost)",
        );
        row(
            "worker errors",
            s.errors.load(Ordering::Relaxed),
            "(each run given back and retried)",
        );
        if let Some(m) = super::metrics::figures() {
            println!(" metrics (flowstate-metrics, the workers' stores)");
            row("claims won", m.claims_won, "(flowstate_claims_won_total)");
            row(
                "claims lost",
                m.claims_lost,
                &format!("(duplicates; {} refused)", m.claims_refused),
            );
            row(
                "transitions",
                m.transitions,
                "(flowstate_transitions_total)",
            );
            row("retries", m.retries, "(flowstate_retries_total)");
            row("leases taken", m.leases_taken, "");
            row(
                "fencing refusals",
                m.fencing_refusals,
                "(flowstate_fencing_refusals_total)",
            );
            row("sweep re-drives", m.sweep_redrives, "(by reason, summed)");
            let ms = |mean: Option<f64>| mean.map_or("-".to_owned(), |ms| format!("{ms:.2} ms"));
            row(
                "mean claim latency",
                ms(m.mean_claim_ms),
                "(flowstate_claim_seconds)",
            );
            row(
                "mean transition latency",
                ms(m.mean_transition_ms),
                "(flowstate_transition_seconds)",
            );
        }
        println!(" virtual users");
        row("ticks", self.runner.ticks, "");
        row(
            "runs",
            self.personas.runs.iter().sum::<usize>(),
            &format!(
                "(shopper {}, browser {}, ghost {} with the stranded one)",
                self.personas.runs[0], self.personas.runs[1], self.personas.runs[2]
            ),
        );
        row(
            "in-flight ticks skipped (browser)",
            self.runner
                .ticks
                .saturating_sub(self.personas.runs[1] as u64),
            "(its runs outlast a tick)",
        );
        row(
            "stale runs reaped",
            self.personas.reaped,
            &format!("({} overlapping runs: must be 0)", self.personas.overlaps),
        );
        println!(" time");
        let took = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        row(
            "setup",
            took(self.setup_time),
            "(migrations, definitions, connections)",
        );
        row(
            "work (first emit to last settle)",
            format!("{secs:.2} s"),
            "",
        );
        row(
            "stop",
            took(self.stop_time),
            "(workers, sweeper, dispatchers, users)",
        );
        row(
            "checks",
            took(self.check_time),
            "(every invariant read back from the database)",
        );
        row(
            "total (with setup and checks)",
            format!("{:.2} s", self.total_time.as_secs_f64()),
            "",
        );
        row(
            "throughput",
            format!("{:.0}", o.events as f64 / secs),
            "orders/s",
        );
        row("", format!("{:.0}", f.executions as f64 / secs), "steps/s");
        row(
            "",
            format!("{:.0}", f.events.iter().sum::<i64>() as f64 / secs),
            "events/s",
        );
        if !self.rates.fifths.is_empty() {
            let fifths = self
                .rates
                .fifths
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(" ");
            println!("  {:<34}{fifths:>9}", "steps/s by fifth of the work");
        }
        if let (Some(start), Some(end)) = self.rates.load {
            row(
                "load average (1 min)",
                format!("{start:.1} -> {end:.1}"),
                "(the machine's, at the start and the end of the work)",
            );
        }
        for error in s
            .error_samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            println!("    error: {error}");
        }
    }

    /// Every invariant that did not hold, named.
    pub fn violations(&self) -> Vec<String> {
        let f = &self.found;
        let o = &self.options;
        let mut broken = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                broken.push(what);
            }
        };
        let orders = o.events as i64;
        let viewed = o.events.div_ceil(VIEWED_EVERY) as i64;
        let cancels = self.outside.cancels.load(Ordering::Relaxed) as i64;
        if let Some(why) = &self.stuck {
            check(false, format!("stuck: {why}"));
        }
        check(
            f.events[0] == orders,
            format!(
                "{} order.placed events recorded, expected {orders} (one per dedupe key)",
                f.events[0]
            ),
        );
        check(
            f.events[1] == cancels,
            format!(
                "{} order.cancelled events recorded, expected {cancels}",
                f.events[1]
            ),
        );
        check(
            f.events[2] == viewed,
            format!(
                "{} order.viewed events recorded, expected {viewed}",
                f.events[2]
            ),
        );
        check(
            f.events[3] == o.poison as i64,
            format!(
                "{} poison events recorded, expected {}",
                f.events[3], o.poison
            ),
        );
        for (name, wrong) in [
            "order.placed",
            "order.cancelled",
            "order.viewed",
            "catalog.imported",
        ]
        .iter()
        .zip(f.wrong_runs)
        {
            check(
                wrong == 0,
                format!("{wrong} {name} events did not start exactly the runs they should"),
            );
        }
        check(
            f.dead_now == 0,
            format!("{} events still dead-lettered", f.dead_now),
        );
        check(
            self.dead_letters.1 == o.poison as u64,
            format!(
                "{} dead letters redriven, expected {}",
                self.dead_letters.1, o.poison
            ),
        );
        check(
            f.orders.0 + f.orders.1 == orders,
            format!(
                "{} orders completed and {} cancelled, expected {orders} in all",
                f.orders.0, f.orders.1
            ),
        );
        check(f.orders.2 == 0, format!("{} orders failed", f.orders.2));
        check(
            f.orders_without_child == 0,
            format!(
                "{} completed orders without exactly one completed child",
                f.orders_without_child
            ),
        );
        check(
            f.completed.1 == f.events[1],
            format!(
                "{} refunds completed for {} cancels",
                f.completed.1, f.events[1]
            ),
        );
        check(
            f.completed.2 == o.poison as i64,
            format!("{} imports completed, expected {}", f.completed.2, o.poison),
        );
        check(
            f.unsettled == 0,
            format!("{} runs left unsettled", f.unsettled),
        );
        check(
            f.double_executions == 0,
            format!("{} step attempts executed twice", f.double_executions),
        );
        check(
            f.effects_repeated == 0,
            format!("{} effects performed more than once", f.effects_repeated),
        );
        check(
            f.effects_missing == 0,
            format!("{} completed runs missing an effect", f.effects_missing),
        );
        check(
            f.stranded == 0,
            format!("{} effects left begun and never settled", f.stranded),
        );
        if !o.no_crash {
            check(
                self.crash.is_some(),
                "the crash never happened (too few retried charges for worker-0)".to_owned(),
            );
            check(
                self.recovered.iter().all(|(_, s)| s.is_settled()),
                "a run the crashed worker held was not settled".to_owned(),
            );
        }
        check(
            self.personas.reaped >= 1,
            "no stale virtual-user run was reaped".to_owned(),
        );
        check(
            self.personas.running == 0,
            format!("{} virtual-user runs still running", self.personas.running),
        );
        check(
            self.personas.overlaps == 0,
            format!(
                "{} virtual-user runs overlapped their persona's previous run",
                self.personas.overlaps
            ),
        );
        check(
            (self.personas.runs[1] as u64) < self.runner.ticks,
            "the in-flight persona was never skipped".to_owned(),
        );
        broken
    }

    /// Exits non-zero naming every invariant that did not hold.
    pub fn verdict(&self) -> Result<()> {
        let broken = self.violations();
        if broken.is_empty() {
            println!(
                "demo OK: every event started exactly its runs, every run settled, nothing ran twice, no effect repeated"
            );
            Ok(())
        } else {
            for line in &broken {
                println!("  VIOLATED: {line}");
            }
            bail!("demo FAILED: {}", broken.join("; "))
        }
    }

    /// Prints the timeline of the run the crash hit: each step, each
    /// attempt, its worker, status, start and duration, the signal it
    /// waited for and its child, all read back from the database.
    pub async fn print_timeline(&self, store: &DieselStore, provider: &mut Provider) -> Result<()> {
        let Some((notice, _)) = &self.crash else {
            println!("timeline: no crash in this run (--no-crash), nothing to show");
            return Ok(());
        };
        let run = store.get_run(notice.run).await?;
        let order = run
            .input
            .get("order")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        println!(
            "timeline of run {} (order {order}): retried, then recovered after {} crashed between begin_effect and settle_effect of {} attempt {}",
            run.id, notice.worker, notice.step, notice.attempt
        );
        let t0 = run.created_at;
        let at = |t: flowstate_core::Timestamp| format!("+{:.3} s", t.since(t0).as_secs_f64());
        let workers: HashMap<(String, i64), String> = provider
            .executions(run.id)
            .await?
            .into_iter()
            .map(|e| ((e.step, e.attempt), e.worker))
            .collect();
        println!(
            "  {:<8} {:>7}  {:<9} {:<9} {:>10} {:>9}  note",
            "step", "attempt", "worker", "status", "start", "took"
        );
        for attempt in store.step_history(run.id).await? {
            if attempt.step_name == "ship" {
                let state = store.read_state(run.id).await?;
                if let Some(pickup) = state.get("pickup") {
                    println!("  {:<8} waited for signal {PICKED_UP}: {pickup}", "wait");
                }
            }
            let worker = workers
                .get(&(attempt.step_name.clone(), i64::from(attempt.attempt)))
                .map_or("-", String::as_str);
            let took = attempt
                .duration()
                .map_or_else(|| "-".to_owned(), |d| format!("{} ms", d.as_millis()));
            let mut note = attempt
                .error
                .as_ref()
                .map(|e| {
                    e.get("error")
                        .map_or_else(|| e.to_string(), ToString::to_string)
                })
                .unwrap_or_default();
            if attempt.step_name == notice.step && attempt.attempt == notice.attempt {
                let _ = write!(
                    note,
                    " <- {} crashed here holding {} leases",
                    notice.worker,
                    notice.held.len()
                );
            }
            println!(
                "  {:<8} {:>7}  {:<9} {:<9} {:>10} {:>9}  {}",
                attempt.step_name,
                attempt.attempt,
                worker,
                attempt.status.as_str(),
                attempt.running_at.map_or_else(|| "-".to_owned(), at),
                took,
                note.trim()
            );
            if attempt.step_name == "charge" && attempt.status.as_str() == "succeeded" {
                let children = store
                    .list_runs(&RunQuery {
                        parent: Some(run.id),
                        ..RunQuery::default()
                    })
                    .await?;
                for child in children.items {
                    let by: Vec<String> = provider
                        .executions(child.id)
                        .await?
                        .into_iter()
                        .map(|e| format!("{} attempt {} by {}", e.step, e.attempt, e.worker))
                        .collect();
                    println!(
                        "  {:<8} child run {} ({}): {} at {}; {}",
                        "child",
                        child.id,
                        child.workflow,
                        child.status.as_str(),
                        at(child.updated_at),
                        by.join(", ")
                    );
                }
            }
        }
        let lease = flowstate_core::ports::RunLeaseStore::lease_state(store, run.id).await?;
        println!(
            "  {:<8} {} at {}, leased {} times (its fencing token is {})",
            "run",
            run.status.as_str(),
            at(run.updated_at),
            lease.token,
            lease.token
        );
        Ok(())
    }
}
