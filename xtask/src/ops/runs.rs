//! `cargo xtask runs list|show|cancel`: the runs of a store.
//!
//! `list` pages [`RunStore::list_runs`] (newest first; filters by workflow,
//! status, parent and age); `show` gathers what the ports know of one run:
//! the run, its steps ([`StepStore::list_steps`]), every attempt
//! ([`StepStore::step_history`]), its state
//! ([`RunStore::read_state`]), its children, its lease, fencing token and
//! wait ([`RunLeaseStore::lease_state`]) and the event that started it
//! ([`EventStore::run_cause`]). `cancel` asks for the run to stop
//! ([`RunLeaseStore::request_cancel`]) and, when no worker holds it, has
//! the cancel carried out at once by leasing it
//! ([`RunRecoveryStore::lease_run`] settles a run with a cancel requested
//! instead of handing it out); `--now` settles it as cancelled whoever holds
//! it ([`RunStore::set_run_status`]: the holder's later writes are refused,
//! the run being settled).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result};
// Named by the docs' links only.
#[cfg(doc)]
use flowstate_core::ports::{EventStore, RunLeaseStore, RunRecoveryStore, RunStore, StepStore};
use flowstate_core::{
    LeaseState, Release, Run, RunCause, RunCursor, RunId, RunQuery, RunStatus, Step, StepAttempt,
    Timestamp, wait,
};
use serde_json::{Map, Value, json};

use super::format::{Table, ago, cut, duration, json_cut, parse_duration, utc, when};
use super::{OpsStore, Target};

/// What `runs` does.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List runs, newest first, one page at a time.
    List(ListArgs),
    /// Everything the store knows about one run: its steps, every attempt,
    /// its state, children, lease and fencing token, wait, and the event
    /// that started it.
    Show {
        /// The run's id.
        id: RunId,
    },
    /// Stop a run: ask for a cancel and, if no worker holds the run, carry
    /// it out now (otherwise the holder's next claim does).
    Cancel {
        /// The run's id.
        id: RunId,
        /// Settle it as cancelled at once, even under a live lease or a
        /// wait (the holder's later writes are refused).
        #[arg(long)]
        now: bool,
    },
}

/// The filters and paging of `runs list`.
#[derive(Debug, Default, clap::Args)]
pub struct ListArgs {
    /// Only runs of this workflow.
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// Only runs in this status (running, suspended, completed, failed,
    /// cancelled).
    #[arg(long, value_name = "STATUS")]
    pub status: Option<RunStatus>,
    /// Only children of this run.
    #[arg(long, value_name = "ID")]
    pub parent: Option<RunId>,
    /// Only runs created longer ago than this (90s, 15m, 2h, 7d).
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Only runs created within this long (90s, 15m, 2h, 7d).
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub newer_than: Option<Duration>,
    /// Runs per page.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// Start after this run: the last of the previous page (printed as the
    /// next page's command).
    #[arg(long, value_name = "ID")]
    pub after: Option<RunId>,
}

/// Runs `action` against the store `target` names.
pub async fn run(target: &Target, action: Action) -> Result<()> {
    let opened = super::open(target).await?;
    let store = &opened.store;
    let now = super::format::now();
    match action {
        Action::List(args) => {
            let page = list(store, &args, now).await?;
            let human = format!(
                "runs on {}{}\n{}",
                opened.describe(),
                filters(&args),
                render_list(&page, &args, now)
            );
            super::emit(target, &human, &list_json(&page))
        }
        Action::Show { id } => {
            let view = show(store, id).await?;
            super::emit(target, &render_show(&view, now), &show_json(&view))
        }
        Action::Cancel { id, now: at_once } => {
            let done = cancel(store, id, at_once).await?;
            super::emit(target, &render_cancel(&done, now), &cancel_json(&done))
        }
    }
}

/// One page of `runs list`.
#[derive(Debug)]
pub struct Listing {
    /// The runs, newest first.
    pub runs: Vec<Run>,
    /// The last run shown, when the page is full (more may follow).
    pub next: Option<RunId>,
}

