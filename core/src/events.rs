//! Events and the definitions they start: workflows, their published
//! versions, activations, recorded events, the deliveries pinned to them,
//! and the pure rules that turn an event into runs.
//!
//! Every run starts from an event. The event is recorded once (a dedupe key
//! makes a repeatable source at-most-once), matched to the activations that
//! listen for its type, and each match is pinned as a [`Delivery`] naming the
//! run it will start, so "why did this run start" is a join
//! ([`RunCause`]). The rules here decide what matches
//! ([`Activation::matches`]), what run a delivery starts
//! ([`Delivery::new_run`]) and who that run acts as
//! ([`effective_authorization`]); the stores carry them out atomically and
//! `flowstate-events` dispatches what was deferred.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::field;
use crate::idempotency::event_run_key;
use crate::ids::{ActivationId, EventId, PublishedVersionId, RunId, WorkflowId};
use crate::limits::{Dismantle, InputLimits, dismantle_json};
use crate::records::NewRun;
use crate::time::Timestamp;

mod emit_batch;

pub use emit_batch::{MAX_EMIT_BATCH, check_emit_batch, encode_emit_batch, first_of_key};

/// A workflow definition to create, unique by (app, scope, name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWorkflow {
    /// The app it belongs to.
    pub app_id: String,
    /// The scope (a tenant, a workspace) within the app.
    pub scope_id: String,
    /// Its name, unique within the app and scope; runs carry it as their
    /// workflow.
    pub name: String,
}

/// A stored workflow definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workflow {
    /// Its id.
    pub id: WorkflowId,
    /// The app it belongs to.
    pub app_id: String,
    /// The scope within the app.
    pub scope_id: String,
    /// Its name.
    pub name: String,
    /// Whether it is enabled (created enabled).
    pub enabled: bool,
    /// The version published last, the one its activations must name to
    /// match; `None` until one is published.
    pub active_version: Option<PublishedVersionId>,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A version of a workflow to publish, unique by (workflow, hash).
#[derive(Clone, Debug, PartialEq)]
pub struct NewPublishedVersion {
    /// The workflow.
    pub workflow: WorkflowId,
    /// The hash of the definition; runs carry it as their graph hash.
    pub hash: String,
    /// The definition itself.
    pub definition: Value,
}

/// A published version of a workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishedVersion {
    /// Its id.
    pub id: PublishedVersionId,
    /// The workflow.
    pub workflow: WorkflowId,
    /// The definition's hash.
    pub hash: String,
    /// The definition.
    pub definition: Value,
    /// When it was first published.
    pub created_at: Timestamp,
}

/// An activation to create: a version of a workflow listening for an event
/// type.
#[derive(Clone, Debug, PartialEq)]
pub struct NewActivation {
    /// The workflow.
    pub workflow: WorkflowId,
    /// The version that runs when it matches (one of the workflow's).
    pub version: PublishedVersionId,
    /// The event type it listens for.
    pub event_type: String,
    /// Who its runs act as when the event names nobody.
    pub authorization: Value,
}

/// A stored activation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Activation {
    /// Its id.
    pub id: ActivationId,
    /// The workflow.
    pub workflow: WorkflowId,
    /// The version it starts.
    pub version: PublishedVersionId,
    /// The event type it listens for.
    pub event_type: String,
    /// Whether it is enabled (created enabled).
    pub enabled: bool,
    /// Who its runs act as when the event names nobody.
    pub authorization: Value,
    /// When it was created.
    pub created_at: Timestamp,
}

impl Activation {
    /// Whether this activation of `workflow` takes `event`: it is enabled,
    /// listens for the event's type, its workflow is in the event's app and
    /// scope, it names the workflow's active version, and the event names no
    /// target workflow or names this one. The SQL of each backend says the
    /// same in its `WHERE`.
    pub fn matches(&self, workflow: &Workflow, event: &Event) -> bool {
        self.workflow == workflow.id
            && self.enabled
            && self.event_type == event.event_type
            && workflow.app_id == event.app_id
            && workflow.scope_id == event.scope_id
            && workflow.active_version == Some(self.version)
            && event.target_workflow.is_none_or(|t| t == workflow.id)
    }
}

