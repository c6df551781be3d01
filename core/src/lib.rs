//! flowstate-core: the domain types, the pure decisions and the async store
//! ports of flowstate.
//!
//! This crate doesn't do I/O. It opens no connection, reads no clock and draws
//! no random number itself: every decision here is a function of its inputs,
//! with the time and the randomness passed in. The backends that talk to a
//! database live in `flowstate-store-diesel` (or in a user's own crate) and
//! implement the traits in [`ports`]; the policy crates (`flowstate-events`,
//! `flowstate-recovery`, `flowstate-virtual-users`) are generic over those
//! traits. `flowstate-testkit` holds the suite that proves a backend keeps the
//! guarantees each port method documents.
//!
//! A map of the modules:
//!
//! | module | what it decides or describes |
//! | --- | --- |
//! | [`ids`], [`time`] | uuid v7 ids, microsecond UTC timestamps, the clock port |
//! | [`status`] | run and step status machines, one transition table each; virtual-user run statuses |
//! | [`claim`] | what a claim does for each step status ([`ClaimDecision`]) |
//! | [`step_claim`] | claims that expire: deadlines, the [`StepClaim`] fence, what recovery takes back |
//! | [`retry`] | retry policy per step, attempt numbering |
//! | [`schedule`] | `next_run_at`, `is_due`, stale-run reaping, leases |
//! | [`children`] | child runs created in bulk, keyed per parent ([`ports::ChildRunStore`]) |
//! | [`effects`] | the effect journal: begin, settle, stranded ([`ports::EffectJournal`]) |
//! | [`wait`] | sleeps and named signals of leased runs ([`ports::RunWaitStore`]) |
//! | [`lease`] | run leases: fencing tokens, failure limit, one clock ([`ports::RunLeaseStore`]) |
//! | [`backoff`] | the shared per-run redispatch backoff, event dispatch backoff |
//! | [`batch`] | batch claims and completions for worker pools: what a batch takes |
//! | [`idempotency`] | idempotency keys for materialised runs |
//! | [`retention`] | what a prune may delete, by [`PruneKind`] ([`ports::RetentionStore`]) |
//! | [`limits`] | the limits every backend applies to names, keys, delays and JSON |
//! | [`events`] | workflows, versions, activations, events, deliveries; matching and materialisation rules |
//! | [`records`] | the rows: runs (with their output), steps, attempts, steps run inline ([`InlineStep`]), versions (with their source and [`VersionStatus`]), queries |
//! | [`summary`] | pure folds of steps and history: graph state, status summary |
//! | [`error`] | the one error type the ports return |
//! | [`ports`] | the async store traits a backend implements, one file per family: the whole contract |
//! | [`backend`] | helpers for backend authors, not part of the ports' contract |
//! | [`virtual_users`] | personas' schedules (with their goals and [`RunBudget`]), their runs and transcripts ([`ports::ScheduleStore`], [`ports::VirtualUserRunStore`]); a run keeps its goals, seed, starter ([`NewVirtualUserRun`]), [`RunTally`], memory, intents and [`StopReason`] |

pub mod backend;
pub mod backoff;
pub mod batch;
pub mod children;
pub mod claim;
pub mod effects;
pub mod error;
pub mod events;
pub mod field;
pub mod idempotency;
pub mod ids;
pub mod lease;
pub mod limits;
pub mod ports;
pub mod records;
pub mod recovery;
pub mod retention;
pub mod retry;
pub mod schedule;
pub mod status;
pub mod step_claim;
pub mod summary;
pub mod time;
pub mod virtual_users;
pub mod wait;

pub use backoff::{EventDispatchBackoff, EventDispatchOutcome, RedispatchBackoff};
pub use batch::{BatchClaim, Completion};
pub use children::NewChild;
pub use claim::{ClaimDecision, ClaimInput, ClaimOutcome, NotClaimable};
pub use effects::{EffectBegin, StrandedEffect};
pub use error::{Error, Result};
pub use events::{
    Activation, Delivery, Dispatch, Emission, Event, EventFilter, NewActivation, NewEvent,
    NewPublishedVersion, NewWorkflow, NextDispatch, PendingEvent, PublishedVersion, RunCause,
    Workflow,
};
pub use ids::{
    ActivationId, EventId, HistoryId, PublishedVersionId, RunId, StepId, VersionId,
    VirtualUserRunId, WorkflowId,
};
pub use lease::{LeaseState, Release, Released, RunLease, RunOutcome};
pub use limits::{EncodedStep, InputLimits};
pub use records::{
    GraphState, InlineOutcome, InlineStep, Inserted, NewRun, NewStep, NewWorkflowVersion, Page,
    Run, RunCursor, RunQuery, Step, StepAttempt, StepSummary, StepTransition, WorkflowVersion,
};
pub use recovery::{StalledRun, UndispatchedStep};
pub use retention::PruneKind;
pub use retry::RetryPolicy;
pub use status::{
    RetryStart, RunStatus, StatusKind, StepStatus, VersionStatus, VirtualUserRunStatus,
};
pub use step_claim::{ExpiredClaim, StepClaim};
pub use time::{Clock, SystemClock, Timestamp};
pub use virtual_users::{
    BudgetLimit, NewSchedule, NewVirtualUserRun, RunBudget, RunTally, Schedule, SchedulePatch,
    StopReason, TranscriptEntry, TranscriptPage, VirtualUserRun, VirtualUserRunQuery,
};
pub use wait::Wait;
