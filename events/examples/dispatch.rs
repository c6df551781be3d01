//! Emit events and dispatch them: a workflow listens for `order.placed`,
//! events are recorded once per dedupe key, and a `Dispatcher` turns each
//! delivery into exactly one run.
//!
//! On testkit's `MemoryStore`; any store with the event ports
//! (`flowstate-store-diesel`'s `DieselStore`) takes its place unchanged.
//!
//! `cargo run -p flowstate-events --example dispatch`

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::ports::{DefinitionStore, EventStore};
use flowstate_core::{
    Dispatch, NewActivation, NewEvent, NewPublishedVersion, NewWorkflow, RunQuery, ports::RunStore,
};
use flowstate_events::Dispatcher;
use flowstate_testkit::MemoryStore;
use serde_json::json;

#[tokio::main]
async fn main() -> flowstate_core::Result<()> {
    let store = Arc::new(MemoryStore::new());

    // What listens: a workflow, its published version, an activation.
    let workflow = store
        .create_workflow(NewWorkflow {
            app_id: "shop".into(),
            scope_id: "eu".into(),
            name: "fulfil".into(),
        })
        .await?
        .record;
    let version = store
        .publish_version(NewPublishedVersion {
            workflow: workflow.id,
            hash: "v1".into(),
            definition: json!({ "steps": ["pack", "ship"] }),
        })
        .await?
        .record;
    store
        .create_activation(NewActivation {
            workflow: workflow.id,
            version: version.id,
            event_type: "order.placed".into(),
            authorization: json!({ "as": "fulfilment" }),
        })
        .await?;

    // Emitted deferred: recorded now, started by the dispatcher. The same
    // dedupe key twice is one event.
    let mut events = Vec::new();
    for order in [1, 2, 3, 3] {
        let event = NewEvent::new("shop", "eu", "order.placed", json!({ "order": order }))
            .with_dedupe_key(format!("order-{order}"));
        let emitted = store.emit(event, Dispatch::Deferred).await?;
        println!(
            "emit order {order}: event {} duplicate={}",
            emitted.event, emitted.duplicate
        );
        if !emitted.duplicate {
            events.push(emitted.event);
        }
    }

    let dispatcher = Dispatcher::new(Arc::clone(&store))
        .with_interval(Duration::from_millis(20))
        .spawn();
    while !store.pending_events(10).await?.is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = dispatcher.shutdown().await;
    println!(
        "dispatcher: {} dispatched, {} failed, {} dead-lettered",
        report.dispatched, report.failed, report.dead_lettered
    );

    for id in events {
        let event = store.get_event(id).await?;
        let dispatched = event.dispatched_at.is_some();
        println!(
            "event {id} ({}): dispatched={dispatched}",
            event.data["order"]
        );
    }
    let runs = store.list_runs(&RunQuery::default()).await?.items;
    for run in &runs {
        let cause = store.run_cause(run.id).await?.expect("started by an event");
        println!(
            "run {} of {:?}, started by event {}",
            run.id, run.workflow, cause.event
        );
    }
    assert_eq!((report.dispatched, runs.len()), (3, 3));
    Ok(())
}