/// An event to record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// The app it concerns.
    pub app_id: String,
    /// The scope within the app.
    pub scope_id: String,
    /// Its type, matched against activations.
    pub event_type: String,
    /// The payload: the input of the runs it starts.
    pub data: Value,
    /// What the runs read as their context, apart from the payload.
    pub context: Value,
    /// Who the runs act as; empty (`{}` or `null`) falls back to each
    /// activation's snapshot ([`effective_authorization`]).
    pub authorization: Value,
    /// Restricts matching to this workflow's activations.
    pub target_workflow: Option<WorkflowId>,
    /// Records the event at most once per (app, scope, type, key).
    pub dedupe_key: Option<String>,
    /// When it happened; the store's now if `None`.
    pub occurred_at: Option<Timestamp>,
}

impl NewEvent {
    /// An event of `event_type` in `app_id`/`scope_id` with `data`, empty
    /// context and authorization, and nothing else set.
    pub fn new(
        app_id: impl Into<String>,
        scope_id: impl Into<String>,
        event_type: impl Into<String>,
        data: Value,
    ) -> Self {
        Self {
            app_id: app_id.into(),
            scope_id: scope_id.into(),
            event_type: event_type.into(),
            data,
            context: Value::Object(Map::new()),
            authorization: Value::Object(Map::new()),
            target_workflow: None,
            dedupe_key: None,
            occurred_at: None,
        }
    }

    /// The same event with a dedupe key.
    #[must_use]
    pub fn with_dedupe_key(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }

    /// The same event, matching only `workflow`'s activations.
    #[must_use]
    pub fn with_target(mut self, workflow: WorkflowId) -> Self {
        self.target_workflow = Some(workflow);
        self
    }

    /// The same event acting as `authorization`.
    #[must_use]
    pub fn with_authorization(mut self, authorization: Value) -> Self {
        self.authorization = authorization;
        self
    }

    /// The same event with `context`.
    #[must_use]
    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }

    /// The same event, having occurred at `at`.
    #[must_use]
    pub fn occurred_at(mut self, at: Timestamp) -> Self {
        self.occurred_at = Some(at);
        self
    }

    /// The event as a store records it at `now` with id `id`, before it is
    /// matched: nothing matched, not dispatched, due at once.
    pub fn into_event(self, id: EventId, now: Timestamp) -> Event {
        Event {
            id,
            app_id: self.app_id,
            scope_id: self.scope_id,
            event_type: self.event_type,
            data: self.data,
            context: self.context,
            authorization: self.authorization,
            target_workflow: self.target_workflow,
            dedupe_key: self.dedupe_key,
            occurred_at: self.occurred_at.unwrap_or(now),
            matched: 0,
            dispatched_at: None,
            attempts: 0,
            last_error: None,
            dispatch_after: now,
            dead_lettered_at: None,
        }
    }
}

/// How an emitted event's runs start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// In the emit's own transaction: the caller gets the run ids back (a
    /// direct invocation, a "run this workflow" button).
    Now,
    /// Later, by a dispatcher: for what an app merely observes, so a failing
    /// dispatch never rolls back the occurrence itself.
    Deferred,
}

/// What an emit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emission {
    /// The event recorded (the first one, for a duplicate).
    pub event: EventId,
    /// The runs started: empty when nothing matched or dispatch was
    /// deferred; for a duplicate, the runs the first event has started so
    /// far, in delivery order.
    pub runs: Vec<RunId>,
    /// Whether an event with the same (app, scope, type, dedupe key) was
    /// already recorded, so nothing was.
    pub duplicate: bool,
}

