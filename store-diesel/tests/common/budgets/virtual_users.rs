//! The statement budgets of the virtual-user ports, checked like
//! [`super`]: the one [`table`](super::table) lists, per operation, the first word of
//! every statement it sends, and [`every_operation_sends_its_budget`] runs one scenario through a
//! logged store and compares exactly. `claim` and `due` are the two a tick
//! pays per persona and per call; every other operation is listed too.

use std::sync::Arc;

use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::schedule::Interval;
use flowstate_core::{
    NewSchedule, NewVirtualUserRun, RunTally, SchedulePatch, StopReason, Timestamp,
    VirtualUserRunId, VirtualUserRunQuery,
};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog};
use serde_json::json;

use super::{Sent, check_scenario, recorder, table};

/// Runs the scenario on a fresh `dialect` database and asserts that every
/// operation sent exactly what `table` lists, and that the table lists only
/// operations the scenario runs.
pub async fn every_operation_sends_its_budget(dialect: Dialect) {
    check_scenario(
        dialect,
        "virtual-user",
        &table::VIRTUAL_USERS.rows(dialect),
        scenario,
    )
    .await;
}

/// Every virtual-user operation, each captured on its own, won and lost.
async fn scenario(store: &DieselStore, log: &Arc<StatementLog>) -> Sent {
    let mut sent = Vec::new();
    recorder!($, sent, log);
    let now = Timestamp::from_millis(1_000_000);
    let interval = Interval {
        min_ms: 1_000,
        max_ms: 2_000,
    };
    let schedule = NewSchedule {
        persona: "alice".into(),
        enabled: true,
        interval,
        next_run_at: now,
    };
    capture!("upsert_schedule", store.upsert_schedule(schedule.clone()));
    capture!("upsert_schedule again", store.upsert_schedule(schedule));
    capture!("get_schedule", store.get_schedule("alice"));
    let patch = SchedulePatch::enabled(true).with_goals(["explore"]);
    capture!("update_schedule", store.update_schedule("alice", &patch));
    capture!("list_schedules", store.list_schedules(10));
    let due = capture!("due", store.due_schedules(now, 10));
    assert_eq!(due.len(), 1);
    let next = now.plus(std::time::Duration::from_secs(1));
    assert!(capture!(
        "claim won",
        store.claim_schedule("alice", now, next, None)
    ));
    assert!(!capture!(
        "claim lost",
        store.claim_schedule("alice", now, next, None)
    ));
    let run = capture!(
        "start_virtual_user_run",
        store.start_virtual_user_run("alice")
    );
    let recorded = store.claim_schedule("alice", next, next, Some(run.id));
    assert!(capture!("claim records the run", recorded));
    capture!("get_virtual_user_run", store.get_virtual_user_run(run.id));
    let latest = VirtualUserRunQuery::persona("alice", 1);
    capture!(
        "list_virtual_user_runs latest",
        store.list_virtual_user_runs(&latest)
    );
    let entries = [json!({"turn": 0}), json!({"turn": 1}), json!({"turn": 2})];
    let len = capture!(
        "append_transcript",
        store.append_transcript(run.id, &entries)
    );
    assert_eq!(len, 3);
    capture!("read_transcript", store.read_transcript(run.id, 1, 10));
    refused!(
        "read_transcript unknown run",
        store.read_transcript(VirtualUserRunId::generate(), 0, 10)
    );
    capture!(
        "complete_virtual_user_run",
        store.complete_virtual_user_run(run.id, &json!({"ok": true}))
    );
    refused!(
        "fail_virtual_user_run settled",
        store.fail_virtual_user_run(run.id, "late")
    );
    refused!(
        "append_transcript settled",
        store.append_transcript(run.id, &entries)
    );
    let other = store.start_virtual_user_run("alice").await.expect("start");
    capture!(
        "fail_virtual_user_run",
        store.fail_virtual_user_run(other.id, "reaped")
    );
    let new = NewVirtualUserRun::new("alice")
        .with_goals(["explore"])
        .with_seed(7)
        .with_started_by("schedule");
    let third = capture!(
        "start_virtual_user_run_with",
        store.start_virtual_user_run_with(&new)
    );
    let tally = capture!(
        "add_to_tally",
        store.add_to_tally(third.id, RunTally::turns(1).with_tokens(10))
    );
    assert_eq!(tally.tokens, 10);
    capture!(
        "set_memory",
        store.set_memory(third.id, &json!({"cart": []}))
    );
    capture!(
        "set_intents",
        store.set_intents(third.id, &["pay".to_owned()])
    );
    capture!(
        "complete_virtual_user_run_with_reason",
        store.complete_virtual_user_run_with_reason(third.id, &json!({}), StopReason::GoalsMet)
    );
    refused!(
        "add_to_tally settled",
        store.add_to_tally(third.id, RunTally::turns(1))
    );
    refused!("set_memory settled", store.set_memory(third.id, &json!({})));
    sent
}
