//! [`MemoryStore`]: the in-memory reference backend.
//!
//! It is the executable form of the port docs, not a database stand-in: one
//! mutex over all state makes every port method trivially atomic, so what
//! is left to read is what each method does. It asks `flowstate-core` for
//! every decision and every check (the claim, the transition tables, the
//! input limits) and a [`Clock`] for every timestamp, and passes the same
//! conformance suite as every other backend.

mod batch;
mod definitions;
mod effects;
mod events;
mod fenced;
mod harness;
mod leases;
mod recovery;
mod retention;
mod runs;
mod steps;
mod versions;
mod virtual_users;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use flowstate_core::step_claim::{DEFAULT_CLAIM_TIMEOUT, effective_timeout};
use flowstate_core::{
    Clock, Error, HistoryId, InputLimits, Result, Run, RunId, Step, StepAttempt, StepId,
    StepStatus, SystemClock, Timestamp, WorkflowVersion,
};
use serde_json::{Map, Value};

use crate::harness::{Pick, RowCounts};

pub use harness::MemoryHarness;

/// The in-memory reference backend: every port, behind one mutex.
///
/// ```
/// use std::sync::Arc;
/// use flowstate_core::InputLimits;
/// use flowstate_testkit::{ManualClock, MemoryStore};
///
/// let clock = Arc::new(ManualClock::new());
/// let store = MemoryStore::with_clock(clock.clone()).with_limits(InputLimits::default());
/// assert_eq!(store.limits(), InputLimits::default());
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    tables: Arc<Mutex<Tables>>,
    clock: Arc<dyn Clock>,
    /// The store's own clock for leases (see `leases.rs`): shared by every
    /// handle on the same tables, whatever each handle's `clock` says.
    lease_clock: Arc<dyn Clock>,
    limits: InputLimits,
    /// How long a claim holds a step with no claim timeout of its own.
    claim_timeout: Duration,
}

/// Everything the store holds, as the tables of a database would.
#[derive(Debug, Default)]
struct Tables {
    runs: HashMap<RunId, Run>,
    run_by_key: HashMap<String, RunId>,
    run_state: HashMap<RunId, Map<String, Value>>,
    steps: HashMap<StepId, Step>,
    step_by_name: HashMap<(RunId, String), StepId>,
    history: HashMap<(StepId, u32), StepAttempt>,
    versions: HashMap<(String, String), WorkflowVersion>,
    /// The test fault of [`MemoryStore::fail_history_writes`].
    history_writes_fail: bool,
    /// The test fault of [`MemoryStore::fail_history_writes_of`].
    history_writes_fail_of: Option<StepId>,
    /// The test fault of [`MemoryStore::abort_after_pick`], until it
    /// strikes.
    abort_after_pick: Option<Pick>,
    virtual_users: virtual_users::VirtualUserTables,
    events: events::EventTables,
    leases: HashMap<RunId, leases::LeaseRow>,
    signals: HashMap<(RunId, String), Value>,
    effects: HashMap<(RunId, String), effects::EffectRow>,
}