/// A recorded event and where its dispatch stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its id.
    pub id: EventId,
    /// The app.
    pub app_id: String,
    /// The scope.
    pub scope_id: String,
    /// The type.
    pub event_type: String,
    /// The payload.
    pub data: Value,
    /// The context.
    pub context: Value,
    /// The authorization it was emitted with (maybe empty).
    pub authorization: Value,
    /// The target workflow, if one was named.
    pub target_workflow: Option<WorkflowId>,
    /// The dedupe key, if any.
    pub dedupe_key: Option<String>,
    /// When it happened.
    pub occurred_at: Timestamp,
    /// How many deliveries were pinned.
    pub matched: u32,
    /// When its runs were started (or, if it matched nothing, when it was
    /// recorded).
    pub dispatched_at: Option<Timestamp>,
    /// Dispatch attempts so far (failed ones, and the one that succeeded).
    pub attempts: u32,
    /// The last dispatch failure.
    pub last_error: Option<String>,
    /// Not dispatched before this.
    pub dispatch_after: Timestamp,
    /// When it was dead-lettered, if it was.
    pub dead_lettered_at: Option<Timestamp>,
}

impl Event {
    /// Whether a dispatcher should take it at `now`: matched something, not
    /// dispatched, not dead-lettered, and due.
    pub fn is_pending(&self, now: Timestamp) -> bool {
        self.matched > 0
            && self.dispatched_at.is_none()
            && self.dead_lettered_at.is_none()
            && self.dispatch_after <= now
    }

    /// Whether the undispatched listing shows it: it matched nothing, or
    /// its runs are not started yet (waiting, retrying or dead-lettered).
    pub fn is_undispatched(&self) -> bool {
        self.matched == 0 || self.dispatched_at.is_none()
    }

    /// Stamps a just-emitted event with what its emit decided, the rule
    /// every backend's `emit` applies: it matched `matched` activations;
    /// one that matched nothing is dispatched at `now` (there is nothing to
    /// start), and one dispatched [`Dispatch::Now`] that matched something
    /// is dispatched at `now` with its first attempt taken. Answers whether
    /// the emit starts the runs itself (`Now` and something matched).
    pub fn stamp_emitted(&mut self, matched: usize, dispatch: Dispatch, now: Timestamp) -> bool {
        self.matched = u32::try_from(matched).unwrap_or(u32::MAX);
        let now_dispatch = dispatch == Dispatch::Now && matched > 0;
        if matched == 0 || now_dispatch {
            self.dispatched_at = Some(now);
        }
        if now_dispatch {
            self.attempts = 1;
        }
        now_dispatch
    }
}

/// An event a dispatcher may take, with the attempts it has had: the
/// failure of the next one is recorded against that count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingEvent {
    /// The event.
    pub id: EventId,
    /// Its attempts so far.
    pub attempts: u32,
}

/// The most events one
/// [`EventQueueStore::dispatch_next_batch`](crate::ports::EventQueueStore::dispatch_next_batch)
/// takes: enough that a batch's fixed cost (its transaction, its pick, the
/// read of its deliveries, its one mark) is small beside its runs, and few
/// enough that the events' ids bound in one statement stay far from any
/// placeholder limit and a batch holds its locks briefly.
pub const MAX_DISPATCH_BATCH: u32 = 500;

/// Checks the size of a batched dispatch: from 1 to
/// [`MAX_DISPATCH_BATCH`] events, else [`InvalidInput::OutOfRange`]
/// (`dispatch batch`). Refused rather than clamped, as a run claim's batch
/// is, so a caller asking for nothing or for more than one transaction
/// should hold learns it at once, the same way on every backend.
///
/// [`InvalidInput::OutOfRange`]: crate::error::InvalidInput::OutOfRange
pub fn check_dispatch_batch(n: u32) -> Result<(), Error> {
    if n == 0 || n > MAX_DISPATCH_BATCH {
        return Err(Error::InvalidInput(
            crate::error::InvalidInput::OutOfRange {
                field: DISPATCH_BATCH,
                detail: format!("{n} is not between 1 and {MAX_DISPATCH_BATCH}"),
            },
        ));
    }
    Ok(())
}

