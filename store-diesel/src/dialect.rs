//! [`Dialect`] and [`Connection`]: the one named seam between the shared
//! code (`crate::ports`, the typed fragments of `crate::sql::typed`) and
//! the three dialect modules (`postgres/`, `mysql/`, `sqlite/`). "What does
//! MySQL do differently?" is answered by its `impl`s of these two traits.
//!
//! What a dialect must provide ([`Dialect`]): its pooled connection type
//! ([`Dialect::Conn`]), how to open a pool of it ([`Dialect::connect`]),
//! and every write whose SQL differs per dialect: the claims (one step,
//! a batch, a batch of run leases), the batch completion, the guarded
//! step transitions, the step insert, the two recovery sweeps (expired
//! step claims, expired run leases), the two writes that need a
//! dialect's own spelling of a multi-row insert (children, transcript
//! chunks), and retention's deletes and their dry-run count. Each takes the dialect's pool and the store's
//! [`StoreConfig`], then its own arguments.
//!
//! What its connection must provide ([`Connection`], each dialect's
//! `connection.rs`): what the typed queries written once in the shared
//! code spell per dialect: the lease clock's SQL, the upsert spelling,
//! whether a skipped insert says so, whether its steps have the
//! `claimable` column, the transaction, the event lock, and every DSL
//! write that needs `RETURNING` or `ON CONFLICT (target)` (the keyed-run
//! and effect inserts, the signal, state and schedule upserts, taking a
//! signal, a run's move, a release, `lease_run`, a step claim's renewal,
//! a tally add), the multi-row inserts of a batched emit (its events
//! and their deliveries; SQLite's in a blocking hop, where diesel writes
//! one statement), and the keyed insert of the runs a transaction
//! materialises from events (one keyed-run insert a run by default,
//! SQLite's one multi-row insert in a blocking hop). The shared bodies
//! see only a connection, so these live on it: a shared query reads a
//! dialect fact off its connection's type (the relay's claimable test,
//! `CLAIMABLE_COLUMN`), not off the store's `Dialect`. The placeholders
//! are each dialect's own, chosen in its `sql.rs` and handed to the
//! shared scaffold of `crate::sql` as text.
//! PostgreSQL and SQLite share one body for each of those writes
//! (`crate::sql::returning`); MySQL's, which write and then read back in
//! one transaction, or say `ON DUPLICATE KEY UPDATE`, are in
//! `mysql/connection.rs`.
//!
//! Why traits: so that what a dialect owes is declared once, in one place,
//! and a dialect that leaves an operation out fails to compile with an
//! error naming the missing method, not with a macro expansion that cannot
//! find a function. They play the part diesel's `SqlDialect` plays for a
//! backend's SQL spelling, and River's driver interface plays for its
//! queue's statements: a named list of what a backend implements.
//!
//! A dialect implements [`Dialect`] with [`wire_dialect!`], in its
//! `mod.rs`: each method is the function of the same name in the dialect's
//! file of the same family (`claim::claim`, `batch::claim_batch`, ...), so
//! the signatures are written here, once, and the three folders hold the
//! same files with the same function names; a function missing from a
//! folder is a compile error naming it.
//!
//! The traits are never used as `dyn` or as a generic bound on the store:
//! the dispatch macros of `crate::backend` match the store's backend and
//! call `<D as Dialect>::op` (or run a typed body on `D::Conn`) for the
//! dialect it holds. They stand in for diesel's `MultiConnection`, which
//! diesel-async lacks; each call is monomorphic, so the futures stay `Send`.
//!
//! The transaction is a trait method too ([`Connection::write_transaction`]):
//! diesel-async's `transaction` by default, SQLite's `BEGIN IMMEDIATE`
//! (a method of diesel-async's wrapper) in its `impl`. diesel-async bounds
//! a transaction's callback with a trait it does not export; [`TxWork`]
//! states the same bound, so the method can forward to either.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use deadpool::managed::Manager;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, PoolError, PoolableConnection,
};

use diesel::QueryResult;
use diesel_async::AsyncConnection;

use flowstate_core::retention::PruneKind;
use flowstate_core::{ClaimOutcome, Result, RunId, RunStatus, StepId};

