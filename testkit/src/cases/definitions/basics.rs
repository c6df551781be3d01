//! [`DefinitionStore`]: workflows created once per (app, scope, name),
//! publishing that makes a version active, enabling and disabling, lists,
//! and typed answers for unknown ids.

use flowstate_core::ports::DefinitionStore;
use flowstate_core::{
    ActivationId, Error, NewActivation, NewPublishedVersion, NewWorkflow, PublishedVersionId,
    WorkflowId,
};
use serde_json::json;

use crate::Harness;
use crate::cases::support::assert_err;
use crate::cases::support::events::{TICK, activate, listening, publish};

fn new_workflow(app: &str, scope: &str, name: &str) -> NewWorkflow {
    NewWorkflow {
        app_id: app.into(),
        scope_id: scope.into(),
        name: name.into(),
    }
}

/// A second create of the same (app, scope, name) answers the first; the
/// same name elsewhere is another workflow. A new workflow is enabled with
/// no active version.
pub async fn create_workflow_is_idempotent_by_name<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    let first = store
        .create_workflow(new_workflow("app", "s1", "wf"))
        .await
        .unwrap();
    assert!(first.inserted);
    assert!(first.record.enabled);
    assert_eq!(first.record.active_version, None);
    let again = store
        .create_workflow(new_workflow("app", "s1", "wf"))
        .await
        .unwrap();
    assert_eq!((again.inserted, &again.record), (false, &first.record));
    let other = store
        .create_workflow(new_workflow("app", "s2", "wf"))
        .await
        .unwrap();
    assert!(other.inserted);
    assert_ne!(other.record.id, first.record.id);
    assert_eq!(
        store.get_workflow(first.record.id).await.unwrap(),
        first.record
    );
}

/// Publishing makes a version active; publishing a known hash again
/// stores nothing new and makes it active again.
pub async fn publish_makes_the_version_active<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    let fixture = listening(h, "app", "s", "wf").await;
    assert_eq!(fixture.workflow.active_version, Some(fixture.version.id));
    assert_eq!(fixture.version.definition, json!({"steps": ["h1"]}));
    let v2 = publish(h, &fixture.workflow, "h2").await;
    let workflow = store.get_workflow(fixture.workflow.id).await.unwrap();
    assert_eq!(workflow.active_version, Some(v2.id));
    let again = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "h1".into(),
            definition: json!("ignored"),
        })
        .await
        .unwrap();
    assert_eq!((again.inserted, &again.record), (false, &fixture.version));
    let workflow = store.get_workflow(workflow.id).await.unwrap();
    assert_eq!(workflow.active_version, Some(fixture.version.id));
    let versions = store.list_versions(workflow.id).await.unwrap();
    assert_eq!(versions, vec![fixture.version, v2]);
}

/// Workflows and activations are enabled and disabled, and answer as
/// written; lists hold exactly their own.
pub async fn enable_disable_and_list<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    let a = listening(h, "app", "s", "a").await;
    let b = listening(h, "app", "s", "b").await;
    listening(h, "app", "other", "c").await;
    let off = store
        .set_workflow_enabled(a.workflow.id, false)
        .await
        .unwrap();
    assert!(!off.enabled);
    assert_eq!(store.get_workflow(a.workflow.id).await.unwrap(), off);
    let listed = store.list_workflows("app", "s").await.unwrap();
    assert_eq!(listed, vec![off, b.workflow.clone()]);
    let second = activate(h, &b.workflow, &b.version, "app.other").await;
    let disabled = store
        .set_activation_enabled(b.activation.id, false)
        .await
        .unwrap();
    assert!(!disabled.enabled);
    assert_eq!(
        store.list_activations(b.workflow.id).await.unwrap(),
        vec![disabled, second]
    );
    assert_eq!(
        store.list_activations(a.workflow.id).await.unwrap().len(),
        1
    );
}

/// An activation naming a version of another workflow, or none at all, is
/// refused.
pub async fn activation_of_another_workflows_version_is_refused<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let a = listening(h, "app", "s", "a").await;
    let b = listening(h, "app", "s", "b").await;
    for version in [b.version.id, PublishedVersionId::generate()] {
        let refused = h
            .store()
            .create_activation(NewActivation {
                workflow: a.workflow.id,
                version,
                event_type: TICK.into(),
                authorization: json!({}),
            })
            .await;
        assert_err!(refused, Error::PublishedVersionNotFound { workflow, version: v }
            if workflow == a.workflow.id && v == version);
    }
}

/// Unknown workflows and activations are typed errors (unknown events:
/// `events::basics::unknown_event_ids_are_typed`).
pub async fn unknown_definition_ids_are_typed<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    let w = WorkflowId::generate();
    assert_err!(store.get_workflow(w).await, Error::WorkflowNotFound(id) if id == w);
    assert_err!(store.set_workflow_enabled(w, false).await, Error::WorkflowNotFound(id) if id == w);
    let publish = NewPublishedVersion {
        workflow: w,
        hash: "h".into(),
        definition: json!({}),
    };
    assert_err!(store.publish_version(publish).await, Error::WorkflowNotFound(id) if id == w);
    let a = ActivationId::generate();
    assert_err!(store.set_activation_enabled(a, true).await, Error::ActivationNotFound(id) if id == a);
    assert!(store.list_versions(w).await.unwrap().is_empty());
}

/// Empty names are refused before anything is written.
pub async fn empty_definition_names_are_refused<H: Harness>(h: &H)
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    for bad in [
        new_workflow("", "s", "wf"),
        new_workflow("app", "", "wf"),
        new_workflow("app", "s", ""),
    ] {
        assert_err!(store.create_workflow(bad).await, Error::InvalidInput(_));
    }
    assert!(store.list_workflows("app", "s").await.unwrap().is_empty());
}
