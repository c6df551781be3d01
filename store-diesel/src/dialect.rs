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
//! A dialect implements it with [`wire_dialect!`], in its `mod.rs`: each
//! method is the function of the same name in the dialect's file of the
//! same family (`claim::claim`, `batch::claim_batch`, ...), so the
//! signatures are written here, once, and the three folders hold the same
//! files with the same function names; a function missing from a folder is
//! a compile error naming it.
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

/// Implements [`Dialect`] for the unit struct `$dialect` with connections of
/// type `$conn`, each method calling the function of the same name in the
/// invoking dialect module's files: `connect`, `claim::claim`,
/// `batch::{claim_batch, complete_batch}`, `leases::claim_runs`,
/// `recovery::{expire_step_claims, reap_expired_leases}`,
/// `steps::insert_step`, `transition::guarded_move`,
/// `children::insert_children`, `virtual_users::append_transcript`.
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
                items: &[$crate::store::BatchItem],
            ) -> flowstate_core::Result<std::collections::HashSet<String>> {
                batch::complete_batch(pool, config, items).await
            }

            async fn claim_runs(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                worker: &str,
                n: u32,
                lease_for: std::time::Duration,
            ) -> flowstate_core::Result<Vec<$crate::rows_leases::LeasedRunRow>> {
                leases::claim_runs(pool, config, worker, n, lease_for).await
            }

            async fn expire_step_claims(
                pool: &$crate::dialect::PoolOf<Self>,
                config: &$crate::config::StoreConfig,
                limit: u32,
            ) -> flowstate_core::Result<Vec<$crate::store::ExpiredRow>> {
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
            ) -> flowstate_core::Result<$crate::store::Inserting> {
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
        }
    };
}
pub(crate) use wire_dialect;