/// The field a refused batch size names (`field.rs` holds the labels of
/// the records' own fields; this one is an argument's).
const DISPATCH_BATCH: &str = "dispatch batch";

/// What [`EventQueueStore::dispatch_next`](crate::ports::EventQueueStore::dispatch_next)
/// did: took no event, dispatched one, or took one whose dispatch failed.
#[derive(Debug)]
pub enum NextDispatch {
    /// No pending event was free to take: none is due, or another
    /// dispatcher holds every one that is.
    Idle,
    /// The event was dispatched: its runs, in delivery order.
    Dispatched {
        /// The event.
        event: EventId,
        /// The runs its deliveries started.
        runs: Vec<RunId>,
    },
    /// The event was taken but its dispatch failed and rolled back: it is
    /// still pending with the attempts it had, and the failure is for the
    /// caller to record
    /// ([`EventStore::record_dispatch_failure`](crate::ports::EventStore::record_dispatch_failure)).
    Failed {
        /// The event, with the attempts it had when it was taken.
        event: PendingEvent,
        /// Why its dispatch failed.
        error: Error,
    },
}

/// Narrows an events listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events of this app.
    pub app_id: Option<String>,
    /// Only events of this scope.
    pub scope_id: Option<String>,
}

impl EventFilter {
    /// Whether `event` passes.
    pub fn admits(&self, event: &Event) -> bool {
        self.app_id.as_ref().is_none_or(|a| *a == event.app_id)
            && self.scope_id.as_ref().is_none_or(|s| *s == event.scope_id)
    }
}

/// One pinned match of an event: the activation, what it named when the
/// event arrived, and the run it starts. Pinned once, never changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The event.
    pub event: EventId,
    /// The activation that matched.
    pub activation: ActivationId,
    /// Its workflow.
    pub workflow: WorkflowId,
    /// The workflow's name, the run's workflow.
    pub workflow_name: String,
    /// The version it starts.
    pub version: PublishedVersionId,
    /// That version's hash, the run's graph hash.
    pub version_hash: String,
    /// The activation's authorization snapshot when it matched.
    pub authorization: Value,
    /// The run this delivery starts, named when it is pinned so every
    /// materialisation writes the same run.
    pub run: RunId,
}

impl Delivery {
    /// The run this delivery starts for `event`: the event's data as input,
    /// the version's hash, and the idempotency key
    /// `event:{event}:{activation}`.
    pub fn new_run(&self, event: &Event) -> NewRun {
        NewRun::new(self.workflow_name.clone(), event.data.clone())
            .with_graph_hash(self.version_hash.clone())
            .with_idempotency_key(event_run_key(self.event, self.activation))
    }

    /// Why this delivery's run started, read from `event`.
    pub fn cause(&self, event: &Event) -> RunCause {
        RunCause {
            run: self.run,
            event: self.event,
            activation: self.activation,
            workflow: self.workflow,
            version: self.version,
            context: event.context.clone(),
            authorization: effective_authorization(&event.authorization, &self.authorization)
                .clone(),
            occurred_at: event.occurred_at,
        }
    }
}

/// Why a run started: the event and the activation, and what the run reads
/// from them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunCause {
    /// The run.
    pub run: RunId,
    /// The event that started it.
    pub event: EventId,
    /// The activation that matched.
    pub activation: ActivationId,
    /// The workflow.
    pub workflow: WorkflowId,
    /// The version it runs.
    pub version: PublishedVersionId,
    /// The event's context.
    pub context: Value,
    /// Who it acts as ([`effective_authorization`]).
    pub authorization: Value,
    /// When the event happened: the run replays against this.
    pub occurred_at: Timestamp,
}

/// Who a run acts as: the event's authorization, unless it is empty (`null`
/// or `{}`: the emitter named nobody), then the activation's snapshot, which
/// is meant for occurrences with no human behind them (a schedule tick).
pub fn effective_authorization<'a>(event: &'a Value, snapshot: &'a Value) -> &'a Value {
    let empty = match event {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    };
    if empty { snapshot } else { event }
}

