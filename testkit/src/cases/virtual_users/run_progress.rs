//! Cases for what a virtual-user run records as it goes: its
//! [`RunTally`] ([`VirtualUserRunStore::add_to_tally`]), its memory and
//! intents ([`VirtualUserRunStore::set_memory`],
//! [`VirtualUserRunStore::set_intents`]). Each is written only while the
//! run is running: a settled run refuses with
//! [`Error::VirtualUserRunSettled`] and an unknown one is
//! [`Error::VirtualUserRunNotFound`], as for an append.

use std::time::Duration;

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::VirtualUserRunStore;
use flowstate_core::{
    Clock, Error, InputLimits, NewVirtualUserRun, RunTally, VirtualUserRunId, VirtualUserRunQuery,
    VirtualUserRunStatus,
};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::{assert_err, race};

/// Adds raise the tally in place and answer it; a settled run refuses, an
/// unknown one is not found, an add past `i64::MAX` is refused, and none of
/// them changes the tally.
pub async fn tally_adds_in_place_while_running<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let run = store.start_virtual_user_run("ana").await.unwrap();
    let first = RunTally::turns(1).with_tokens(1_200).with_cost(3_500);
    h.clock().advance(Duration::from_secs(1));
    assert_eq!(store.add_to_tally(run.id, first).await.unwrap(), first);
    let second = RunTally::turns(2).with_tokens(800);
    let both = RunTally {
        turns: 3,
        tokens: 2_000,
        cost: 3_500,
    };
    assert_eq!(store.add_to_tally(run.id, second).await.unwrap(), both);
    assert_eq!(
        store.add_to_tally(run.id, RunTally::ZERO).await.unwrap(),
        both
    );
    let read = store.get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(read.tally, both);
    assert_eq!(read.updated_at, h.clock().now());

    let max = i64::MAX as u64;
    assert_err!(
        store
            .add_to_tally(run.id, RunTally::ZERO.with_cost(max - 3_499))
            .await,
        Error::InvalidInput(InvalidInput::OutOfRange { field: "tally", .. })
    );
    assert_err!(
        store.add_to_tally(run.id, RunTally::turns(max + 1)).await,
        Error::InvalidInput(InvalidInput::OutOfRange { field: "tally", .. })
    );
    let to_the_top = RunTally::ZERO.with_cost(max - 3_500);
    let top = store.add_to_tally(run.id, to_the_top).await.unwrap();
    assert_eq!(top.cost, max);

    store
        .complete_virtual_user_run(run.id, &json!({}))
        .await
        .unwrap();
    let settled = store.get_virtual_user_run(run.id).await.unwrap();
    assert_err!(
        store.add_to_tally(run.id, RunTally::turns(1)).await,
        Error::VirtualUserRunSettled { run: r, status: VirtualUserRunStatus::Completed } if r == run.id
    );
    assert_eq!(store.get_virtual_user_run(run.id).await.unwrap(), settled);
    let unknown = VirtualUserRunId::generate();
    assert_err!(
        store.add_to_tally(unknown, RunTally::turns(1)).await,
        Error::VirtualUserRunNotFound(id) if id == unknown
    );
}

/// Of 8 concurrent adds to one run's tally none is lost: the tally is
/// their sum.
pub async fn tally_add_race_8<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let run = h.store().start_virtual_user_run("ana").await.unwrap().id;
    let outcomes = race(h.store(), 8, move |store, i| async move {
        let i = i as u64;
        store
            .add_to_tally(run, RunTally::turns(1).with_tokens(i).with_cost(100))
            .await
    })
    .await;
    let mut answered = Vec::new();
    for outcome in outcomes {
        answered.push(outcome.unwrap().turns);
    }
    answered.sort_unstable();
    assert_eq!(
        answered,
        (1..=8).collect::<Vec<u64>>(),
        "each add saw its own"
    );
    let tally = h.store().get_virtual_user_run(run).await.unwrap().tally;
    assert_eq!(
        tally,
        RunTally {
            turns: 8,
            tokens: 28,
            cost: 800
        }
    );
}