use crate::config::StoreConfig;
use crate::guard::{Guarded, Inserting};
use crate::health::Watched;
use crate::pool::ConnectionPool;
use crate::rows::effects::EffectRow;
use crate::rows::events::{DeliveryRow, EventRow};
use crate::rows::leases::{Leased, LeasedRunRow};
use crate::rows::signals::SignalRow;
use crate::rows::virtual_users::ScheduleRow;
use crate::rows::{BatchItem, ExpiredRow, RunRow, StateRow, StepRow};
use crate::schema::JsonText;
use crate::sql::typed::LeaseClock;
use crate::sql::{Move, Upsert};

/// The most runs one insert of [`Connection::insert_keyed_runs`] carries
/// (ten columns: 10,000 binds, under every dialect's placeholder limit,
/// SQLite's 32,766 the lowest).
pub(crate) const RUNS_PER_INSERT: usize = 1_000;

/// The pool of a dialect's connections.
pub(crate) type PoolOf<D> = ConnectionPool<<D as Dialect>::Conn>;

/// What a dialect provides to the shared store (see the module doc).
pub(crate) trait Dialect
where
    AsyncDieselConnectionManager<Self::Conn>: Manager<Type = Self::Conn, Error = PoolError>,
{
    /// The pooled connection type: what a [`ConnectionPool`] of this
    /// dialect hands out.
    type Conn: PoolableConnection + Connection + Send + 'static;

    /// Builds the pool for `url` (the URL with its scheme stripped) and
    /// opens one connection, so a bad URL or a server that is down is
    /// reported now. A dialect may change `config` to say what it chose
    /// (SQLite's `:memory:` pool of one).
    async fn connect(url: &str, config: &mut StoreConfig) -> crate::Result<PoolOf<Self>>;

    /// Claims step `name` of `run` for `function`.
    async fn claim(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        run: RunId,
        name: &str,
        function: &str,
    ) -> Result<ClaimOutcome>;

    /// Claims up to `limit` claimable steps (of `function`, if given).
    async fn claim_batch(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        limit: u32,
        function: Option<&str>,
    ) -> Result<Vec<StepRow>>;

    /// Completes a batch of claimed steps; answers the ids it moved.
    async fn complete_batch(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        items: &[BatchItem],
    ) -> Result<HashSet<String>>;

    /// Leases up to `n` runnable runs to `worker` for `lease_for`.
    async fn claim_runs(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        worker: &str,
        n: u32,
        lease_for: Duration,
    ) -> Result<Vec<LeasedRunRow>>;

    /// Fails up to `limit` running steps whose claim ran out.
    async fn expire_step_claims(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        limit: u32,
    ) -> Result<Vec<ExpiredRow>>;

    /// Frees up to `limit` run leases that ran out: (run id, token).
    async fn reap_expired_leases(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        limit: u32,
    ) -> Result<Vec<(String, i64)>>;

    /// Inserts step `row` of `run` (fenced by lease `token`, if given).
    async fn insert_step(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        run: RunId,
        row: &StepRow,
        token: Option<i64>,
    ) -> Result<Inserting>;

    /// Moves step `id` as `step_move` says, if its status (and `attempt`,
    /// if given) still allow it.
    async fn guarded_move(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        id: StepId,
        step_move: Move,
        payload: Option<String>,
        attempt: Option<u32>,
    ) -> Result<Guarded>;

    /// Inserts every child row of `parent` not already stored under its
    /// key; a missing parent is [`flowstate_core::Error::RunNotFound`].
    async fn insert_children(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        parent: RunId,
        rows: Vec<RunRow>,
    ) -> Result<usize>;

    /// Appends `entries` (JSON text) to running virtual-user run `id` at
    /// `now`: the new transcript length, or `None` if no running run `id`
    /// matched.
    async fn append_transcript(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        id: String,
        entries: Vec<String>,
        now: i64,
    ) -> Result<Option<i64>>;

    /// Deletes one batch of at most `limit` settled runs settled before
    /// `cutoff` (microseconds on the stamping clock) with no lease held
    /// and no child unsettled, the decision in the `DELETE`'s own `WHERE`:
    /// how many went.
    async fn prune_runs(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        cutoff: i64,
        limit: i64,
    ) -> Result<u64>;

    /// Deletes one batch of at most `limit` records of `kind` (events,
    /// dead letters or virtual-user runs: not runs) older than `cutoff`:
    /// how many went.
    async fn prune_records(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        kind: PruneKind,
        cutoff: i64,
        limit: i64,
    ) -> Result<u64>;

    /// How many records of `kind` a prune older than `cutoff` would
    /// delete now.
    async fn count_prunable(
        pool: &PoolOf<Self>,
        config: &StoreConfig,
        kind: PruneKind,
        cutoff: i64,
    ) -> Result<u64>;
}

