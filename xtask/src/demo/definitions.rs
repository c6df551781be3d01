//! The workflows the demo's engine runs, published through the events
//! ports: a workflow per (app, scope, name), a published version, and an
//! activation naming the event type that starts it.
//!
//! Leans on `DefinitionStore`: a second create of a workflow or a second
//! publish of a hash answers the first (`inserted: false`), so publishing
//! at every start is safe, and an event matches an activation only if it
//! names the workflow's active version (`Activation::matches`).

use anyhow::{Context, Result};
use flowstate_core::ports::DefinitionStore;
use flowstate_core::{NewActivation, NewPublishedVersion, NewWorkflow};
use serde_json::json;

/// The app every demo event and workflow belongs to; the scope is the demo
/// session, so runs of earlier demos in the same database are never
/// counted.
pub const APP: &str = "shop";

/// The order pipeline: reserve, charge (transient failures, retried), a
/// `notify` child it waits for, the carrier's signal, ship.
pub const ORDER: &str = "order";
/// The child every order starts.
pub const NOTIFY: &str = "notify";
/// The follow-up of a cancelled order.
pub const REFUND: &str = "refund";
/// The workflow of the poison events.
pub const IMPORT: &str = "catalog-import";

/// Starts an order run.
pub const ORDER_PLACED: &str = "order.placed";
/// Starts a refund run.
pub const ORDER_CANCELLED: &str = "order.cancelled";
/// Listened to by nobody: recorded, starts nothing.
pub const ORDER_VIEWED: &str = "order.viewed";
/// Starts an import run, but its payload is over the dispatchers' input
/// limit until the demo raises it: the poison.
pub const CATALOG_IMPORTED: &str = "catalog.imported";

/// The signal an order waits for before it ships.
pub const PICKED_UP: &str = "carrier.picked_up";

/// Publishes the four workflows in `scope` and activates three of them on
/// their event types (`notify` is only ever a child).
pub async fn publish<S: DefinitionStore>(store: &S, scope: &str) -> Result<()> {
    let definitions = [
        (
            ORDER,
            Some(ORDER_PLACED),
            json!(["reserve", "charge", "notify", PICKED_UP, "ship"]),
        ),
        (NOTIFY, None, json!(["send"])),
        (
            REFUND,
            Some(ORDER_CANCELLED),
            json!(["cooling-off", "refund"]),
        ),
        (IMPORT, Some(CATALOG_IMPORTED), json!(["import"])),
    ];
    for (name, event_type, steps) in definitions {
        let workflow = store
            .create_workflow(NewWorkflow {
                app_id: APP.to_owned(),
                scope_id: scope.to_owned(),
                name: name.to_owned(),
            })
            .await
            .with_context(|| format!("creating workflow {name}"))?
            .record;
        let version = store
            .publish_version(NewPublishedVersion {
                workflow: workflow.id,
                hash: format!("{name}-v1"),
                definition: json!({ "steps": steps }),
            })
            .await
            .with_context(|| format!("publishing workflow {name}"))?
            .record;
        if let Some(event_type) = event_type {
            store
                .create_activation(NewActivation {
                    workflow: workflow.id,
                    version: version.id,
                    event_type: event_type.to_owned(),
                    authorization: json!({ "acting_as": "demo" }),
                })
                .await
                .with_context(|| format!("activating workflow {name}"))?;
        }
    }
    Ok(())
}
