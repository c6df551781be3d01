//! [`VersionStore::propose_version`] and
//! [`VersionStore::set_version_status`]: a version's source and status,
//! a draft accepted or declined once.

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::VersionStore;
use flowstate_core::{Error, NewWorkflowVersion, VersionId, VersionStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{assert_err, race};

fn version(hash: &str) -> NewWorkflowVersion {
    NewWorkflowVersion {
        workflow: "wf".to_owned(),
        graph_hash: hash.to_owned(),
        graph: json!({"nodes": ["a"]}),
    }
}

/// A proposed version is a draft keeping its source, read back exactly; an
/// upserted one is active with none; proposing a stored pair again answers
/// the stored version, status and source unchanged.
pub async fn proposed_version_round_trips<H: Harness>(h: &H) {
    let store = h.store();
    let source = "export default workflow(\"wf\", (step) => {\n  step(\"a\") // ünïcode\n});";
    let proposed = store
        .propose_version(version("h1"), Some(source))
        .await
        .unwrap();
    assert!(proposed.inserted);
    let record = proposed.record;
    assert_eq!(record.status, VersionStatus::Draft);
    assert_eq!(record.source.as_deref(), Some(source));
    let read = store.get_version("wf", "h1").await.unwrap();
    assert_eq!(read, Some(record.clone()));

    let bare = store.propose_version(version("h2"), None).await.unwrap();
    assert_eq!(
        (bare.record.status, bare.record.source),
        (VersionStatus::Draft, None)
    );

    let active = store.upsert_version(version("h3")).await.unwrap().record;
    assert_eq!(
        (active.status, active.source.as_deref()),
        (VersionStatus::Active, None)
    );

    let again = store
        .propose_version(version("h1"), Some("other"))
        .await
        .unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, record);
    let again = store
        .propose_version(version("h3"), Some("x"))
        .await
        .unwrap();
    assert!(!again.inserted);
    assert_eq!(again.record, active);
}

/// A draft moves to active or declined, once, and reads back moved; every
/// other move is the typed illegal transition, nothing written.
pub async fn version_status_moves_once<H: Harness>(h: &H) {
    let store = h.store();
    let a = store
        .propose_version(version("h1"), Some("a"))
        .await
        .unwrap()
        .record;
    let moved = store
        .set_version_status(a.id, VersionStatus::Active)
        .await
        .unwrap();
    assert_eq!(moved.status, VersionStatus::Active);
    assert_eq!(moved.source.as_deref(), Some("a"));
    assert_eq!(store.get_version("wf", "h1").await.unwrap(), Some(moved));
    assert_err!(
        store.set_version_status(a.id, VersionStatus::Declined).await,
        Error::IllegalVersionTransition {
            version,
            from: VersionStatus::Active,
            to: VersionStatus::Declined,
        } if version == a.id
    );

    let d = store
        .propose_version(version("h2"), None)
        .await
        .unwrap()
        .record;
    assert_err!(
        store.set_version_status(d.id, VersionStatus::Draft).await,
        Error::IllegalVersionTransition {
            from: VersionStatus::Draft,
            to: VersionStatus::Draft,
            ..
        }
    );
    let declined = store
        .set_version_status(d.id, VersionStatus::Declined)
        .await
        .unwrap();
    assert_eq!(declined.status, VersionStatus::Declined);
    assert_err!(
        store.set_version_status(d.id, VersionStatus::Active).await,
        Error::IllegalVersionTransition {
            from: VersionStatus::Declined,
            to: VersionStatus::Active,
            ..
        }
    );
    assert_eq!(
        store.get_version("wf", "h2").await.unwrap().unwrap().status,
        VersionStatus::Declined
    );

    let upserted = store.upsert_version(version("h3")).await.unwrap().record;
    assert_err!(
        store
            .set_version_status(upserted.id, VersionStatus::Declined)
            .await,
        Error::IllegalVersionTransition {
            from: VersionStatus::Active,
            ..
        }
    );
}

/// Of 8 racing moves of one draft, exactly one lands.
pub async fn version_status_race_8<H: Harness>(h: &H) {
    let draft = h
        .store()
        .propose_version(version("h1"), None)
        .await
        .unwrap()
        .record;
    let outcomes = race(h.store(), 8, |store, i| async move {
        let to = if i % 2 == 0 {
            VersionStatus::Active
        } else {
            VersionStatus::Declined
        };
        store.set_version_status(draft.id, to).await
    })
    .await;
    let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter_map(|o| o.as_ref().err())
            .all(|e| matches!(e, Error::IllegalVersionTransition { .. }))
    );
    let read = h.store().get_version("wf", "h1").await.unwrap().unwrap();
    assert_eq!(&read, won[0]);
}

/// An unknown version id is the typed not-found, whatever the move.
pub async fn version_status_unknown_id<H: Harness>(h: &H) {
    let id = VersionId::generate();
    for to in VersionStatus::ALL.iter().copied() {
        assert_err!(
            h.store().set_version_status(id, to).await,
            Error::VersionNotFound(missing) if missing == id
        );
    }
}

/// A source with a NUL, or empty, is refused before anything is written.
pub async fn propose_version_refuses_bad_source<H: Harness>(h: &H) {
    let store = h.store();
    assert_err!(
        store.propose_version(version("h1"), Some("a\0b")).await,
        Error::InvalidInput(InvalidInput::NulCharacter { .. })
    );
    assert_err!(
        store.propose_version(version("h1"), Some("")).await,
        Error::InvalidInput(InvalidInput::Empty { .. })
    );
    assert_eq!(store.get_version("wf", "h1").await.unwrap(), None);
}