/// Pages [`RunStore::list_runs`] with `args`' filters; the age filters
/// start the listing at the cutoff and stop it there (the listing is
/// newest first).
pub async fn list(store: &impl OpsStore, args: &ListArgs, now: Timestamp) -> Result<Listing> {
    let older_cutoff = args.older_than.map(|age| now.minus(age));
    let newer_cutoff = args.newer_than.map(|age| now.minus(age));
    let mut cursor = match args.after {
        Some(id) => Some(RunCursor::after(
            &store.get_run(id).await.context("--after names no run")?,
        )),
        None => None,
    };
    if let Some(cutoff) = older_cutoff {
        // Any id sorts below a fresh one, so this starts just at the cutoff.
        let start = RunCursor {
            created_at: cutoff,
            id: RunId::generate(),
        };
        if cursor.is_none_or(|c| (c.created_at, c.id) > (start.created_at, start.id)) {
            cursor = Some(start);
        }
    }
    let mut runs = Vec::new();
    loop {
        let query = RunQuery {
            workflow: args.workflow.clone(),
            status: args.status,
            parent: args.parent,
            limit: args.limit + 1,
            cursor,
        };
        let page = store.list_runs(&query).await.context("list_runs")?;
        for run in page.items {
            if newer_cutoff.is_some_and(|cutoff| run.created_at < cutoff) {
                return Ok(Listing { runs, next: None });
            }
            if older_cutoff.is_some_and(|cutoff| run.created_at > cutoff) {
                continue;
            }
            if runs.len() == args.limit as usize {
                let next = runs.last().map(|r: &Run| r.id);
                return Ok(Listing { runs, next });
            }
            runs.push(run);
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(Listing { runs, next: None }),
        }
    }
}