/// Memory and intents are overwritten, not merged, and read back exactly;
/// an empty list clears the intents; a settled run refuses both and keeps
/// what it had; an unknown run is not found.
pub async fn memory_and_intents_are_overwritten_while_running<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let run = store.start_virtual_user_run("ana").await.unwrap();
    let first = json!({"cart": ["tea"], "mood": "curious", "visits": 1});
    store.set_memory(run.id, &first).await.unwrap();
    let second = json!({"cart": [], "notes": {"refund": "asked ✓"}, "n": null});
    store.set_memory(run.id, &second).await.unwrap();
    store
        .set_intents(run.id, &["open the cart".into(), "pay".into()])
        .await
        .unwrap();
    let read = store.get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(read.memory, Some(second.clone()));
    assert_eq!(read.intents, ["open the cart", "pay"]);

    store.set_intents(run.id, &["leave".into()]).await.unwrap();
    assert_eq!(
        store.get_virtual_user_run(run.id).await.unwrap().intents,
        ["leave"]
    );
    store.set_intents(run.id, &[]).await.unwrap();
    store.set_memory(run.id, &json!("just text")).await.unwrap();
    let read = store.get_virtual_user_run(run.id).await.unwrap();
    assert_eq!(
        (read.intents.len(), read.memory),
        (0, Some(json!("just text")))
    );

    store.set_intents(run.id, &["wait".into()]).await.unwrap();
    store
        .fail_virtual_user_run(run.id, "gave up")
        .await
        .unwrap();
    let settled = store.get_virtual_user_run(run.id).await.unwrap();
    assert_err!(
        store.set_memory(run.id, &json!({})).await,
        Error::VirtualUserRunSettled {
            status: VirtualUserRunStatus::Failed,
            ..
        }
    );
    assert_err!(
        store.set_intents(run.id, &["again".into()]).await,
        Error::VirtualUserRunSettled {
            status: VirtualUserRunStatus::Failed,
            ..
        }
    );
    assert_eq!(store.get_virtual_user_run(run.id).await.unwrap(), settled);
    assert_eq!(settled.intents, ["wait"]);

    let unknown = VirtualUserRunId::generate();
    assert_err!(
        store.set_memory(unknown, &json!({})).await,
        Error::VirtualUserRunNotFound(id) if id == unknown
    );
    assert_err!(
        store.set_intents(unknown, &[]).await,
        Error::VirtualUserRunNotFound(id) if id == unknown
    );
}

/// `depth` arrays, each holding the next.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(0), |inner, _| json!([inner]))
}

/// Memory too large or too deep, bad intents (a NUL, an empty one, too
/// many) and a bad start (an empty starter, a goal with a NUL, too many
/// goals) are refused with typed errors before anything is written: the
/// memory and intents stored before are still there.
pub async fn bad_run_records_are_refused<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let run = store.start_virtual_user_run("ana").await.unwrap();
    store
        .set_memory(run.id, &json!({"kept": true}))
        .await
        .unwrap();
    store.set_intents(run.id, &["kept".into()]).await.unwrap();
    let before = store.get_virtual_user_run(run.id).await.unwrap();

    let huge = json!({"blob": "x".repeat(1024 * 1024)});
    let deeper = InputLimits::default().max_json_depth + 1;
    assert_err!(
        store.set_memory(run.id, &huge).await,
        Error::InvalidInput(InvalidInput::TooLarge {
            field: "memory",
            ..
        })
    );
    assert_err!(
        store.set_memory(run.id, &nested(deeper)).await,
        Error::InvalidInput(InvalidInput::TooDeep {
            field: "memory",
            ..
        })
    );
    for intents in [
        vec!["a\0b".to_owned()],
        vec![String::new()],
        vec!["i".to_owned(); 101],
    ] {
        assert_err!(
            store.set_intents(run.id, &intents).await,
            Error::InvalidInput(_)
        );
    }
    assert_eq!(
        store.get_virtual_user_run(run.id).await.unwrap(),
        before,
        "nothing was written"
    );

    for new in [
        NewVirtualUserRun::new("ana").with_started_by(""),
        NewVirtualUserRun::new("ana").with_started_by("a\0b"),
        NewVirtualUserRun::new("ana").with_goals(["a\0b"]),
        NewVirtualUserRun::new("ana").with_goals(vec!["g"; 101]),
        NewVirtualUserRun::new("").with_seed(1),
    ] {
        assert_err!(
            store.start_virtual_user_run_with(&new).await,
            Error::InvalidInput(_)
        );
    }
    let listed = store
        .list_virtual_user_runs(&VirtualUserRunQuery::default())
        .await
        .unwrap();
    assert_eq!(listed, vec![before], "no run was started");
}
