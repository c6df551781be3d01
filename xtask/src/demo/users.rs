//! Virtual users: three personas on schedules, ticked by the `Runner`.
//! `shopper` finishes at once; `browser` takes longer than a tick, so the
//! tick that finds it still running skips it; `ghost` has a run left
//! running by a process that died before the demo started, so the first
//! ticks skip it as in flight and a later one reaps it as stale and
//! dispatches the persona again. The schedules are disabled when the demo
//! stops, so a later demo's runner never ticks them.
//!
//! Leans on `flowstate-virtual-users`' `tick` (the in-flight skip, the
//! stale-run reaping, the compare-and-set claim of `next_run_at`) over
//! `ScheduleStore` and `VirtualUserRunStore`; what it did is read back from
//! the store, not from the runner's counters.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::Interval;
use flowstate_core::{Clock, NewSchedule, SystemClock, VirtualUserRunQuery, VirtualUserRunStatus};
use flowstate_store_diesel::DieselStore;
use flowstate_virtual_users::{Runner, RunnerHandle, RunnerReport, TickOptions};
use rand::SeedableRng;
use serde_json::json;
use tokio::task::JoinSet;

/// How often the runner ticks.
pub const TICK: Duration = Duration::from_millis(300);
/// How long the browser persona's runs take: longer than a tick.
const BROWSE: Duration = Duration::from_millis(700);
/// How long the personas run: a few ticks, long enough for the ghost's
/// stale run to be reaped. The demo stops them then, however long the
/// orders take.
pub const RUNS_FOR: Duration = Duration::from_millis(2_500);
/// A run running this long is stale and reaped.
const STALE: Duration = Duration::from_secs(1);

/// The personas of session `session`.
pub fn personas(session: &str) -> [String; 3] {
    ["shopper", "browser", "ghost"].map(|p| format!("{session}-{p}"))
}

/// The running personas: the runner and the runs it started.
pub struct Users {
    runner: RunnerHandle,
    acting: Arc<tokio::sync::Mutex<JoinSet<()>>>,
    store: Arc<DieselStore>,
    session: String,
}

/// Writes the schedules and starts the runner.
pub async fn start(store: DieselStore, session: &str) -> Result<Users> {
    let store = Arc::new(store);
    let now = SystemClock.now();
    for persona in personas(session) {
        store
            .upsert_schedule(NewSchedule {
                persona,
                enabled: true,
                interval: Interval {
                    min_ms: 250,
                    max_ms: 250,
                },
                next_run_at: now,
            })
            .await
            .context("writing a schedule")?;
    }
    // The ghost's run from before: nothing will ever settle it but the
    // reaper.
    let [_, _, ghost] = personas(session);
    store
        .start_virtual_user_run(&ghost)
        .await
        .context("stranding the ghost's run")?;
    let acting = Arc::new(tokio::sync::Mutex::new(JoinSet::new()));
    let dispatch = {
        let (store, acting) = (Arc::clone(&store), Arc::clone(&acting));
        move |schedule: flowstate_core::Schedule| {
            let (store, acting) = (Arc::clone(&store), Arc::clone(&acting));
            async move {
                let run = store.start_virtual_user_run(&schedule.persona).await?;
                let persona = schedule.persona;
                let took = if persona.ends_with("-browser") {
                    BROWSE
                } else {
                    Duration::from_millis(20)
                };
                acting.lock().await.spawn(async move {
                    tokio::time::sleep(took).await;
                    let entry = json!({ "persona": persona, "did": "looked around" });
                    let _ = store.append_transcript(run.id, &[entry]).await;
                    let _ = store
                        .complete_virtual_user_run(run.id, &json!({ "ok": true }))
                        .await;
                });
                Ok::<_, flowstate_core::Error>(run.id)
            }
        }
    };
    let schedules = Arc::clone(&store);
    let runner = Runner::new(
        store,
        dispatch,
        Arc::new(SystemClock),
        rand::rngs::StdRng::seed_from_u64(29),
    )
    .with_interval(TICK)
    .with_options(TickOptions {
        stale_after: STALE,
        limit: 10,
    })
    .spawn();
    Ok(Users {
        runner,
        acting,
        store: schedules,
        session: session.to_owned(),
    })
}

impl Users {
    /// Stops the runner, waits for the runs it started to finish, and
    /// disables the session's schedules.
    pub async fn stop(self) -> Result<RunnerReport> {
        let report = self.runner.shutdown().await;
        let mut acting = self.acting.lock().await;
        while acting.join_next().await.is_some() {}
        for persona in personas(&self.session) {
            self.store
                .upsert_schedule(NewSchedule {
                    persona,
                    enabled: false,
                    interval: Interval::default(),
                    next_run_at: SystemClock.now(),
                })
                .await
                .context("disabling a schedule")?;
        }
        Ok(report)
    }
}

/// What the store says the personas did.
#[derive(Debug, Default)]
pub struct Personas {
    /// Runs per persona, in order: shopper, browser, ghost.
    pub runs: [usize; 3],
    /// Runs failed by the reaper.
    pub reaped: usize,
    /// Runs still running (must be 0 once stopped).
    pub running: usize,
    /// Two runs of one persona running at once (must be 0).
    pub overlaps: usize,
}

/// Reads the personas' runs back.
pub async fn read_back(store: &DieselStore, session: &str) -> Result<Personas> {
    let mut seen = Personas::default();
    for (i, persona) in personas(session).iter().enumerate() {
        let mut runs = store
            .list_virtual_user_runs(&VirtualUserRunQuery::persona(persona.as_str(), 1_000))
            .await
            .context("reading virtual-user runs")?;
        runs.sort_by_key(|r| r.created_at);
        seen.runs[i] = runs.len();
        for run in &runs {
            match run.status {
                VirtualUserRunStatus::Running => seen.running += 1,
                VirtualUserRunStatus::Failed
                    if run
                        .failure
                        .as_deref()
                        .is_some_and(|f| f.starts_with("abandoned")) =>
                {
                    seen.reaped += 1;
                }
                _ => {}
            }
        }
        seen.overlaps += runs
            .windows(2)
            .filter(|pair| pair[1].created_at < pair[0].updated_at)
            .count();
    }
    Ok(seen)
}
