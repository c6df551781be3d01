//! What the event cases share: a workflow with a published version and an
//! activation, the bounds the cases put on a store, and a store wrapper
//! whose dispatches fail (listed or queued), and the dispatcher runner's
//! case body.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::backoff::EventDispatchOutcome;
use flowstate_core::ports::{DefinitionStore, EventQueueStore, EventStore, Store};
use flowstate_core::{
    Activation, Dispatch, Emission, Error, Event, EventFilter, EventId, NewActivation, NewEvent,
    NewPublishedVersion, NewWorkflow, NextDispatch, PendingEvent, PublishedVersion, Result,
    RunCause, RunId, Workflow,
};
use flowstate_events::Dispatcher;
use serde_json::{Value, json};

use crate::Harness;

/// A store with every port the event cases use.
pub trait EventBackend: Store + DefinitionStore + EventStore + 'static {}

impl<T: Store + DefinitionStore + EventStore + 'static> EventBackend for T {}

/// A store with every port the event-queue cases use: the event ports and
/// [`EventQueueStore`].
pub trait EventQueueBackend: EventBackend + EventQueueStore {}

impl<T: EventBackend + EventQueueStore> EventQueueBackend for T {}

/// The event type every fixture activation listens for.
pub(crate) const TICK: &str = "app.tick";

/// A workflow, its active version and one activation of it for [`TICK`].
#[derive(Clone, Debug)]
pub(crate) struct Listening {
    pub(crate) workflow: Workflow,
    pub(crate) version: PublishedVersion,
    pub(crate) activation: Activation,
}

/// Workflow `name` in app `app`, scope `scope`, with version `h1` published
/// and an activation for [`TICK`] acting as `{"as": "system"}`.
pub(crate) async fn listening<H: Harness>(h: &H, app: &str, scope: &str, name: &str) -> Listening
where
    H::Store: DefinitionStore,
{
    let store = h.store();
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: app.into(),
            scope_id: scope.into(),
            name: name.into(),
        })
        .await
        .expect("create_workflow")
        .record;
    let version = publish(h, &workflow, "h1").await;
    let activation = activate(h, &workflow, &version, TICK).await;
    let workflow = store.get_workflow(workflow.id).await.expect("get_workflow");
    Listening {
        workflow,
        version,
        activation,
    }
}

/// Publishes version `hash` of `workflow`.
pub(crate) async fn publish<H: Harness>(h: &H, workflow: &Workflow, hash: &str) -> PublishedVersion
where
    H::Store: DefinitionStore,
{
    h.store()
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: hash.into(),
            definition: json!({"steps": [hash]}),
        })
        .await
        .expect("publish_version")
        .record
}

/// An activation of `version` for `event_type`, acting as `{"as": "system"}`.
pub(crate) async fn activate<H: Harness>(
    h: &H,
    workflow: &Workflow,
    version: &PublishedVersion,
    event_type: &str,
) -> Activation
where
    H::Store: DefinitionStore,
{
    h.store()
        .create_activation(NewActivation {
            workflow: workflow.id,
            version: version.id,
            event_type: event_type.into(),
            authorization: json!({"as": "system"}),
        })
        .await
        .expect("create_activation")
}

/// A [`TICK`] in `app`/`scope` with `data`.
pub(crate) fn tick(app: &str, scope: &str, data: Value) -> NewEvent {
    NewEvent::new(app, scope, TICK, data)
}

/// Emits `event`, panicking on error.
pub(crate) async fn emit<H: Harness>(h: &H, event: NewEvent, dispatch: Dispatch) -> Emission
where
    H::Store: EventBackend,
{
    h.store().emit(event, dispatch).await.expect("emit")
}

/// A store whose every [`EventStore::dispatch_event`] fails, as a
/// materialisation that cannot be written would, and whose
/// [`EventQueueStore::dispatch_next`] takes the oldest pending event only
/// to fail it so; the rest goes to the store inside.
#[derive(Debug)]
pub(crate) struct FailingDispatch<S>(pub(crate) Arc<S>);

impl<S: EventStore> EventStore for FailingDispatch<S> {
    async fn emit(&self, event: NewEvent, dispatch: Dispatch) -> Result<Emission> {
        self.0.emit(event, dispatch).await
    }

    async fn get_event(&self, id: EventId) -> Result<Event> {
        self.0.get_event(id).await
    }

    async fn pending_events(&self, limit: u32) -> Result<Vec<PendingEvent>> {
        self.0.pending_events(limit).await
    }

    async fn dispatch_event(&self, _id: EventId) -> Result<Option<Vec<RunId>>> {
        Err(refused("dispatch_event"))
    }

    async fn record_dispatch_failure(
        &self,
        id: EventId,
        attempts: u32,
        error: &str,
        outcome: EventDispatchOutcome,
    ) -> Result<bool> {
        self.0
            .record_dispatch_failure(id, attempts, error, outcome)
            .await
    }

    async fn list_undispatched(
        &self,
        filter: &EventFilter,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<Event>> {
        self.0.list_undispatched(filter, limit, offset).await
    }

    async fn redrive(&self, id: EventId) -> Result<bool> {
        self.0.redrive(id).await
    }

    async fn run_cause(&self, run: RunId) -> Result<Option<RunCause>> {
        self.0.run_cause(run).await
    }

    async fn event_runs(&self, event: EventId) -> Result<Vec<RunCause>> {
        self.0.event_runs(event).await
    }
}

impl<S: EventStore> EventQueueStore for FailingDispatch<S> {
    async fn dispatch_next(&self) -> Result<NextDispatch> {
        Ok(match self.0.pending_events(1).await?.first() {
            Some(&event) => NextDispatch::Failed {
                event,
                error: refused("dispatch_next"),
            },
            None => NextDispatch::Idle,
        })
    }
}

/// The failure of [`FailingDispatch`]'s `operation`.
fn refused(operation: &'static str) -> Error {
    Error::backend(operation, true, "materialisation refused")
}

/// The runner cases' one body: the [`Dispatcher`] `configure` makes of a
/// 5 ms one over the harness's store dispatches a deferred event, counts
/// it, and dispatches nothing after its shutdown.
pub(crate) async fn runs_until_shut_down<H: Harness>(
    h: &H,
    configure: impl FnOnce(Dispatcher<H::Store>) -> Dispatcher<H::Store>,
) where
    H::Store: EventBackend,
{
    let store = h.store();
    listening(h, "app", "s", "wf").await;
    let emitted = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    let handle =
        configure(Dispatcher::new(Arc::clone(store)).with_interval(Duration::from_millis(5)))
            .spawn();
    let mut waited = 0;
    while store
        .get_event(emitted.event)
        .await
        .unwrap()
        .dispatched_at
        .is_none()
    {
        waited += 1;
        assert!(waited < 2_000, "the dispatcher never dispatched the event");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = handle.shutdown().await;
    assert_eq!(report.dispatched, 1);
    assert_eq!(report.failed, 0);
    assert!(report.ticks >= 1);
    let after = emit(h, tick("app", "s", json!({})), Dispatch::Deferred).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let stored = store.get_event(after.event).await.unwrap();
    assert_eq!(
        stored.dispatched_at, None,
        "a stopped dispatcher dispatches nothing"
    );
}
