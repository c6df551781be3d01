//! The records an engine keeps beside its hot path (issue 30), written by
//! one store and read back by another opened afresh on the same database:
//! nothing of them lives only in the store that wrote it. The kit's cases
//! check each record's guards and round trips through one store; this
//! check drops that store first.

use std::time::Duration;

use flowstate_core::ports::{
    RunLeaseStore, RunStore, ScheduleStore, StepStore, VersionStore, VirtualUserRunStore,
};
use flowstate_core::schedule::Interval;
use flowstate_core::{
    BudgetLimit, InlineOutcome, InlineStep, NewRun, NewSchedule, NewStep, NewVirtualUserRun,
    NewWorkflowVersion, RunBudget, RunOutcome, RunStatus, RunTally, SchedulePatch, StopReason,
    Timestamp, VersionStatus,
};
use flowstate_store_diesel::{Dialect, StoreConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use super::db::TestDb;

/// Run outputs (set directly and by a lease holder's finish), the
/// workflow names, an inline step and its history row, a proposed and
/// accepted version's source and status, a schedule's goals, budget and
/// last start, and a virtual-user run's goals, seed, starter, tally,
/// memory, intents and stop reason: each read back equal from a store
/// opened after the writer was dropped.
pub async fn every_record_reads_back_from_a_fresh_store(dialect: Dialect) {
    let db = TestDb::migrated(dialect).await;
    let writer = db.store(StoreConfig::default().pool_size(2)).await;

    let output = json!({"total": 3, "items": [1, "two", null], "ünï": {"x": []}});
    let run = writer
        .create_run(NewRun::new("orders", json!({})))
        .await
        .unwrap()
        .record;
    let run = writer
        .set_run_status_with_output(run.id, RunStatus::Completed, &output)
        .await
        .unwrap();

    let leased = writer
        .create_run(NewRun::new("refunds", json!({})))
        .await
        .unwrap()
        .record;
    let lease = writer
        .claim_run("worker-a", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the one runnable run is leased");
    assert_eq!(lease.run.id, leased.id);
    writer
        .finish_with_output(
            leased.id,
            lease.token,
            RunOutcome::Completed,
            &json!(["shipped", 2]),
        )
        .await
        .unwrap();
    let leased = writer.get_run(leased.id).await.unwrap();
    assert_eq!(leased.output, Some(json!(["shipped", 2])));

    let inline = InlineStep::new(
        NewStep::new(run.id, "fetch", "f", json!({"in": 1})),
        InlineOutcome::Succeeded(json!({"ok": true})),
        Timestamp::from_millis(1_000),
        Timestamp::from_millis(1_250),
    );
    let other = writer
        .create_run(NewRun::new("orders", json!({})))
        .await
        .unwrap()
        .record;
    let inline = InlineStep {
        step: NewStep::new(other.id, "fetch", "f", json!({"in": 1})),
        ..inline
    };
    let step = writer.record_step(inline).await.unwrap().record;
    let history = writer.step_history(other.id).await.unwrap();
    assert_eq!(history.len(), 1);

    let source = "workflow(\"orders\", (step) => step(\"reserve\")) // ünïcode";
    let version = NewWorkflowVersion {
        workflow: "orders".to_owned(),
        graph_hash: "h1".to_owned(),
        graph: json!({"nodes": ["reserve"]}),
    };
    let draft = writer
        .propose_version(version, Some(source))
        .await
        .unwrap()
        .record;
    let accepted = writer
        .set_version_status(draft.id, VersionStatus::Active)
        .await
        .unwrap();
    assert_eq!(accepted.source.as_deref(), Some(source));

    let hourly = Interval {
        min_ms: 3_600_000,
        max_ms: 3_600_000,
    };
    let at = Timestamp::from_millis(1_700_000_000_000);
    writer
        .upsert_schedule(NewSchedule::new(
            "ana",
            hourly,
            at,
            &mut StdRng::seed_from_u64(1),
        ))
        .await
        .unwrap();
    let budget = RunBudget {
        max_duration: Some(Duration::from_millis(90_500)),
        max_turns: Some(40),
        max_spend: Some(2_500_000),
    };
    let schedule = writer
        .update_schedule(
            "ana",
            &SchedulePatch::default()
                .with_goals(["sign up", "ask for a refund ✓"])
                .with_budget(budget),
        )
        .await
        .unwrap();

    let started = NewVirtualUserRun::for_schedule(&schedule)
        .with_seed(u64::MAX - 6)
        .with_started_by("Maria Q.");
    let vu = writer.start_virtual_user_run_with(&started).await.unwrap();
    let tally = writer
        .add_to_tally(
            vu.id,
            RunTally {
                turns: 3,
                tokens: 12_000,
                cost: 4_500,
            },
        )
        .await
        .unwrap();
    writer
        .set_memory(vu.id, &json!({"cart": ["plan-s"], "mood": "curious"}))
        .await
        .unwrap();
    writer
        .set_intents(vu.id, &["open the billing page".to_owned()])
        .await
        .unwrap();
    let stop = StopReason::BudgetExhausted {
        which: BudgetLimit::Turns,
    };
    writer
        .complete_virtual_user_run_with_reason(vu.id, &json!({"found": []}), stop)
        .await
        .unwrap();
    let vu = writer.get_virtual_user_run(vu.id).await.unwrap();
    assert_eq!(vu.tally, tally);
    drop(writer);

    let reader = db.store(StoreConfig::default().pool_size(2)).await;
    assert_eq!(reader.get_run(run.id).await.unwrap(), run);
    assert_eq!(reader.get_run(run.id).await.unwrap().output, Some(output));
    assert_eq!(reader.get_run(leased.id).await.unwrap(), leased);
    assert_eq!(
        reader.list_workflow_names().await.unwrap(),
        vec!["orders".to_owned(), "refunds".to_owned()]
    );
    assert_eq!(reader.get_step(step.id).await.unwrap(), step);
    assert_eq!(reader.step_history(other.id).await.unwrap(), history);
    assert_eq!(
        reader.get_version("orders", "h1").await.unwrap(),
        Some(accepted)
    );
    assert_eq!(
        reader.get_schedule("ana").await.unwrap(),
        Some(schedule.clone())
    );
    assert_eq!((schedule.budget, schedule.goals.len()), (budget, 2));
    let read = reader.get_virtual_user_run(vu.id).await.unwrap();
    assert_eq!(read, vu);
    assert_eq!(
        (
            read.seed,
            read.started_by.as_deref(),
            read.goals.len(),
            read.intents.len(),
            read.stop_reason,
        ),
        (Some(u64::MAX - 6), Some("Maria Q."), 2, 1, Some(stop))
    );
    assert_eq!(
        read.memory,
        Some(json!({"cart": ["plan-s"], "mood": "curious"}))
    );
    db.drop_database().await;
}