/// What a dialect's connection spells its own way inside the typed queries
/// written once in `crate::ports`, which see only the connection (each
/// body of `on_connection!` is compiled once per connection type): the
/// lease clock's SQL, the upsert spelling, whether a skipped insert says
/// so, the event lock, the transaction, and the writes that need
/// `RETURNING` or `ON CONFLICT (target)`. [`Dialect::Conn`] must implement
/// it; each dialect does so in its `connection.rs`.
///
/// The writes below the event lock are the ones MySQL spells apart: it has
/// neither `RETURNING` (it writes, then reads the row back in the same
/// transaction) nor `ON CONFLICT (target)` (it says `ON DUPLICATE KEY
/// UPDATE`). PostgreSQL and SQLite spell them alike; their bodies are
/// written once, in `crate::sql::returning`, and expanded into both
/// `impl`s (the two backends' `RETURNING` and `ON CONFLICT` clauses are
/// different diesel types, so one generic function over both would have to
/// spell every statement's type as a bound).
pub(crate) trait Connection: Watched + AsyncConnection {
    /// "Now on the database's clock, in microseconds since the epoch", as
    /// SQL text with no binds ([`crate::lease_clock`]); a lease statement
    /// adds a bound offset to it.
    const NOW_US: &'static str;

    /// How the dialect's hand-written history upserts say "or update".
    const UPSERT: Upsert;

    /// Whether an insert that skips a taken key says so by affecting no
    /// row (not on MySQL, where a skipped duplicate still counts as a row:
    /// the caller reads the holder of the key to know).
    const INSERTS_TELL_SKIPS: bool;

    /// Whether the steps table has the `claimable` column its batch-claim
    /// indexes name, so a claimable test leads with it
    /// ([`crate::sql::batch_claimable`]): PostgreSQL and MySQL; SQLite's
    /// partial indexes are on `status` itself.
    const CLAIMABLE_COLUMN: bool;

    /// How the wake sweep reads the waits whose time has come from an
    /// index of waiting runs ([`WakeSweep`](crate::sql::waits::WakeSweep)).
    const WAKE_SWEEP: crate::sql::waits::WakeSweep;

