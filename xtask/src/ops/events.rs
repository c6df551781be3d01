//! `cargo xtask events list|show|redrive`: the events of a store.
//!
//! `list` pages [`EventStore::list_undispatched`] (events that matched
//! nothing, wait, retry or were dead-lettered), `--dead-lettered` keeping
//! the dead letters; `show` reads one event ([`EventStore::get_event`])
//! and the runs its deliveries started; `redrive` puts one dead letter, or
//! every dead letter of a type, back in line ([`EventStore::redrive`]).
//!
//! `show` reads the runs from the event ([`EventStore::event_runs`]: one
//! per materialised delivery, with its cause), then each run.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
// Named by the docs' links only.
#[cfg(doc)]
use flowstate_core::ports::{EventStore, RunStore};
use flowstate_core::{Event, EventFilter, EventId, Run, RunCause, Timestamp};
use serde_json::{Value, json};

use super::format::{Table, ago, cut, json_cut, utc, when};
use super::{OpsStore, Target};

/// What `events` does.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the events not yet dispatched (waiting, retrying, dead-lettered
    /// or matching nothing), oldest first.
    List(ListArgs),
    /// One event: where its dispatch stands, its deliveries and the runs
    /// they started.
    Show {
        /// The event's id.
        id: EventId,
    },
    /// Put a dead-lettered event back in line (attempts back to 0, due
    /// now), or with --type every dead letter of that type.
    Redrive {
        /// The event's id.
        #[arg(required_unless_present = "event_type", conflicts_with = "event_type")]
        id: Option<EventId>,
        /// Redrive every dead-lettered event of this type instead.
        #[arg(long = "type", value_name = "TYPE")]
        event_type: Option<String>,
    },
}

/// The filters and paging of `events list`.
#[derive(Debug, Default, clap::Args)]
pub struct ListArgs {
    /// Only dead-lettered events.
    #[arg(long)]
    pub dead_lettered: bool,
    /// Only events of this type.
    #[arg(long = "type", value_name = "TYPE")]
    pub event_type: Option<String>,
    /// Only events of this app.
    #[arg(long, value_name = "APP")]
    pub app: Option<String>,
    /// Only events of this scope.
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<String>,
    /// Events per page.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// Skip this many matching events (the next page's offset is printed).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub offset: u32,
}

/// Runs `action` against the store `target` names.
pub async fn run(target: &Target, action: Action) -> Result<()> {
    let opened = super::open(target).await?;
    let store = &opened.store;
    let now = super::format::now();
    match action {
        Action::List(args) => {
            let page = list(store, &args).await?;
            let what = if args.dead_lettered {
                "dead-lettered events"
            } else {
                "undispatched events"
            };
            let human = format!(
                "{what} on {}\n{}",
                opened.describe(),
                render_list(&page, &args, now)
            );
            let json = json!({ "events": page.events, "next_offset": page.next_offset });
            super::emit(target, &human, &json)
        }
        Action::Show { id } => {
            let view = show(store, id).await?;
            super::emit(target, &render_show(&view, now), &show_json(&view))
        }
        Action::Redrive { id, event_type } => {
            let done = match (id, event_type) {
                (Some(id), _) => vec![redrive_one(store, id).await?],
                (None, Some(event_type)) => redrive_type(store, &event_type).await?,
                (None, None) => bail!("name an event, or --type TYPE"),
            };
            super::emit(target, &render_redrive(&done), &redrive_json(&done))
        }
    }
}

/// Where an event's dispatch stands, in a word.
pub fn state(event: &Event) -> &'static str {
    if event.dead_lettered_at.is_some() {
        "dead-lettered"
    } else if event.matched == 0 {
        "matched nothing"
    } else if event.dispatched_at.is_some() {
        "dispatched"
    } else if event.attempts > 0 {
        "retrying"
    } else {
        "waiting"
    }
}

/// One page of `events list`.
#[derive(Debug)]
pub struct Listing {
    /// The events, oldest first.
    pub events: Vec<Event>,
    /// The offset of the next page, when more match.
    pub next_offset: Option<u32>,
}

/// The page size `list` reads the port in.
const SCAN: u32 = 500;

