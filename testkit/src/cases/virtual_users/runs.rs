//! Cases for the run half of [`VirtualUserRunStore`]: runs started, listed
//! newest first and settled once.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::{ScheduleStore, VirtualUserRunStore};
use flowstate_core::{
    Clock, Error, NewSchedule, VirtualUserRunId, VirtualUserRunQuery, VirtualUserRunStatus,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use crate::Harness;
use crate::cases::support::{assert_err, race};
use crate::cases::virtual_users::schedules::HOURLY;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A started run is running, stamped now, with no transcript; an unknown id is `VirtualUserRunNotFound`.
pub async fn start_and_get_virtual_user_run<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let now = h.clock().now();
    let run = h.store().start_virtual_user_run("alice").await.unwrap();
    assert_eq!(
        (run.persona.as_str(), run.status, run.transcript_len),
        ("alice", VirtualUserRunStatus::Running, 0)
    );
    assert_eq!((run.findings.clone(), run.failure.clone()), (None, None));
    assert_eq!((run.created_at, run.updated_at), (now, now));
    assert_eq!(h.store().get_virtual_user_run(run.id).await.unwrap(), run);
    let unknown = VirtualUserRunId::generate();
    assert_err!(
        h.store().get_virtual_user_run(unknown).await,
        Error::VirtualUserRunNotFound(id) if id == unknown
    );
}

/// Runs list newest first by `(created_at, id)`, per persona, per status or both, cut at the limit.
pub async fn list_virtual_user_runs_newest_first<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let mut alice = Vec::new();
    for _ in 0..3 {
        alice.push(store.start_virtual_user_run("alice").await.unwrap().id);
        h.clock().advance(secs(1));
    }
    let bob = store.start_virtual_user_run("bob").await.unwrap().id;
    // Same microsecond: the id breaks the tie, newest first.
    let tied = store.start_virtual_user_run("alice").await.unwrap().id;
    store
        .complete_virtual_user_run(alice[1], &json!({}))
        .await
        .unwrap();

    let ids = |runs: Vec<flowstate_core::VirtualUserRun>| {
        runs.into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    let list = |q: VirtualUserRunQuery| async move {
        ids(store.list_virtual_user_runs(&q).await.unwrap())
    };
    assert_eq!(
        list(VirtualUserRunQuery::persona("alice", 0)).await,
        [tied, alice[2], alice[1], alice[0]]
    );
    assert_eq!(
        list(VirtualUserRunQuery::persona("alice", 2)).await,
        [tied, alice[2]]
    );
    assert_eq!(
        list(VirtualUserRunQuery::persona("carol", 0)).await,
        Vec::<VirtualUserRunId>::new()
    );
    let running = |persona: Option<&str>| VirtualUserRunQuery {
        persona: persona.map(str::to_owned),
        status: Some(VirtualUserRunStatus::Running),
        limit: 0,
    };
    assert_eq!(
        list(running(Some("alice"))).await,
        [tied, alice[2], alice[0]]
    );
    assert_eq!(list(running(None)).await, [tied, bob, alice[2], alice[0]]);
    let completed = VirtualUserRunQuery {
        status: Some(VirtualUserRunStatus::Completed),
        ..VirtualUserRunQuery::default()
    };
    assert_eq!(list(completed).await, [alice[1]]);
}