impl MemoryStore {
    /// An empty store on the system clock, with the default limits.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store reading `clock`, with the default limits.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            tables: Arc::new(Mutex::new(Tables::default())),
            lease_clock: Arc::clone(&clock),
            clock,
            limits: InputLimits::default(),
            claim_timeout: DEFAULT_CLAIM_TIMEOUT,
        }
    }

    /// The same store, holding a step with no claim timeout of its own for
    /// `timeout` per claim ([`flowstate_core::step_claim`]; by default
    /// [`DEFAULT_CLAIM_TIMEOUT`]).
    #[must_use]
    pub fn with_claim_timeout(mut self, timeout: Duration) -> Self {
        self.claim_timeout = timeout;
        self
    }

    /// The same store, applying `limits` to names, keys, delays and JSON.
    #[must_use]
    pub fn with_limits(mut self, limits: InputLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits the store applies.
    pub fn limits(&self) -> InputLimits {
        self.limits
    }

    /// Deletes the history row of `attempt` of `step` behind the ports' back,
    /// as a crash or a hand edit could; answers whether there was one. A test
    /// hook ([`Hooks::delete_history_row`](crate::Hooks::delete_history_row)).
    pub fn remove_history_row(&self, step: StepId, attempt: u32) -> bool {
        self.lock().history.remove(&(step, attempt)).is_some()
    }

    /// While `fail` is true, every write that would touch a history row
    /// (insert, claim, transition, retry) fails with a retryable backend
    /// error and changes nothing: a test hook
    /// ([`Hooks::fail_history_writes`](crate::Hooks::fail_history_writes)).
    pub fn fail_history_writes(&self, fail: bool) {
        self.lock().history_writes_fail = fail;
    }

    /// While `step` is `Some`, the history writes of that step fail: a test
    /// hook ([`Hooks::fail_history_writes_of`](crate::Hooks::fail_history_writes_of)).
    /// This store checks the fault before a call changes anything, when it
    /// does not yet know which steps the call will write, so it fails every
    /// write that would touch a history row, as
    /// [`fail_history_writes`](Self::fail_history_writes) does: under its
    /// one lock a call cannot stop half way, so which of its steps' rows
    /// fails changes nothing the ports can read.
    pub fn fail_history_writes_of(&self, step: Option<StepId>) {
        self.lock().history_writes_fail_of = step;
    }

    /// With `Some(pick)`, the next call of that kind that picked something
    /// fails with a retryable backend error once it has picked and before
    /// it changes anything, as a transaction aborted between its pick and
    /// its write would; the fault then ends (it strikes once). `None` ends
    /// it unstruck. A test hook
    /// ([`Hooks::abort_after_pick`](crate::Hooks::abort_after_pick)).
    pub fn abort_after_pick(&self, pick: Option<Pick>) {
        self.lock().abort_after_pick = pick;
    }

    /// The rows `run` owns, counted behind the ports: a test hook
    /// ([`Hooks::count_rows`](crate::Hooks::count_rows)).
    pub fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
        let tables = self.lock();
        let count = |n: usize| n as u64;
        RowCounts {
            steps: count(tables.steps.values().filter(|s| s.run == run).count()),
            history: count(
                tables
                    .history
                    .keys()
                    .filter(|(step, _)| steps.contains(step))
                    .count(),
            ),
            state: count(tables.run_state.get(&run).map_or(0, Map::len)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        // A panic while the lock was held can only come from a bug in this
        // file; the state it left is not worth serving.
        self.tables.lock().expect("memory store lock poisoned")
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The claim deadline a move of `step` to running sets now: the lease
    /// clock's now plus the step's own claim timeout or the store's.
    fn claim_deadline(&self, step: &Step) -> Timestamp {
        let timeout = effective_timeout(step.claim_timeout, self.claim_timeout);
        self.lease_clock.now().plus(timeout)
    }

    /// Refuses work on a settled run ([`Error::RunSettled`]); an unknown
    /// run is [`Error::RunNotFound`].
    fn unsettled(tables: &Tables, run: RunId) -> Result<()> {
        let status = tables.run(run)?.status;
        if status.is_settled() {
            return Err(Error::RunSettled { run, status });
        }
        Ok(())
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Tables {
    fn run(&self, id: RunId) -> Result<&Run> {
        self.runs.get(&id).ok_or(Error::RunNotFound(id))
    }

    fn step(&self, id: StepId) -> Result<&Step> {
        self.steps.get(&id).ok_or(Error::StepNotFound(id))
    }

    fn step_by_name(&self, run: RunId, name: &str) -> Result<&Step> {
        self.step_by_name
            .get(&(run, name.to_owned()))
            .and_then(|id| self.steps.get(id))
            .ok_or_else(|| Error::StepNameNotFound {
                run,
                name: name.to_owned(),
            })
    }

    /// Fails if a test fault ([`MemoryStore::fail_history_writes`],
    /// [`MemoryStore::fail_history_writes_of`]) is on: called before a
    /// write that touches history changes anything.
    fn check_history_writes(&self) -> Result<()> {
        if self.history_writes_fail || self.history_writes_fail_of.is_some() {
            return Err(Error::backend(
                "history write",
                false,
                "history writes fail (test fault)",
            ));
        }
        Ok(())
    }

    /// Fails `operation` if the test fault of
    /// [`MemoryStore::abort_after_pick`] is set for `pick`, ending it:
    /// called once a call has picked, before it changes anything.
    fn strike_after_pick(&mut self, pick: Pick, operation: &'static str) -> Result<()> {
        if self.abort_after_pick != Some(pick) {
            return Ok(());
        }
        self.abort_after_pick = None;
        Err(Error::backend(
            operation,
            true,
            "the transaction was aborted after its pick (test fault)",
        ))
    }

    /// Writes `step` back and moves the history row of its current attempt
    /// to its status, creating the row if it is missing. Callers check
    /// [`Tables::check_history_writes`] before they change anything, and
    /// set the claim deadline of a step they move to running; any other
    /// status has none.
    fn save_step(&mut self, mut step: Step, now: Timestamp) {
        if step.status != StepStatus::Running {
            step.claimed_until = None;
        }
        let row = self
            .history
            .entry((step.id, step.attempt))
            .or_insert_with(|| new_attempt(&step, now));
        row.status = step.status;
        match step.status {
            StepStatus::Pending => {}
            StepStatus::Scheduled => row.scheduled_at = Some(now),
            StepStatus::Running => row.running_at = Some(now),
            StepStatus::Succeeded => {
                row.succeeded_at = Some(now);
                row.result.clone_from(&step.result);
            }
            StepStatus::Failed => {
                row.failed_at = Some(now);
                row.error.clone_from(&step.error);
            }
        }
        self.steps.insert(step.id, step);
    }
}

/// A blank history row for the current attempt of `step`, begun at `now`.
fn new_attempt(step: &Step, now: Timestamp) -> StepAttempt {
    StepAttempt {
        id: HistoryId::generate(),
        step: step.id,
        step_name: step.name.clone(),
        attempt: step.attempt,
        status: step.status,
        result: None,
        error: None,
        created_at: now,
        scheduled_at: None,
        running_at: None,
        succeeded_at: None,
        failed_at: None,
    }
}
