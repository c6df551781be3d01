//! Tick a schedule: three personas, each due every one to two minutes,
//! and a tick every 45 s of (simulated) time. A persona whose last run is
//! still going is skipped, never doubled up, and goes on once it ends.
//!
//! On testkit's `MemoryStore` with its `ManualClock`, so minutes pass at
//! once; any store with the virtual-user ports takes its place unchanged,
//! and a host that wants a loop spawns a `Runner` instead of calling `tick`.
//!
//! `cargo run -p flowstate-virtual-users --example tick`

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::Clock as _;
use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::Interval;
use flowstate_core::{NewSchedule, NewVirtualUserRun, Schedule, VirtualUserRunQuery};
use flowstate_testkit::{ManualClock, MemoryStore};
use flowstate_virtual_users::{TickOptions, tick};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

#[tokio::main]
async fn main() -> flowstate_core::Result<()> {
    let clock = Arc::new(ManualClock::new());
    let store = MemoryStore::with_clock(clock.clone());
    let mut rng = StdRng::seed_from_u64(7);
    let every = Interval {
        min_ms: 60_000,
        max_ms: 120_000,
    };
    for persona in ["shopper", "admin", "slow-reader"] {
        let mut schedule = NewSchedule::new(persona, every, clock.now(), &mut rng);
        schedule.next_run_at = clock.now(); // due at once
        store.upsert_schedule(schedule).await?;
    }

    let mut slow = None;
    for minute in 0..8 {
        // The host's dispatch: start the persona's run (here, in the store),
        // with the schedule's goals, started by `schedule`.
        let dispatch = |schedule: Schedule| {
            let store = &store;
            async move {
                let new = NewVirtualUserRun::for_schedule(&schedule);
                let run = store.start_virtual_user_run_with(&new).await?;
                Ok::<_, flowstate_core::Error>(run.id)
            }
        };
        let now = clock.now();
        let outcome = tick(&store, dispatch, now, &mut rng, TickOptions::default()).await?;
        let started: Vec<&str> = outcome
            .dispatched
            .iter()
            .map(|d| d.persona.as_str())
            .collect();
        let skipped: Vec<String> = outcome
            .skipped
            .iter()
            .map(|s| format!("{} ({:?})", s.persona, s.reason))
            .collect();
        println!(
            "t+{:>4}s  started {started:?}  skipped {skipped:?}",
            minute * 45
        );

        // Runs finish at once, except the slow reader's, which takes minutes.
        for dispatched in &outcome.dispatched {
            if dispatched.persona == "slow-reader" {
                slow = Some(dispatched.run);
            } else {
                store
                    .complete_virtual_user_run(dispatched.run, &json!({}))
                    .await?;
            }
        }
        if minute == 5 {
            if let Some(run) = slow.take() {
                store
                    .complete_virtual_user_run(run, &json!({ "read": 40 }))
                    .await?;
            }
        }
        clock.advance(Duration::from_secs(45));
    }
    for persona in ["shopper", "admin", "slow-reader"] {
        let query = VirtualUserRunQuery::persona(persona, 100);
        let runs = store.list_virtual_user_runs(&query).await?;
        println!("{persona:<12} {} runs, never two at once", runs.len());
    }
    Ok(())
}
