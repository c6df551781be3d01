//! [`Dialect`]: the one named seam between the shared code of
//! [`crate::store`] and the three dialect modules (`postgres/`, `mysql/`,
//! `sqlite/`).
//!
//! What a dialect must provide: its pooled connection type
//! ([`Dialect::Conn`]), how to open a pool of it ([`Dialect::connect`]),
//! and every write whose SQL differs per dialect: the claims (one step,
//! a batch, a batch of run leases), the batch completion, the guarded
//! step transitions, the step insert, the two recovery sweeps (expired
//! step claims, expired run leases), and the two writes that need a
//! dialect's own spelling of a multi-row insert (children, transcript
//! chunks). Each takes the dialect's pool and the store's
//! [`StoreConfig`], then its own arguments. Everything else is written
//! once, in the diesel DSL, in [`crate::store`].
//!
//! Why a trait: so that what a dialect owes is declared once, in one place,
//! and a dialect that leaves an operation out fails to compile with an
//! error naming the missing method, not with a macro expansion that cannot
//! find a function. It plays the part diesel's `SqlDialect` plays for a
//! backend's SQL spelling, and River's driver interface plays for its
//! queue's statements: a named list of what a backend implements. The unit
//! structs [`crate::postgres::Postgres`], [`crate::mysql::Mysql`] and
//! [`crate::sqlite::Sqlite`] implement it.
//!
//! The trait is never used as `dyn` or as a generic bound on the store:
//! `by_dialect!` (in `store/mod.rs`) is the one dispatch macro, matching
//! the store's pool and calling `<D as Dialect>::op` on the dialect it
//! holds. It stands in for diesel's `MultiConnection`, which diesel-async
//! lacks; each call is monomorphic, so the futures stay `Send` exactly as
//! the concrete functions' futures were.

use std::collections::HashSet;
use std::time::Duration;

use deadpool::managed::Manager;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, PoolError, PoolableConnection,
};

use flowstate_core::{ClaimOutcome, Result, RunId, StepId};

use crate::config::StoreConfig;
use crate::guard::Guarded;
use crate::pool::ConnectionPool;
use crate::rows::{RunRow, StepRow};
use crate::rows_leases::LeasedRunRow;
use crate::sql::Move;
use crate::store::{BatchItem, ExpiredRow, Inserting};

/// The pool of a dialect's connections.
pub(crate) type PoolOf<D> = ConnectionPool<<D as Dialect>::Conn>;

/// What a dialect provides to the shared store (see the module doc).
pub(crate) trait Dialect
where
    AsyncDieselConnectionManager<Self::Conn>: Manager<Type = Self::Conn, Error = PoolError>,
{
    /// The pooled connection type: what a [`ConnectionPool`] of this
    /// dialect hands out.
    type Conn: PoolableConnection + Send + 'static;

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
}