    /// Runs `work` in a transaction on this connection: committed if it
    /// answers `Ok`, rolled back otherwise. diesel-async's
    /// [`AsyncConnection::transaction`] by default; SQLite begins it
    /// `IMMEDIATE`, so a writer takes the write lock up front and queues on
    /// the busy timeout instead of failing a read-to-write upgrade. The
    /// bound on `work` is diesel-async's own, written out with [`TxWork`]
    /// (diesel-async does not export the trait its bound names).
    fn write_transaction<'a, 'conn, R, E, F>(
        &'conn mut self,
        work: F,
    ) -> impl Future<Output = Result<R, E>> + Send + 'conn
    where
        for<'r> F: AsyncFnOnce(&'r mut Self) -> Result<R, E>
            + TxWork<&'r mut Self, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a,
        'a: 'conn,
    {
        AsyncConnection::transaction(self, work)
    }

    /// Locks event `id` for its dispatch if it is still pending at `now`;
    /// `None` if it is not pending or another dispatcher holds it.
    fn lock_pending(
        &mut self,
        id: &str,
        now: i64,
    ) -> impl Future<Output = QueryResult<Option<EventRow>>> + Send;

    /// Locks up to `limit` of the events pending at `now` that no other
    /// dispatcher holds, the longest due first; none if there is none.
    /// The same statement for one event (`dispatch_next`) and for a batch
    /// (`dispatch_next_batch`): the limit is bound, not spliced.
    fn lock_next_pending(
        &mut self,
        now: i64,
        limit: i64,
    ) -> impl Future<Output = QueryResult<Vec<EventRow>>> + Send;

    /// Inserts event `rows` in one multi-row statement, skipping each whose
    /// (app, scope, type, dedupe key) is taken (`ON CONFLICT DO NOTHING`,
    /// MySQL's `INSERT IGNORE`, which on this table, with no foreign key,
    /// hides nothing but the taken key): `emit_batch`'s insert. Answers the
    /// affected rows, which tell the skips only where
    /// [`Self::INSERTS_TELL_SKIPS`]. The caller bounds `rows`
    /// ([`MAX_EMIT_BATCH`](flowstate_core::events::MAX_EMIT_BATCH)).
    fn insert_events(
        &mut self,
        rows: &[EventRow],
    ) -> impl Future<Output = QueryResult<usize>> + Send;

    /// Inserts delivery `rows` in one multi-row statement: the pins of
    /// events the same transaction has just recorded (`emit`'s and
    /// `emit_batch`'s). The caller bounds `rows`.
    fn insert_deliveries(
        &mut self,
        rows: &[DeliveryRow],
    ) -> impl Future<Output = QueryResult<usize>> + Send;

    /// Inserts run `row` unless its idempotency key is taken: the one
    /// shape `create_run` and the materialisation of events (inside their
    /// own transaction) share. Answers whether the insert itself says it
    /// wrote the row (`None`: it cannot tell, see
    /// [`Self::INSERTS_TELL_SKIPS`]).
    fn insert_keyed_run(
        &mut self,
        row: &RunRow,
    ) -> impl Future<Output = QueryResult<Option<bool>>> + Send;

    /// Inserts run `rows`, each unless its idempotency key is taken (the
    /// same skip as [`Self::insert_keyed_run`]): the runs one transaction
    /// materialises from events' deliveries (whose ids the caller already
    /// holds, so nothing is answered), in one multi-row insert per
    /// [`RUNS_PER_INSERT`] rows. SQLite sends them from one blocking hop,
    /// where each typed statement would be a hop of its own inside the
    /// write lock.
    fn insert_keyed_runs(
        &mut self,
        rows: Vec<RunRow>,
    ) -> impl Future<Output = QueryResult<()>> + Send;

    /// Inserts effect `row` unless its `(run_id, effect_key)` is taken;
    /// the caller reads the row to learn who began it.
    fn insert_effect(&mut self, row: &EffectRow) -> impl Future<Output = QueryResult<()>> + Send;

    /// Inserts or replaces signal `row` (by run and name) from a `SELECT`
    /// of its run's row, so a settled or missing run takes none: the
    /// affected rows (none: refused).
    fn upsert_signal(&mut self, row: &SignalRow)
    -> impl Future<Output = QueryResult<usize>> + Send;

    /// Takes (deletes) signal `name` of run `lease.id` if `lease` holds
    /// the run's lease: its payload, `None` if there is no such signal or
    /// no such lease.
    fn take_signal(
        &mut self,
        lease: Held<'_>,
        name: &str,
    ) -> impl Future<Output = QueryResult<Option<JsonText>>> + Send;

    /// Inserts or replaces state `row` (by run and key) from a `SELECT` of
    /// its run's row guarded as a write into the run is (not settled; with
    /// `fence`, under that lease): the affected rows (none: refused).
    fn upsert_state(
        &mut self,
        row: &StateRow,
        fence: Option<Fence>,
    ) -> impl Future<Output = QueryResult<usize>> + Send;

    /// Inserts schedule `row`, or replaces every column of the one stored
    /// under its persona but the key and the last run.
    fn upsert_schedule(
        &mut self,
        row: &ScheduleRow,
    ) -> impl Future<Output = QueryResult<()>> + Send;

    /// Moves a run as `run_move` says if its status (and lease, when
    /// fenced) allow it: the row as written, `None` if refused.
    fn move_run(
        &mut self,
        run_move: &RunMove<'_>,
    ) -> impl Future<Output = QueryResult<Option<RunRow>>> + Send;

    /// Frees the lease `lease` holds as `release` says: the run's status
    /// and failure count afterwards, `None` if the lease is not held.
    fn release_lease(
        &mut self,
        lease: Held<'_>,
        release: LeaseRelease<'_>,
    ) -> impl Future<Output = QueryResult<Option<(String, i64)>>> + Send;

    /// Leases run `id` to `worker` until the lease clock (offset by
    /// `offset`) plus `until` if it is runnable, or settles it as
    /// cancelled if a cancel was requested (stamped `now`).
    fn lease_run(
        &mut self,
        lease: RunLeasing<'_>,
    ) -> impl Future<Output = QueryResult<Leased>> + Send;

    /// Renews the claim of attempt `attempt` of running step `id`: its new
    /// deadline (the lease clock offset by `offset`, plus the step's claim
    /// timeout or `default_us`), `None` if the claim is lost.
    fn renew_step_claim(
        &mut self,
        id: &str,
        attempt: i64,
        offset: i64,
        default_us: i64,
    ) -> impl Future<Output = QueryResult<Option<Option<i64>>>> + Send;

    /// Adds `add` to running virtual-user run `id`'s counters (stamped
    /// `now`) while each has room: the counters afterwards, `None` if the
    /// run is not running or a counter has no room.
    fn add_to_tally(
        &mut self,
        id: &str,
        add: TallyAdd,
        now: i64,
    ) -> impl Future<Output = QueryResult<Option<(i64, i64, i64)>>> + Send;
}

