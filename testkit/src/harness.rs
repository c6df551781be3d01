//! [`Harness`]: what the conformance suite needs from a backend beyond the
//! store ports (the reference backend's, `MemoryHarness`, is in `memory/`).

use std::future::Future;
use std::sync::Arc;

use flowstate_core::ports::Store;
use flowstate_core::{RunId, StepId};

use crate::clock::ManualClock;

/// One backend under test, freshly made for one case.
///
/// The suite builds a new harness for every case (through the async factory
/// given to [`suite!`](crate::suite)) and drops it when the case ends, so a harness must own an empty store of its own: a
/// database (or schema, or file) per harness, not per process. A backend
/// that can open such a store for a given clock needs no harness of its
/// own: [`StoreHarness`](crate::StoreHarness) is one. Otherwise it
/// implements this in its own tests, providing:
///
/// - a store built with [`InputLimits::default()`](flowstate_core::InputLimits)
///   (the bad-input cases probe those exact limits) that is shareable across
///   tokio tasks (race cases clone the `Arc` into many tasks and need many
///   connections at once);
/// - a [`ManualClock`] that the store reads for every timestamp it writes
///   (pass `Arc<ManualClock>` where the backend takes an `Arc<dyn Clock>`).
///
/// A harness that can also reach behind the store implements [`Hooks`]
/// too, and the cases that need those hooks are stamped for it (the
/// `hooks` family of [`suite!`](crate::suite)); a harness without them
/// does not get those tests at all.
///
/// The clock: the cases move the [`ManualClock`] and read back the times
/// the store stamped, so a store must stamp from the clock it was given. A
/// backend that stamps some times with its database's clock (run leases
/// will want that, so that workers' clocks never decide who holds a run)
/// runs the kit by giving its harness control of that clock too: for
/// example an offset added to the database's `now()` that the harness sets
/// from the `ManualClock` before each call, or a session setting the
/// database reads in place of its wall clock.
///
/// A backend's harness, with the memory store standing in for a store on a
/// database made for this harness alone:
///
/// ```
/// use std::sync::Arc;
///
/// use flowstate_core::{RunId, StepId};
/// use flowstate_testkit::{Harness, Hooks, ManualClock, MemoryStore, Pick, RowCounts};
///
/// struct MyHarness {
///     store: Arc<MemoryStore>,
///     clock: Arc<ManualClock>,
/// }
///
/// impl MyHarness {
///     async fn create() -> Self {
///         let clock = Arc::new(ManualClock::new());
///         // A real backend: create a database named for this harness,
///         // migrate it, and build its store reading `clock.clone()`.
///         let store = Arc::new(MemoryStore::with_clock(clock.clone()));
///         Self { store, clock }
///     }
/// }
///
/// impl Harness for MyHarness {
///     type Store = MemoryStore;
///
///     fn store(&self) -> &Arc<MemoryStore> {
///         &self.store
///     }
///
///     fn clock(&self) -> &ManualClock {
///         &self.clock
///     }
///
///     async fn teardown(self) {
///         // A real backend: drop the database.
///     }
/// }
///
/// impl Hooks for MyHarness {
///     async fn delete_history_row(&self, step: StepId, attempt: u32) {
///         // A real backend: `DELETE FROM <history> WHERE step = $1 AND attempt = $2`.
///         assert!(self.store.remove_history_row(step, attempt));
///     }
///
///     async fn fail_history_writes(&self, fail: bool) {
///         // A real backend: create (or drop) a trigger on its history table
///         // that raises on every insert and update.
///         self.store.fail_history_writes(fail);
///     }
///
///     async fn fail_history_writes_of(&self, step: Option<StepId>) {
///         // A real backend: the same trigger, raising only for `step`'s rows.
///         self.store.fail_history_writes_of(step);
///     }
///
///     async fn abort_after_pick(&self, pick: Option<Pick>) {
///         // A real backend: create (or drop) a trigger on `pick.table()`
///         // that raises the dialect's conflict error.
///         self.store.abort_after_pick(pick);
///     }
///
///     async fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
///         // A real backend: three `SELECT COUNT(*)`s.
///         self.store.count_rows(run, steps)
///     }
/// }
///
/// flowstate_testkit::suite!(mine, MyHarness::create(), [runs, steps, versions, hooks]);
/// # fn main() {}
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `flowstate_testkit::Harness`",
    label = "a suite's factory must be a future of a `Harness`",
    note = "a backend that opens a fresh store for a given clock can pass `flowstate_testkit::StoreHarness::create(open)`"
)]
pub trait Harness: Send + Sync + 'static {
    /// The backend under test.
    type Store: Store + 'static;

    /// The store under test: empty when the harness is made.
    fn store(&self) -> &Arc<Self::Store>;

    /// The clock the store reads. It starts at [`ManualClock::START`] and
    /// only moves when a case moves it.
    fn clock(&self) -> &ManualClock;

    /// Releases what the harness holds (drops its database, say) once a case
    /// has passed. A case that panics skips it, so a backend must not rely on
    /// it for correctness. Does nothing by default.
    fn teardown(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// What a [`Harness`] can do behind the store's back, for the cases that
/// check what the ports cannot show: a transition that finds no history
/// row, a write whose history row fails, the rows a deleted run leaves.
///
/// A harness that implements it lists the `hooks` family in
/// [`suite!`](crate::suite), which then stamps the hook cases of every
/// other family listed; one that does not (such as
/// [`StoreHarness`](crate::StoreHarness)) leaves `hooks` out and gets no
/// test for them, rather than a test that passes without checking. For
/// SQL, each hook is a statement or two on the harness's own connection.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no harness hooks (`flowstate_testkit::Hooks`)",
    label = "the `hooks` family needs a harness that implements `Hooks`",
    note = "implement `Hooks` for the harness, or leave `hooks` out of the suite's families"
)]
pub trait Hooks: Harness {
    /// Deletes the history row of `attempt` of `step`, bypassing the ports
    /// (for SQL: `DELETE FROM <history> WHERE step = ? AND attempt = ?`).
    /// Panics if it cannot.
    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send;