/// An event checked against the limits, its JSON as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedEvent {
    /// The payload.
    pub data: String,
    /// The context.
    pub context: String,
    /// The authorization.
    pub authorization: String,
}

impl InputLimits {
    /// Checks a workflow to create (app, scope, name).
    pub fn check_workflow(&self, workflow: &NewWorkflow) -> Result<(), Error> {
        self.check_key(field::APP_ID, &workflow.app_id)?;
        self.check_key(field::SCOPE_ID, &workflow.scope_id)?;
        self.check_key(field::WORKFLOW, &workflow.name)
    }

    /// Checks a version to publish and answers its definition as JSON text.
    pub fn encode_published_version(&self, version: &NewPublishedVersion) -> Result<String, Error> {
        self.check_key(field::GRAPH_HASH, &version.hash)?;
        self.encode(field::WORKFLOW_DEFINITION, &version.definition)
    }

    /// Checks an activation to create and answers its authorization as
    /// JSON text.
    pub fn encode_activation(&self, activation: &NewActivation) -> Result<String, Error> {
        self.check_key(field::EVENT_TYPE, &activation.event_type)?;
        self.encode(field::AUTHORIZATION, &activation.authorization)
    }

    /// Checks an event to record (app, scope, type, dedupe key, and its
    /// JSON) and answers its JSON as text. The data is checked as run input
    /// too, since every run it starts takes it as such.
    pub fn encode_event(&self, event: &NewEvent) -> Result<EncodedEvent, Error> {
        self.check_key(field::APP_ID, &event.app_id)?;
        self.check_key(field::SCOPE_ID, &event.scope_id)?;
        self.check_key(field::EVENT_TYPE, &event.event_type)?;
        if let Some(key) = &event.dedupe_key {
            self.check_key(field::DEDUPE_KEY, key)?;
        }
        Ok(EncodedEvent {
            data: self.encode(field::EVENT_DATA, &event.data)?,
            context: self.encode(field::EVENT_CONTEXT, &event.context)?,
            authorization: self.encode(field::AUTHORIZATION, &event.authorization)?,
        })
    }
}

impl Dismantle for NewEvent {
    fn dismantle(self) {
        [self.data, self.context, self.authorization]
            .into_iter()
            .for_each(dismantle_json);
    }
}

impl Dismantle for NewPublishedVersion {
    fn dismantle(self) {
        dismantle_json(self.definition);
    }
}

