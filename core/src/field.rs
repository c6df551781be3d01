//! The names input checks give the fields they refuse.
//!
//! Each is written once here and read by the check that refuses it, so an
//! [`InvalidInput`](crate::error::InvalidInput) names a field the same way
//! on every backend and in every port.

/// `app id`.
pub const APP_ID: &str = "app id";
/// `authorization`.
pub const AUTHORIZATION: &str = "authorization";
/// `branch`.
pub const BRANCH: &str = "branch";
/// `child input`.
pub const CHILD_INPUT: &str = "child input";
/// `child key`.
pub const CHILD_KEY: &str = "child key";
/// `dedupe key`.
pub const DEDUPE_KEY: &str = "dedupe key";
/// `effect key`.
pub const EFFECT_KEY: &str = "effect key";
/// `effect outcome`.
pub const EFFECT_OUTCOME: &str = "effect outcome";
/// `event context`.
pub const EVENT_CONTEXT: &str = "event context";
/// `event data`.
pub const EVENT_DATA: &str = "event data";
/// `event type`.
pub const EVENT_TYPE: &str = "event type";
/// `findings`.
pub const FINDINGS: &str = "findings";
/// `function`.
pub const FUNCTION: &str = "function";
/// `goals`.
pub const GOALS: &str = "goals";
/// `graph hash`.
pub const GRAPH_HASH: &str = "graph hash";
/// `idempotency key`.
pub const IDEMPOTENCY_KEY: &str = "idempotency key";
/// `intents`.
pub const INTENTS: &str = "intents";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `persona`.
pub const PERSONA: &str = "persona";
/// `run output`.
pub const RUN_OUTPUT: &str = "run output";
/// `run budget`.
pub const RUN_BUDGET: &str = "run budget";
/// `run input`.
pub const RUN_INPUT: &str = "run input";
/// `scope id`.
pub const SCOPE_ID: &str = "scope id";
/// `signal name`.
pub const SIGNAL_NAME: &str = "signal name";
/// `signal payload`.
pub const SIGNAL_PAYLOAD: &str = "signal payload";
/// `started by`.
pub const STARTED_BY: &str = "started by";
/// `state key`.
pub const STATE_KEY: &str = "state key";
/// `state value`.
pub const STATE_VALUE: &str = "state value";
/// `step error`.
pub const STEP_ERROR: &str = "step error";
/// `step input`.
pub const STEP_INPUT: &str = "step input";
/// `step timings`.
pub const STEP_TIMINGS: &str = "step timings";
/// `step name`.
pub const STEP_NAME: &str = "step name";
/// `step result`.
pub const STEP_RESULT: &str = "step result";
/// `tally`.
pub const TALLY: &str = "tally";
/// `transcript entry`.
pub const TRANSCRIPT_ENTRY: &str = "transcript entry";
/// `worker`.
pub const WORKER: &str = "worker";
/// `version source`.
pub const VERSION_SOURCE: &str = "version source";
/// `workflow`.
pub const WORKFLOW: &str = "workflow";
/// `workflow definition`.
pub const WORKFLOW_DEFINITION: &str = "workflow definition";
/// `workflow graph`.
pub const WORKFLOW_GRAPH: &str = "workflow graph";
/// `children`.
pub const CHILDREN: &str = "children";
/// `claim batch`.
pub const CLAIM_BATCH: &str = "claim batch";
/// `claim timeout`.
pub const CLAIM_TIMEOUT: &str = "claim timeout";
/// `failure reason`.
pub const FAILURE_REASON: &str = "failure reason";
/// `lease`.
pub const LEASE: &str = "lease";
/// `retry delay`.
pub const RETRY_DELAY: &str = "retry delay";
/// `wait`.
pub const WAIT: &str = "wait";