    /// With `fail` true, makes every later insert or update of a history row
    /// fail inside the store's own statement or transaction (for SQL: a
    /// trigger on the history table that raises), until called again with
    /// `false`. The store must then answer an error and leave the step as it
    /// was. Panics if it cannot.
    fn fail_history_writes(&self, fail: bool) -> impl Future<Output = ()> + Send;

    /// With `Some(step)`, makes every later insert or update of a history
    /// row of `step` fail inside the store's own statement or transaction
    /// (for SQL: a trigger on the history table that raises for that step's
    /// rows only), until called again with `None`. A call that writes many
    /// steps and reaches `step` must then answer an error and leave every
    /// step as it was: a backend committing each step on its own would keep
    /// the ones before, which [`fail_history_writes`](Self::fail_history_writes)
    /// cannot show (with every write failing, the first step already
    /// fails). A store that runs each call under one lock may fail every
    /// history write instead (the memory store does): it cannot stop half
    /// way, so the cases read the same. Panics if it cannot.
    fn fail_history_writes_of(&self, step: Option<StepId>) -> impl Future<Output = ()> + Send;

    /// With `Some(pick)`, makes the next call that picks rows of that kind
    /// and then writes them die between the two, as a database aborts a
    /// transaction that lost a conflict (a deadlock victim; on Galera a
    /// certification failure, or a brute-force abort by another node's
    /// commit between two of its statements): the call's transaction is
    /// rolled back with a conflict error, and whatever it picked must be
    /// left as it was, claimable. With `None`, ends the fault. For SQL, a
    /// trigger on the table the call updates ([`Pick`] names it) that
    /// raises the dialect's conflict error on the first row the call
    /// updates, so the call has already read (and, where it does, locked)
    /// its pick.
    ///
    /// The store then either answers a retryable error (one that runs no
    /// transaction again itself, or whose retries met the fault every
    /// time), or, having run its rolled-back transaction again, answers
    /// what it picked, once. Which of the store's retries meet the fault
    /// again is the harness's to say: at least the first call's first
    /// attempt does, and a case ends the fault before it calls again. The
    /// memory store strikes once; the SQL harnesses strike the first update
    /// after the fault is set on PostgreSQL (a sequence counts outside the
    /// transaction), the first of each connection on MySQL (a session
    /// variable does), and every update on SQLite (whose triggers keep
    /// nothing past the transaction they abort, and whose store runs no
    /// transaction again itself). Panics if it cannot.
    fn abort_after_pick(&self, pick: Option<Pick>) -> impl Future<Output = ()> + Send;

    /// Counts, bypassing the ports, the rows `run` owns: steps with its id,
    /// history rows of `steps`, and state keys with its id. After
    /// [`delete_run`](flowstate_core::ports::RunStore::delete_run) every count must
    /// be zero.
    fn count_rows(&self, run: RunId, steps: &[StepId]) -> impl Future<Output = RowCounts> + Send;
}

/// A call that picks rows and then writes them, which
/// [`Hooks::abort_after_pick`] makes die between the two. Each names the
/// table whose update a SQL harness's trigger strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pick {
    /// The batch claim (`claim_batch`): the steps it picked, before they
    /// run (`UPDATE flowstate_steps`).
    Steps,
    /// The run claims (`claim_run`, `claim_runs`): the runs they picked,
    /// before they are leased (`UPDATE flowstate_runs`).
    Runs,
    /// The event lock (`dispatch_event`, `dispatch_next`): the event it
    /// locked, after its runs were written and before it is marked
    /// dispatched (`UPDATE flowstate_events`).
    Events,
    /// The schedule claim (`claim_schedule`, as a virtual-user tick makes
    /// it): the schedule it compared, before its next run is set
    /// (`UPDATE flowstate_virtual_user_schedules`).
    Schedules,
}

impl Pick {
    /// Every pick, in declaration order.
    pub const ALL: [Self; 4] = [Self::Steps, Self::Runs, Self::Events, Self::Schedules];

    /// The table of flowstate's SQL schema (store-diesel's) whose update
    /// the pick's call makes once it has picked: where a SQL harness puts
    /// its trigger.
    pub fn table(self) -> &'static str {
        match self {
            Self::Steps => "flowstate_steps",
            Self::Runs => "flowstate_runs",
            Self::Events => "flowstate_events",
            Self::Schedules => "flowstate_virtual_user_schedules",
        }
    }
}

/// How many rows a run owns, counted behind the ports (see
/// [`Hooks::count_rows`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounts {
    /// Steps of the run.
    pub steps: u64,
    /// History rows of the steps asked about.
    pub history: u64,
    /// State keys of the run.
    pub state: u64,
}