impl Dismantle for NewActivation {
    fn dismantle(self) {
        dismantle_json(self.authorization);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workflow() -> Workflow {
        Workflow {
            id: WorkflowId::generate(),
            app_id: "app".into(),
            scope_id: "scope".into(),
            name: "wf".into(),
            enabled: true,
            active_version: Some(PublishedVersionId::generate()),
            created_at: Timestamp::EPOCH,
        }
    }

    fn activation(w: &Workflow) -> Activation {
        Activation {
            id: ActivationId::generate(),
            workflow: w.id,
            version: w.active_version.unwrap(),
            event_type: "app.tick".into(),
            enabled: true,
            authorization: json!({"as": "system"}),
            created_at: Timestamp::EPOCH,
        }
    }

    fn event() -> Event {
        NewEvent::new("app", "scope", "app.tick", json!({}))
            .into_event(EventId::generate(), Timestamp::EPOCH)
    }

    #[test]
    fn dispatch_batch_sizes() {
        let rows = [
            (0, false),
            (1, true),
            (64, true),
            (MAX_DISPATCH_BATCH, true),
            (MAX_DISPATCH_BATCH + 1, false),
            (u32::MAX, false),
        ];
        for (n, accepted) in rows {
            match check_dispatch_batch(n) {
                Ok(()) => assert!(accepted, "{n} accepted"),
                Err(Error::InvalidInput(crate::error::InvalidInput::OutOfRange {
                    field, ..
                })) => {
                    assert!(!accepted, "{n} refused");
                    assert_eq!(field, "dispatch batch");
                }
                Err(other) => panic!("{n}: {other:?}"),
            }
        }
    }

    type Tweak = fn(&mut Workflow, &mut Activation, &mut Event);

    #[test]
    fn matching_table() {
        let w = workflow();
        let a = activation(&w);
        let rows: [(&str, Tweak, bool); 8] = [
            ("as is", |_, _, _| {}, true),
            ("disabled", |_, a, _| a.enabled = false, false),
            ("other type", |_, _, e| e.event_type = "x".into(), false),
            ("other app", |_, _, e| e.app_id = "x".into(), false),
            ("other scope", |_, _, e| e.scope_id = "x".into(), false),
            (
                "inactive version",
                |w, _, _| w.active_version = Some(PublishedVersionId::generate()),
                false,
            ),
            (
                "other target",
                |_, _, e| e.target_workflow = Some(WorkflowId::generate()),
                false,
            ),
            (
                "this target",
                |w, _, e| e.target_workflow = Some(w.id),
                true,
            ),
        ];
        for (name, tweak, expected) in rows {
            let (mut w, mut a, mut e) = (w.clone(), a.clone(), event());
            tweak(&mut w, &mut a, &mut e);
            assert_eq!(a.matches(&w, &e), expected, "{name}");
        }
    }

    #[test]
    fn empty_authorization_falls_back_to_the_snapshot() {
        let snapshot = json!({"as": "system"});
        let rows = [
            (json!({}), &snapshot),
            (Value::Null, &snapshot),
            (json!({"as": "ann"}), &json!({"as": "ann"})),
            (json!("ann"), &json!("ann")),
        ];
        for (given, expected) in &rows {
            assert_eq!(effective_authorization(given, &snapshot), *expected);
        }
    }

    #[test]
    fn a_delivery_starts_the_keyed_run() {
        let e = event();
        let w = workflow();
        let a = activation(&w);
        let d = Delivery {
            event: e.id,
            activation: a.id,
            workflow: w.id,
            workflow_name: w.name.clone(),
            version: a.version,
            version_hash: "h1".into(),
            authorization: a.authorization.clone(),
            run: RunId::generate(),
        };
        let run = d.new_run(&e);
        assert_eq!(
            run.idempotency_key,
            Some(format!("event:{}:{}", e.id, a.id))
        );
        assert_eq!(
            (run.workflow.as_str(), run.graph_hash.as_deref()),
            ("wf", Some("h1"))
        );
        assert_eq!(d.cause(&e).authorization, json!({"as": "system"}));
    }

    #[test]
    fn only_due_matched_live_events_are_pending() {
        let mut e = event();
        assert!(!e.is_pending(Timestamp::EPOCH), "matched nothing");
        e.matched = 1;
        assert!(e.is_pending(Timestamp::EPOCH));
        e.dispatch_after = Timestamp::from_millis(1);
        assert!(!e.is_pending(Timestamp::EPOCH));
        e.dispatch_after = Timestamp::EPOCH;
        e.dead_lettered_at = Some(Timestamp::EPOCH);
        assert!(!e.is_pending(Timestamp::EPOCH));
    }

    #[test]
    fn an_emit_stamps_by_what_matched_and_how_it_dispatches() {
        let now = Timestamp::from_micros(7);
        // (matched, dispatch) -> (dispatched at, attempts, starts the runs)
        let rows = [
            (0, Dispatch::Now, Some(now), 0, false),
            (0, Dispatch::Deferred, Some(now), 0, false),
            (2, Dispatch::Now, Some(now), 1, true),
            (2, Dispatch::Deferred, None, 0, false),
        ];
        for (matched, dispatch, dispatched_at, attempts, starts) in rows {
            let mut e = event();
            assert_eq!(e.stamp_emitted(matched, dispatch, now), starts);
            assert_eq!(
                (e.matched as usize, e.dispatched_at, e.attempts),
                (matched, dispatched_at, attempts),
                "{matched} matched, {dispatch:?}"
            );
        }
    }
}
