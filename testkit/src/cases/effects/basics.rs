//! [`EffectJournal`]: an effect begins once however many begins race, a
//! replayed step reads the recorded outcome instead of performing it
//! again, and effects never settled are listed as stranded.

use std::time::Duration;

use flowstate_core::ports::EffectJournal;
use flowstate_core::{EffectBegin, Error, RunId, StrandedEffect};
use serde_json::json;

use crate::LeaseHarness;
use crate::cases::support::{assert_err, new_run, race};

/// The first begin starts the effect, a second finds it in flight; once
/// settled, a replay reads the outcome, and settling again keeps it.
pub async fn begin_starts_once_and_a_replay_reads_the_outcome<H: LeaseHarness>(h: &H)
where
    H::Store: EffectJournal,
{
    let run = new_run(h).await;
    let store = h.store();
    assert_eq!(
        store.begin_effect(run.id, "charge").await.unwrap(),
        EffectBegin::Started
    );
    assert_eq!(
        store.begin_effect(run.id, "charge").await.unwrap(),
        EffectBegin::InFlight {
            began_at: flowstate_core::Clock::now(h.clock())
        }
    );
    store
        .settle_effect(run.id, "charge", &json!({"charge": "ch_1"}))
        .await
        .unwrap();
    store
        .settle_effect(run.id, "charge", &json!({"charge": "ch_2"}))
        .await
        .unwrap();
    assert_eq!(
        store.begin_effect(run.id, "charge").await.unwrap(),
        EffectBegin::Settled(json!({"charge": "ch_1"})),
        "a replayed step would charge twice"
    );
    // Keys are per run.
    let other = new_run(h).await;
    assert_eq!(
        store.begin_effect(other.id, "charge").await.unwrap(),
        EffectBegin::Started
    );
}

/// Of 32 concurrent begins of one key, exactly one starts the effect.
pub async fn begin_effect_race_32<H: LeaseHarness>(h: &H)
where
    H::Store: EffectJournal,
{
    let run = new_run(h).await.id;
    let answers = race(h.store(), 32, |store, _| async move {
        store
            .begin_effect(run, "email")
            .await
            .expect("a racing begin is not an error")
    })
    .await;
    let started = answers
        .iter()
        .filter(|a| **a == EffectBegin::Started)
        .count();
    assert_eq!(started, 1, "{started} of 32 begins started the effect");
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, EffectBegin::Started | EffectBegin::InFlight { .. }))
    );
}

/// Effects begun long enough ago and never settled are stranded; settled
/// and recent ones are not.
pub async fn stranded_effects_are_old_and_unsettled<H: LeaseHarness>(h: &H)
where
    H::Store: EffectJournal,
{
    let run = new_run(h).await;
    let store = h.store();
    let began = flowstate_core::Clock::now(h.clock());
    store.begin_effect(run.id, "a").await.unwrap();
    store.begin_effect(run.id, "b").await.unwrap();
    store
        .settle_effect(run.id, "b", &json!(null))
        .await
        .unwrap();
    h.clock().advance(Duration::from_secs(3600));
    store.begin_effect(run.id, "c").await.unwrap();
    let stranded = store
        .stranded_effects(Duration::from_secs(1800))
        .await
        .unwrap();
    assert_eq!(
        stranded,
        [StrandedEffect {
            run: run.id,
            key: "a".into(),
            began_at: began
        }]
    );
    let all = store.stranded_effects(Duration::ZERO).await.unwrap();
    let keys: Vec<&str> = all.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["a", "c"]);
}

/// Settling an effect never begun is [`Error::EffectNotFound`]; beginning
/// one in a run that does not exist is [`Error::RunNotFound`].
pub async fn effect_refusals<H: LeaseHarness>(h: &H)
where
    H::Store: EffectJournal,
{
    let run = new_run(h).await;
    assert_err!(
        h.store().settle_effect(run.id, "nope", &json!(1)).await,
        Error::EffectNotFound { run: r, key } if r == run.id && key == "nope"
    );
    let missing = RunId::generate();
    assert_err!(
        h.store().begin_effect(missing, "k").await,
        Error::RunNotFound(r) if r == missing
    );
    assert_err!(
        h.store().begin_effect(run.id, "").await,
        Error::InvalidInput(_)
    );
    assert!(
        h.store()
            .stranded_effects(Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}