/// Complete and fail settle a running run once; a settled run refuses both (`VirtualUserRunSettled`) and is left as it was.
pub async fn complete_and_fail_are_status_guarded<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let done = store.start_virtual_user_run("alice").await.unwrap();
    let later = h.clock().advance(secs(30));
    let findings = json!({"broken": ["checkout"], "score": 0, "ok": false});
    store
        .complete_virtual_user_run(done.id, &findings)
        .await
        .unwrap();
    let read = store.get_virtual_user_run(done.id).await.unwrap();
    assert_eq!(
        (read.status, read.findings.clone(), read.failure.clone()),
        (VirtualUserRunStatus::Completed, Some(findings), None)
    );
    assert_eq!((read.created_at, read.updated_at), (done.created_at, later));
    let settled = |status| move |e: &Error| matches!(e, Error::VirtualUserRunSettled { run, status: s } if *run == done.id && *s == status);
    let again = store.complete_virtual_user_run(done.id, &json!(1)).await;
    assert!(
        again
            .as_ref()
            .is_err_and(settled(VirtualUserRunStatus::Completed)),
        "{again:?}"
    );
    let fail = store.fail_virtual_user_run(done.id, "late").await;
    assert!(
        fail.as_ref()
            .is_err_and(settled(VirtualUserRunStatus::Completed)),
        "{fail:?}"
    );
    assert_eq!(store.get_virtual_user_run(done.id).await.unwrap(), read);

    let failed = store.start_virtual_user_run("alice").await.unwrap();
    store
        .fail_virtual_user_run(failed.id, "the model timed out")
        .await
        .unwrap();
    let read = store.get_virtual_user_run(failed.id).await.unwrap();
    assert_eq!(
        (read.status, read.failure.as_deref(), read.findings),
        (
            VirtualUserRunStatus::Failed,
            Some("the model timed out"),
            None
        )
    );
    assert_err!(
        store.complete_virtual_user_run(failed.id, &json!({})).await,
        Error::VirtualUserRunSettled {
            status: VirtualUserRunStatus::Failed,
            ..
        }
    );
    let unknown = VirtualUserRunId::generate();
    assert_err!(store.fail_virtual_user_run(unknown, "x").await, Error::VirtualUserRunNotFound(id) if id == unknown);
    assert_err!(
        store.complete_virtual_user_run(unknown, &json!({})).await,
        Error::VirtualUserRunNotFound(_)
    );
}

/// Of 8 concurrent completes and fails of one run, exactly one lands and the rest are `VirtualUserRunSettled`.
pub async fn settle_race_8<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let run = h.store().start_virtual_user_run("alice").await.unwrap().id;
    let outcomes = race(h.store(), 8, move |store, i| async move {
        if i % 2 == 0 {
            store
                .complete_virtual_user_run(run, &json!({"by": i}))
                .await
        } else {
            store.fail_virtual_user_run(run, &format!("by {i}")).await
        }
    })
    .await;
    let landed: Vec<usize> = (0..8).filter(|i| outcomes[*i].is_ok()).collect();
    assert_eq!(landed.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        assert!(
            matches!(outcome, Ok(()) | Err(Error::VirtualUserRunSettled { .. })),
            "{outcome:?}"
        );
    }
    let read = h.store().get_virtual_user_run(run).await.unwrap();
    let i = landed[0];
    if i % 2 == 0 {
        assert_eq!(read.findings, Some(json!({"by": i})));
    } else {
        assert_eq!(read.failure, Some(format!("by {i}")));
    }
}

/// Empty or NUL personas and reasons, oversized findings and bad transcript chunks are refused before anything is written.
pub async fn bad_virtual_user_input_is_refused<H: Harness>(h: &H)
where
    H::Store: ScheduleStore + VirtualUserRunStore,
{
    let store = h.store();
    let now = h.clock().now();
    let empty = NewSchedule::new("", HOURLY, now, &mut StdRng::seed_from_u64(0));
    assert_err!(
        store.upsert_schedule(empty).await,
        Error::InvalidInput(InvalidInput::Empty { field: "persona" })
    );
    assert_err!(
        store.get_schedule("a\0b").await,
        Error::InvalidInput(InvalidInput::NulCharacter { field: "persona" })
    );
    assert_err!(
        store.start_virtual_user_run("").await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    let run = store.start_virtual_user_run("alice").await.unwrap();
    assert_err!(
        store.fail_virtual_user_run(run.id, "").await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    assert_err!(
        store.fail_virtual_user_run(run.id, "a\0b").await,
        Error::InvalidInput(InvalidInput::NulCharacter { .. })
    );
    let huge = json!("x".repeat(1024 * 1024));
    assert_err!(
        store.complete_virtual_user_run(run.id, &huge).await,
        Error::InvalidInput(InvalidInput::TooLarge { .. })
    );
    assert_err!(
        store.append_transcript(run.id, &[]).await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    assert_err!(
        store
            .append_transcript(run.id, &[json!({"k\u{0}": 1})])
            .await,
        Error::InvalidInput(InvalidInput::NulCharacter { .. })
    );
    assert_eq!(
        store.get_virtual_user_run(run.id).await.unwrap(),
        run,
        "nothing was written"
    );
    assert_eq!(store.get_schedule("alice").await.unwrap(), None);
}