/// A transaction's body on a connection (`T` being `&mut` the connection):
/// an async closure whose future can be named, so a bound can ask it to be
/// `Send`. diesel-async bounds its transactions' callbacks the same way,
/// with a trait it does not export; [`Connection::write_transaction`]
/// states the bound with this one, and the compiler sees that whatever
/// meets it meets diesel-async's.
pub(crate) trait TxWork<T, R>:
    AsyncFnOnce(T) -> R + FnOnce(T) -> <Self as TxWork<T, R>>::Fut
{
    /// The future the body returns.
    type Fut: Future<Output = R>;
}

impl<F, T, Fut, R> TxWork<T, R> for F
where
    F: AsyncFnOnce(T) -> R + FnOnce(T) -> Fut,
    Fut: Future<Output = R>,
{
    type Fut = Fut;
}

/// The lease a write into a run is fenced by: the fencing token as stored
/// and the lease clock offset (microseconds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fence {
    /// The fencing token, as stored.
    pub token: i64,
    /// The lease clock offset, in microseconds.
    pub offset: i64,
}

/// Run `id`'s lease, as a write guarded by it names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held<'a> {
    /// The run's id.
    pub id: &'a str,
    /// The lease it must be held under.
    pub fence: Fence,
}

/// A run's status move ([`Connection::move_run`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunMove<'a> {
    /// The run's id.
    pub id: &'a str,
    /// The status it moves to, from any core's table allows.
    pub to: RunStatus,
    /// The time stamped on it.
    pub now: i64,
    /// The output to write (`None` keeps the stored one).
    pub output: Option<&'a JsonText>,
    /// The lease the move is fenced by, if any.
    pub fence: Option<Fence>,
}

/// How a release frees a lease ([`Connection::release_lease`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeaseRelease<'a> {
    /// Progress made: the failures go back to zero.
    Yield,
    /// The attempt failed: the failures rise by one and, at `limit`, the
    /// run fails (stamped `now`) with `reason`.
    Failure {
        /// Why the attempt failed.
        reason: &'a str,
        /// How many failures in a row fail the run (at least 1).
        limit: i64,
        /// The time stamped on a run that fails.
        now: i64,
    },
}

/// A `lease_run` ([`Connection::lease_run`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunLeasing<'a> {
    /// The run's id.
    pub id: &'a str,
    /// The worker taking the lease.
    pub worker: &'a str,
    /// The time stamped on a run settled as cancelled.
    pub now: i64,
    /// The lease clock offset, in microseconds.
    pub offset: i64,
    /// When the lease runs out: microseconds past the database's now.
    pub until: i64,
}

/// What a tally add raises each counter by ([`Connection::add_to_tally`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TallyAdd {
    /// Turns to add.
    pub turns: i64,
    /// Tokens to add.
    pub tokens: i64,
    /// Cost to add.
    pub cost: i64,
}