/// Events of `filter` that `keep` admits, oldest first, from the
/// `offset`-th on, at most `limit` (and whether more follow).
async fn undispatched(
    store: &impl OpsStore,
    filter: &EventFilter,
    keep: impl Fn(&Event) -> bool,
    offset: u32,
    limit: u32,
) -> Result<Listing> {
    let (mut skipped, mut events, mut from) = (0, Vec::new(), 0);
    loop {
        let page = store
            .list_undispatched(filter, SCAN, from)
            .await
            .context("list_undispatched")?;
        let full = page.len() == SCAN as usize;
        from += SCAN;
        for event in page.into_iter().filter(|e| keep(e)) {
            if skipped < offset {
                skipped += 1;
            } else if events.len() == limit as usize {
                let next_offset = Some(offset + limit);
                return Ok(Listing {
                    events,
                    next_offset,
                });
            } else {
                events.push(event);
            }
        }
        if !full {
            return Ok(Listing {
                events,
                next_offset: None,
            });
        }
    }
}

/// `events list`: [`EventStore::list_undispatched`] with `args`' filters.
pub async fn list(store: &impl OpsStore, args: &ListArgs) -> Result<Listing> {
    let filter = EventFilter {
        app_id: args.app.clone(),
        scope_id: args.scope.clone(),
    };
    let keep = |e: &Event| {
        (!args.dead_lettered || e.dead_lettered_at.is_some())
            && args.event_type.as_ref().is_none_or(|t| *t == e.event_type)
    };
    undispatched(store, &filter, keep, args.offset, args.limit).await
}

fn render_list(page: &Listing, args: &ListArgs, now: Timestamp) -> String {
    if page.events.is_empty() {
        return "  none\n".to_owned();
    }
    let mut table = Table::new(&["ID", "TYPE", "STATE", "ATTEMPTS", "OCCURRED", "LAST ERROR"]);
    for event in &page.events {
        table.row(vec![
            event.id.to_string(),
            cut(&event.event_type, 32),
            state(event).to_owned(),
            event.attempts.to_string(),
            ago(event.occurred_at, now),
            event
                .last_error
                .as_deref()
                .map_or_else(|| "-".to_owned(), |e| cut(e, 60)),
        ]);
    }
    let mut out = table.render();
    let count = page.events.len();
    let _ = write!(out, "{count} event{}", if count == 1 { "" } else { "s" });
    match page.next_offset {
        Some(offset) => {
            let mut flags = String::new();
            if args.dead_lettered {
                flags.push_str(" --dead-lettered");
            }
            for (flag, value) in [
                ("--type", &args.event_type),
                ("--app", &args.app),
                ("--scope", &args.scope),
            ] {
                if let Some(value) = value {
                    let _ = write!(flags, " {flag} {value}");
                }
            }
            let _ = writeln!(
                out,
                "; next page: cargo xtask events list{flags} --offset {offset}"
            );
        }
        None => out.push('\n'),
    }
    if page.events.iter().any(|e| e.dead_lettered_at.is_some()) {
        out.push_str("redrive one with `cargo xtask events redrive ID`, a type with --type TYPE\n");
    }
    out
}

/// What `events show` gathers about one event.
#[derive(Debug)]
pub struct EventView {
    /// The event.
    pub event: Event,
    /// The runs its deliveries started, with why each started.
    pub runs: Vec<(Run, RunCause)>,
}

/// Reads one event and the runs its deliveries started
/// (`EventStore::event_runs`, then each run).
pub async fn show(store: &impl OpsStore, id: EventId) -> Result<EventView> {
    let event = store.get_event(id).await.context("get_event")?;
    let mut runs = Vec::new();
    for cause in store.event_runs(id).await.context("event_runs")? {
        let run = store.get_run(cause.run).await.context("get_run")?;
        runs.push((run, cause));
    }
    Ok(EventView { event, runs })
}