fn filters(args: &ListArgs) -> String {
    let mut parts = Vec::new();
    if let Some(w) = &args.workflow {
        parts.push(format!("workflow {w}"));
    }
    if let Some(s) = args.status {
        parts.push(format!("status {s}"));
    }
    if let Some(p) = args.parent {
        parts.push(format!("children of {p}"));
    }
    if let Some(age) = args.older_than {
        parts.push(format!("older than {}", duration(age)));
    }
    if let Some(age) = args.newer_than {
        parts.push(format!("newer than {}", duration(age)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

fn render_list(page: &Listing, args: &ListArgs, now: Timestamp) -> String {
    if page.runs.is_empty() {
        return "  no runs\n".to_owned();
    }
    let mut table = Table::new(&["ID", "WORKFLOW", "STATUS", "CREATED", "UPDATED"]);
    for run in &page.runs {
        table.row(vec![
            run.id.to_string(),
            cut(&run.workflow, 32),
            run.status.to_string(),
            ago(run.created_at, now),
            ago(run.updated_at, now),
        ]);
    }
    let mut out = table.render();
    let count = page.runs.len();
    let _ = write!(out, "{count} run{}", if count == 1 { "" } else { "s" });
    match page.next {
        Some(next) => {
            let _ = writeln!(
                out,
                "; next page: cargo xtask runs list{} --after {next}",
                again(args)
            );
        }
        None => out.push('\n'),
    }
    out
}

/// The flags of `args` that a next-page command repeats.
fn again(args: &ListArgs) -> String {
    let mut flags = String::new();
    if let Some(w) = &args.workflow {
        let _ = write!(flags, " --workflow {w}");
    }
    if let Some(s) = args.status {
        let _ = write!(flags, " --status {s}");
    }
    if let Some(p) = args.parent {
        let _ = write!(flags, " --parent {p}");
    }
    if let Some(age) = args.older_than {
        let _ = write!(flags, " --older-than {}s", age.as_secs());
    }
    if let Some(age) = args.newer_than {
        let _ = write!(flags, " --newer-than {}s", age.as_secs());
    }
    if args.limit != 20 {
        let _ = write!(flags, " --limit {}", args.limit);
    }
    flags
}

fn list_json(page: &Listing) -> Value {
    json!({
        "runs": page.runs,
        "next_after": page.next.map(|id| id.to_string()),
    })
}

/// How many children `runs show` lists by id (all are counted).
const CHILDREN_SHOWN: u32 = 20;

/// What `runs show` gathers about one run.
#[derive(Debug)]
pub struct RunView {
    /// The run.
    pub run: Run,
    /// Its steps, in the order the store lists them.
    pub steps: Vec<Step>,
    /// Every attempt of every step.
    pub attempts: Vec<StepAttempt>,
    /// Its state, every key.
    pub state: Map<String, Value>,
    /// How many children it has in each status.
    pub children: BTreeMap<RunStatus, u64>,
    /// Its newest children (at most [`CHILDREN_SHOWN`]).
    pub child_runs: Vec<Run>,
    /// Its lease, fencing token, failures, cancel and wait.
    pub lease: LeaseState,
    /// The event that started it, if one did.
    pub cause: Option<RunCause>,
}

/// Reads one run and everything about it, one port call each.
pub async fn show(store: &impl OpsStore, id: RunId) -> Result<RunView> {
    let run = store.get_run(id).await.context("get_run")?;
    let steps = store.list_steps(id).await.context("list_steps")?;
    let attempts = store.step_history(id).await.context("step_history")?;
    let state = store.read_state(id).await.context("read_state")?;
    let children = store.count_children(id).await.context("count_children")?;
    let child_runs = store
        .list_runs(&RunQuery {
            parent: Some(id),
            limit: CHILDREN_SHOWN,
            ..RunQuery::default()
        })
        .await
        .context("list_runs (children)")?
        .items;
    let lease = store.lease_state(id).await.context("lease_state")?;
    let cause = store.run_cause(id).await.context("run_cause")?;
    Ok(RunView {
        run,
        steps,
        attempts,
        state,
        children,
        child_runs,
        lease,
        cause,
    })
}

fn render_show(view: &RunView, now: Timestamp) -> String {
    let run = &view.run;
    let mut out = format!("run {}\n", run.id);
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<12} {value}");
    };
    field("workflow", run.workflow.clone());
    field("status", run.status.to_string());
    field("created", when(run.created_at, now));
    field("updated", when(run.updated_at, now));
    if let Some(hash) = &run.graph_hash {
        field("graph", hash.clone());
    }
    if let Some(parent) = run.parent {
        field("parent", parent.to_string());
    }
    if let Some(key) = &run.idempotency_key {
        field("idem. key", cut(key, 80));
    }
    field("input", json_cut(&run.input, 100));
    if let Some(output) = &run.output {
        field("output", json_cut(output, 100));
    }
    field("lease", lease_line(&view.lease, now));
    if view.lease.failures > 0 || view.lease.failure_reason.is_some() {
        field(
            "failures",
            format!(
                "{} in a row{}",
                view.lease.failures,
                view.lease
                    .failure_reason
                    .as_deref()
                    .map(|r| format!(", last: {}", cut(r, 80)))
                    .unwrap_or_default()
            ),
        );
    }
    if view.lease.cancel_requested {
        field("cancel", "requested (the next claim settles it)".to_owned());
    }
    if let Some(wait) = wait_line(&view.lease, now) {
        field("waiting", wait);
    }
    field(
        "cause",
        match &view.cause {
            Some(cause) => format!(
                "event {} (activation {}, version {}), occurred {}",
                cause.event,
                cause.activation,
                cause.version,
                utc(cause.occurred_at)
            ),
            None => "not started by an event".to_owned(),
        },
    );
    let keys: Vec<&str> = view.state.keys().map(String::as_str).collect();
    field(
        "state",
        if keys.is_empty() {
            "no keys".to_owned()
        } else {
            cut(&format!("{} key(s): {}", keys.len(), keys.join(", ")), 100)
        },
    );
    let total: u64 = view.children.values().sum();
    field(
        "children",
        if total == 0 {
            "none".to_owned()
        } else {
            let by: Vec<String> = view
                .children
                .iter()
                .map(|(status, n)| format!("{n} {status}"))
                .collect();
            format!("{total} ({})", by.join(", "))
        },
    );
    for child in &view.child_runs {
        let _ = writeln!(
            out,
            "               {}  {}  {}",
            child.id,
            child.status,
            cut(&child.workflow, 32)
        );
    }

    let _ = writeln!(out, "\nsteps ({})", view.steps.len());
    if view.steps.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut table = Table::new(&[
            "NAME",
            "STATUS",
            "ATTEMPT",
            "FUNCTION",
            "CLAIMED UNTIL",
            "UPDATED",
        ]);
        for step in &view.steps {
            table.row(vec![
                cut(&step.name, 32),
                step.status.to_string(),
                format!("{} of {}", step.attempt, step.retry.retries + 1),
                step.function.clone().unwrap_or_else(|| "-".to_owned()),
                step.claimed_until
                    .map_or_else(|| "-".to_owned(), |at| ago(at, now)),
                ago(step.updated_at, now),
            ]);
        }
        out.push_str(&table.render());
    }

    let _ = writeln!(out, "\nattempts ({})", view.attempts.len());
    if view.attempts.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut table = Table::new(&["STEP", "#", "STATUS", "STARTED", "TOOK", "ERROR"]);
        for attempt in &view.attempts {
            let ended = attempt.succeeded_at.or(attempt.failed_at);
            table.row(vec![
                cut(&attempt.step_name, 32),
                attempt.attempt.to_string(),
                attempt.status.to_string(),
                attempt.running_at.map_or_else(|| "-".to_owned(), utc),
                match (attempt.running_at, ended) {
                    (Some(from), Some(to)) => duration(to.since(from)),
                    _ => "-".to_owned(),
                },
                attempt
                    .error
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), error_text),
            ]);
        }
        out.push_str(&table.render());
    }
    out
}