/// The typed fragments read the lease clock from any dialect's connection.
impl<C: Connection> LeaseClock for C {
    const NOW_US: &'static str = <C as Connection>::NOW_US;
}

/// Implements [`Dialect`] for the unit struct `$dialect` with connections of
/// type `$conn`, each method calling the function of the same name in the
/// invoking dialect module's files: `connect`, `claim::claim`,
/// `batch::{claim_batch, complete_batch}`, `leases::claim_runs`,
/// `recovery::{expire_step_claims, reap_expired_leases}`,
/// `steps::insert_step`, `transition::guarded_move`,
/// `children::insert_children`, `virtual_users::append_transcript`,
/// `retention::{prune_runs, prune_records, count_prunable}`.
macro_rules! wire_dialect {
    ($dialect:ty, $conn:ty) => {
        impl $crate::dialect::Dialect for $dialect {
            type Conn = $conn;

            async fn connect(
                url: &str,
                config: &mut $crate::config::StoreConfig,
            ) -> $crate::Result<$crate::dialect::PoolOf<Self>> {
                connect(url, config).await
            }

            async fn claim(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                run: flowstate_core::RunId,
                name: &str,
                function: &str,
            ) -> flowstate_core::Result<flowstate_core::ClaimOutcome> {
                claim::claim(pool, config, run, name, function).await
            }

            async fn claim_batch(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                limit: u32,
                function: Option<&str>,
            ) -> flowstate_core::Result<Vec<$crate::rows::StepRow>> {
                batch::claim_batch(pool, config, limit, function).await
            }

            async fn complete_batch(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                items: &[$crate::rows::BatchItem],
            ) -> flowstate_core::Result<std::collections::HashSet<String>> {
                batch::complete_batch(pool, config, items).await
            }

            async fn claim_runs(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                worker: &str,
                n: u32,
                lease_for: std::time::Duration,
            ) -> flowstate_core::Result<Vec<$crate::rows::leases::LeasedRunRow>> {
                leases::claim_runs(pool, config, worker, n, lease_for).await
            }

            async fn expire_step_claims(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                limit: u32,
            ) -> flowstate_core::Result<Vec<$crate::rows::ExpiredRow>> {
                recovery::expire_step_claims(pool, config, limit).await
            }

            async fn reap_expired_leases(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                limit: u32,
            ) -> flowstate_core::Result<Vec<(String, i64)>> {
                recovery::reap_expired_leases(pool, config, limit).await
            }

            async fn insert_step(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                run: flowstate_core::RunId,
                row: &$crate::rows::StepRow,
                token: Option<i64>,
            ) -> flowstate_core::Result<$crate::guard::Inserting> {
                steps::insert_step(pool, config, run, row, token).await
            }

            async fn guarded_move(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                id: flowstate_core::StepId,
                step_move: $crate::sql::Move,
                payload: Option<String>,
                attempt: Option<u32>,
            ) -> flowstate_core::Result<$crate::guard::Guarded> {
                transition::guarded_move(pool, config, id, step_move, payload, attempt).await
            }

            async fn insert_children(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                parent: flowstate_core::RunId,
                rows: Vec<$crate::rows::RunRow>,
            ) -> flowstate_core::Result<usize> {
                children::insert_children(pool, config, parent, rows).await
            }

            async fn append_transcript(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                id: String,
                entries: Vec<String>,
                now: i64,
            ) -> flowstate_core::Result<Option<i64>> {
                virtual_users::append_transcript(pool, config, id, entries, now).await
            }

            async fn prune_runs(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                cutoff: i64,
                limit: i64,
            ) -> flowstate_core::Result<u64> {
                retention::prune_runs(pool, config, cutoff, limit).await
            }

            async fn prune_records(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                kind: flowstate_core::retention::PruneKind,
                cutoff: i64,
                limit: i64,
            ) -> flowstate_core::Result<u64> {
                retention::prune_records(pool, config, kind, cutoff, limit).await
            }

            async fn count_prunable(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                kind: flowstate_core::retention::PruneKind,
                cutoff: i64,
            ) -> flowstate_core::Result<u64> {
                retention::count_prunable(pool, config, kind, cutoff).await
            }
        }
    };
}
pub(crate) use wire_dialect;
