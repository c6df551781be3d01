//! [`Harness`]: what the conformance suite needs from a backend beyond the
//! store ports, and [`MemoryHarness`], the harness of the reference backend.

use std::future::Future;
use std::sync::Arc;

use flowstate_core::ports::Store;
use flowstate_core::{RunId, StepId};

use crate::clock::ManualClock;
use crate::memory::MemoryStore;

/// One backend under test, freshly made for one case.
///
/// The suite builds a new harness for every case (through the async factory
/// given to [`conformance_suite!`](crate::conformance_suite)) and drops it
/// when the case ends, so a harness must own an empty store of its own: a
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
///   (pass `Arc<ManualClock>` where the backend takes an `Arc<dyn Clock>`);
///
/// and, if it can (each is a hook with a default; [`hooks`](Self::hooks)
/// says which it has, and the cases needing a missing one are skipped):
///
/// - a way to delete one history row behind the store's back, for the cases
///   about a transition that finds no history row to update;
/// - a fault: every write of a history row fails while it is on (a trigger
///   that raises, on SQL), for the cases that check a refused claim,
///   transition or retry moved nothing;
/// - a narrower fault: the history writes of one named step fail, for the
///   cases that check a call writing many steps (a batch, an expiry) fails
///   whole rather than keeping the steps it wrote before that one;
/// - a way to count the rows of a run the ports cannot see once it is
///   deleted (its steps, their history, its state), for the deletion cases.
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
/// use flowstate_testkit::{Harness, ManualClock, MemoryStore, RowCounts};
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
///     async fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
///         // A real backend: three `SELECT COUNT(*)`s.
///         self.store.count_rows(run, steps)
///     }
///
///     async fn teardown(self) {
///         // A real backend: drop the database.
///     }
/// }
///
/// flowstate_testkit::conformance_suite!(mine, MyHarness::create());
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

    /// Which of the hooks below this harness implements: all of them
    /// by default. A case that needs a hook the harness leaves out is
    /// skipped (it says so on stderr and passes), so a harness without
    /// hooks still runs every other case; [`StoreHarness`](crate::StoreHarness)
    /// answers [`Hooks::NONE`].
    fn hooks(&self) -> Hooks {
        Hooks::ALL
    }

    /// Deletes the history row of `attempt` of `step`, bypassing the ports
    /// (for SQL: `DELETE FROM <history> WHERE step = ? AND attempt = ?`).
    /// Panics if it cannot; by default, panics saying the hook is missing
    /// (leave it out of [`hooks`](Self::hooks) instead).
    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let _ = (step, attempt);
        async { missing_hook("delete_history_row") }
    }

    /// With `fail` true, makes every later insert or update of a history row
    /// fail inside the store's own statement or transaction (for SQL: a
    /// trigger on the history table that raises), until called again with
    /// `false`. The store must then answer an error and leave the step as it
    /// was. Panics if it cannot; by default, panics saying the hook is
    /// missing.
    fn fail_history_writes(&self, fail: bool) -> impl Future<Output = ()> + Send {
        let _ = fail;
        async { missing_hook("fail_history_writes") }
    }

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
    /// way, so the cases read the same. Panics if it cannot; by default,
    /// panics saying the hook is missing.
    fn fail_history_writes_of(&self, step: Option<StepId>) -> impl Future<Output = ()> + Send {
        let _ = step;
        async { missing_hook("fail_history_writes_of") }
    }

    /// Counts, bypassing the ports, the rows `run` owns: steps with its id,
    /// history rows of `steps`, and state keys with its id. After
    /// [`delete_run`](flowstate_core::ports::RunStore::delete_run) every count must
    /// be zero. By default, panics saying the hook is missing.
    fn count_rows(&self, run: RunId, steps: &[StepId]) -> impl Future<Output = RowCounts> + Send {
        let _ = (run, steps);
        async { missing_hook("count_rows") }
    }

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

/// The hooks a [`Harness`] implements beyond the store
/// ([`Harness::hooks`]): a case that needs one the harness leaves out is
/// skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one independent yes/no per hook, read by name in the suites"
)]
pub struct Hooks {
    /// [`Harness::delete_history_row`] works.
    pub delete_history_row: bool,
    /// [`Harness::fail_history_writes`] works.
    pub fail_history_writes: bool,
    /// [`Harness::fail_history_writes_of`] works.
    pub fail_history_writes_of: bool,
    /// [`Harness::count_rows`] works.
    pub count_rows: bool,
}

impl Hooks {
    /// Every hook.
    pub const ALL: Self = Self {
        delete_history_row: true,
        fail_history_writes: true,
        fail_history_writes_of: true,
        count_rows: true,
    };

    /// No hook: the cases that need one are skipped.
    pub const NONE: Self = Self {
        delete_history_row: false,
        fail_history_writes: false,
        fail_history_writes_of: false,
        count_rows: false,
    };
}

/// The default body of a hook the harness did not implement.
fn missing_hook(name: &str) -> ! {
    panic!(
        "this harness does not implement Harness::{name}: implement it, or answer \
         `Hooks {{ {name}: false, .. }}` from Harness::hooks so the cases that need it are skipped"
    )
}

/// How many rows a run owns, counted behind the ports (see
/// [`Harness::count_rows`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounts {
    /// Steps of the run.
    pub steps: u64,
    /// History rows of the steps asked about.
    pub history: u64,
    /// State keys of the run.
    pub state: u64,
}

/// The harness of [`MemoryStore`]: a fresh store reading a fresh
/// [`ManualClock`].
#[derive(Debug)]
pub struct MemoryHarness {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

impl MemoryHarness {
    /// An empty store on a clock standing at [`ManualClock::START`].
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new());
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        Self { store, clock }
    }
}

impl MemoryHarness {
    /// The clock the store reads, shared.
    pub(crate) fn clock_arc(&self) -> Arc<ManualClock> {
        Arc::clone(&self.clock)
    }
}

impl Default for MemoryHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness for MemoryHarness {
    type Store = MemoryStore;

    fn store(&self) -> &Arc<MemoryStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn delete_history_row(&self, step: StepId, attempt: u32) -> impl Future<Output = ()> + Send {
        let store = Arc::clone(&self.store);
        async move {
            let removed = store.remove_history_row(step, attempt);
            assert!(
                removed,
                "no history row for attempt {attempt} of step {step}"
            );
        }
    }

    async fn fail_history_writes(&self, fail: bool) {
        self.store.fail_history_writes(fail);
    }

    async fn fail_history_writes_of(&self, step: Option<StepId>) {
        self.store.fail_history_writes_of(step);
    }

    async fn count_rows(&self, run: RunId, steps: &[StepId]) -> RowCounts {
        self.store.count_rows(run, steps)
    }
}