fn render_show(view: &EventView, now: Timestamp) -> String {
    let event = &view.event;
    let mut out = format!("event {}\n", event.id);
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<12} {value}");
    };
    field("type", event.event_type.clone());
    field(
        "app/scope",
        format!("{} / {}", event.app_id, event.scope_id),
    );
    field("occurred", when(event.occurred_at, now));
    let standing = match (event.dead_lettered_at, event.dispatched_at) {
        (Some(at), _) => format!(
            "dead-lettered {} after {} attempt(s)",
            ago(at, now),
            event.attempts
        ),
        (None, _) if event.matched == 0 => "matched no activation: nothing to start".to_owned(),
        (None, Some(at)) => format!("dispatched {}", when(at, now)),
        (None, None) => format!(
            "waiting, {} attempt(s) so far, due {}",
            event.attempts,
            ago(event.dispatch_after, now)
        ),
    };
    field("state", standing);
    if let Some(error) = &event.last_error {
        field("last error", cut(error, 100));
    }
    if let Some(key) = &event.dedupe_key {
        field("dedupe key", cut(key, 80));
    }
    if let Some(workflow) = event.target_workflow {
        field("target", format!("workflow {workflow}"));
    }
    field("deliveries", format!("{} pinned", event.matched));
    field("data", json_cut(&event.data, 100));

    let _ = writeln!(out, "\nruns it started ({})", view.runs.len());
    if view.runs.is_empty() {
        out.push_str(if event.dispatched_at.is_none() && event.matched > 0 {
            "  none yet: its deliveries become runs when it is dispatched\n"
        } else {
            "  none\n"
        });
    } else {
        let mut table = Table::new(&["RUN", "WORKFLOW", "STATUS", "ACTIVATION", "CREATED"]);
        for (run, cause) in &view.runs {
            table.row(vec![
                run.id.to_string(),
                cut(&run.workflow, 32),
                run.status.to_string(),
                cause.activation.to_string(),
                utc(run.created_at),
            ]);
        }
        out.push_str(&table.render());
    }
    out
}

fn show_json(view: &EventView) -> Value {
    let runs: Vec<Value> = view
        .runs
        .iter()
        .map(|(run, cause)| json!({ "run": run, "cause": cause }))
        .collect();
    json!({ "event": view.event, "state": state(&view.event), "runs": runs })
}

/// Redrives one event, answering it with whether it was dead-lettered.
async fn redrive_one(store: &impl OpsStore, id: EventId) -> Result<(Event, bool)> {
    let event = store.get_event(id).await.context("get_event")?;
    let redriven = store.redrive(id).await.context("redrive")?;
    Ok((event, redriven))
}

/// Redrives every dead-lettered event of `event_type`, answering each with
/// whether this call put it back (another may have first).
async fn redrive_type(store: &impl OpsStore, event_type: &str) -> Result<Vec<(Event, bool)>> {
    let keep = |e: &Event| e.dead_lettered_at.is_some() && e.event_type == event_type;
    let dead = undispatched(store, &EventFilter::default(), keep, 0, u32::MAX).await?;
    let mut done = Vec::with_capacity(dead.events.len());
    for event in dead.events {
        let redriven = store.redrive(event.id).await.context("redrive")?;
        done.push((event, redriven));
    }
    Ok(done)
}

fn render_redrive(done: &[(Event, bool)]) -> String {
    if done.is_empty() {
        return "no dead-lettered event of that type: nothing to redrive\n".to_owned();
    }
    let mut out = String::new();
    for (event, redriven) in done {
        let _ = writeln!(
            out,
            "{} {} ({}){}",
            if *redriven { "redriven" } else { "skipped " },
            event.id,
            event.event_type,
            if *redriven {
                ": due now, attempts back to 0"
            } else {
                ": it was not dead-lettered"
            }
        );
    }
    let n = done.iter().filter(|(_, r)| *r).count();
    let _ = writeln!(out, "{n} of {} redriven", done.len());
    out
}

fn redrive_json(done: &[(Event, bool)]) -> Value {
    let events: Vec<Value> = done
        .iter()
        .map(
            |(e, redriven)| json!({ "id": e.id, "event_type": e.event_type, "redriven": redriven }),
        )
        .collect();
    json!({ "redriven": done.iter().filter(|(_, r)| *r).count(), "events": events })
}