/// An attempt's error: its message when it has one, else its JSON.
fn error_text(error: &Value) -> String {
    match error {
        Value::String(s) => cut(s, 60),
        Value::Object(o) => match o.get("message").or_else(|| o.get("error")) {
            Some(Value::String(s)) => cut(s, 60),
            _ => json_cut(error, 60),
        },
        other => json_cut(other, 60),
    }
}

fn lease_line(lease: &LeaseState, now: Timestamp) -> String {
    match (&lease.worker, lease.expires_at) {
        (Some(worker), Some(at)) if at > now => format!(
            "held by {worker}, fencing token {}, expires {}",
            lease.token,
            ago(at, now)
        ),
        (Some(worker), Some(at)) => format!(
            "expired {} (last holder {worker}), fencing token {}",
            ago(at, now),
            lease.token
        ),
        _ if lease.token == 0 => "never leased".to_owned(),
        _ => format!("free, fencing token {}", lease.token),
    }
}

fn wait_line(lease: &LeaseState, now: Timestamp) -> Option<String> {
    let until = lease
        .wake_at
        .map(|at| format!(" until {}", when(at, now)))
        .unwrap_or_default();
    match lease.waiting_on.as_deref() {
        Some(wait::CHILDREN) => Some(format!("for its children to settle{until}")),
        Some(signal) => Some(format!("for signal {signal:?}{until}")),
        None => lease
            .wake_at
            .map(|at| format!("asleep until {}", when(at, now))),
    }
}

fn lease_json(lease: &LeaseState) -> Value {
    json!({
        "token": lease.token,
        "worker": lease.worker,
        "expires_at": lease.expires_at,
        "failures": lease.failures,
        "failure_reason": lease.failure_reason,
        "cancel_requested": lease.cancel_requested,
        "wake_at": lease.wake_at,
        "waiting_on": lease.waiting_on,
    })
}

fn show_json(view: &RunView) -> Value {
    let children: Map<String, Value> = view
        .children
        .iter()
        .map(|(status, n)| (status.to_string(), json!(n)))
        .collect();
    json!({
        "run": view.run,
        "steps": view.steps,
        "attempts": view.attempts,
        "state": view.state,
        "children": { "counts": children, "runs": view.child_runs },
        "lease": lease_json(&view.lease),
        "cause": view.cause,
    })
}

/// What `runs cancel` did.
#[derive(Debug)]
pub struct Cancelled {
    /// The run as it was found.
    pub before: RunStatus,
    /// The run after the command.
    pub run: Run,
    /// Its lease after the command.
    pub lease: LeaseState,
}

/// The name `cancel` leases a run under, for the instant it takes to
/// settle it.
const OPERATOR: &str = "xtask-operator";

/// Cancels `id`: a settled run is left as it is; otherwise a cancel is
/// requested and carried out now if the run can be leased (or at once,
/// whoever holds it, with `at_once`).
pub async fn cancel(store: &impl OpsStore, id: RunId, at_once: bool) -> Result<Cancelled> {
    let before = store.get_run(id).await.context("get_run")?.status;
    if !before.is_settled() {
        store.request_cancel(id).await.context("request_cancel")?;
        if at_once {
            store
                .set_run_status(id, RunStatus::Cancelled)
                .await
                .context("set_run_status")?;
        } else if let Some(lease) = store
            .lease_run(id, OPERATOR, Duration::from_secs(5))
            .await
            .context("lease_run")?
        {
            // Only a run whose cancel was already carried out is handed out;
            // give it straight back.
            store
                .release(id, lease.token, Release::Yield)
                .await
                .context("release")?;
        }
    }
    let run = store.get_run(id).await.context("get_run")?;
    let lease = store.lease_state(id).await.context("lease_state")?;
    Ok(Cancelled { before, run, lease })
}

fn render_cancel(done: &Cancelled, now: Timestamp) -> String {
    let id = done.run.id;
    if done.before.is_settled() {
        return format!("run {id} is already {}: nothing to cancel\n", done.before);
    }
    if done.run.status == RunStatus::Cancelled {
        return format!("run {id} cancelled (was {})\n", done.before);
    }
    let why = match wait_line(&done.lease, now) {
        Some(wait) => format!("it is waiting {wait}"),
        None => format!("its lease is {}", lease_line(&done.lease, now)),
    };
    format!(
        "run {id}: cancel requested; {why}, so the next claim settles it \
         (`runs cancel {id} --now` settles it at once)\n"
    )
}

fn cancel_json(done: &Cancelled) -> Value {
    json!({
        "run": done.run.id.to_string(),
        "was": done.before,
        "status": done.run.status,
        "cancelled": done.run.status == RunStatus::Cancelled && !done.before.is_settled(),
        "cancel_requested": done.lease.cancel_requested,
        "lease": lease_json(&done.lease),
    })
}
