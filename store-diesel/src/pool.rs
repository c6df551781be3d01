//! The connection pool: deadpool through diesel-async, with a bounded wait
//! for a connection, the statement log installed on every connection, and
//! connections that heal after a lost connection without a ping before
//! each statement ([`crate::health`]).

use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{Hook, Manager, QueueMode};
use diesel::ConnectionError;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError, PoolableConnection,
};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::error;
use crate::health::{Health, Placement, Watched};
use crate::open_error::Error;

/// A pool of connections of type `C` and how long to wait for one.
pub(crate) struct ConnectionPool<C>
where
    C: PoolableConnection + Send + 'static,
    AsyncDieselConnectionManager<C>: Manager<Type = C, Error = PoolError>,
{
    pool: Pool<C>,
    acquire_timeout: Duration,
}

/// A new connection and, for a pool that chooses among several servers,
/// where it was placed.
pub(crate) type Placed<C> = (C, Option<Box<dyn Placement>>);

impl<C> std::fmt::Debug for ConnectionPool<C>
where
    C: PoolableConnection + Send + 'static,
    AsyncDieselConnectionManager<C>: Manager<Type = C, Error = PoolError>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionPool")
            .field("status", &self.pool.status())
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

impl<C> ConnectionPool<C>
where
    C: PoolableConnection + Watched + Send + 'static,
    AsyncDieselConnectionManager<C>: Manager<Type = C, Error = PoolError>,
{
    /// Builds a pool for `url`; connections are made lazily, each set up
    /// with `setup` (a dialect's session settings or pragmas), the
    /// statement log if the config has one, and on a server dialect the
    /// watch that heals the pool after a lost connection.
    pub(crate) fn build<F>(
        dialect: Dialect,
        url: &str,
        config: &StoreConfig,
        setup: F,
    ) -> Result<Self, Error>
    where
        F: for<'c> Fn(&'c mut C) -> BoxFuture<'c, diesel::QueryResult<()>> + Send + Sync + 'static,
    {
        Self::build_with(dialect, url, config, |url| C::establish(url).boxed(), setup)
    }

    /// [`ConnectionPool::build`], each connection opened by `establish`
    /// rather than the driver's own `establish` (PostgreSQL's connections
    /// for a transaction-mode pooler, `postgres/pooler.rs`).
    pub(crate) fn build_with<E, F>(
        dialect: Dialect,
        url: &str,
        config: &StoreConfig,
        establish: E,
        setup: F,
    ) -> Result<Self, Error>
    where
        E: for<'u> Fn(&'u str) -> BoxFuture<'u, diesel::ConnectionResult<C>>
            + Send
            + Sync
            + 'static,
        F: for<'c> Fn(&'c mut C) -> BoxFuture<'c, diesel::QueryResult<()>> + Send + Sync + 'static,
    {
        Self::build_placed(dialect, url, config, unplaced(establish), setup)
    }

    /// [`ConnectionPool::build_with`] for a pool that chooses a server for
    /// each connection (MySQL's nodes, `mysql/nodes.rs`): `establish`
    /// answers where it placed the connection too, which the connection's
    /// watch keeps ([`crate::health::Placement`]).
    pub(crate) fn build_placed<E, F>(
        dialect: Dialect,
        url: &str,
        config: &StoreConfig,
        establish: E,
        setup: F,
    ) -> Result<Self, Error>
    where
        E: for<'u> Fn(&'u str) -> BoxFuture<'u, diesel::ConnectionResult<Placed<C>>>
            + Send
            + Sync
            + 'static,
        F: for<'c> Fn(&'c mut C) -> BoxFuture<'c, diesel::QueryResult<()>> + Send + Sync + 'static,
    {
        let establish = Arc::new(establish);
        let log = statement_log(config);
        let setup = Arc::new(setup);
        let health = Health::new(dialect, config.acquire_timeout);
        let watching = Arc::clone(&health);
        let mut manager_config = ManagerConfig::<C>::default();
        // No ping on checkout: the default (`Verified`) sends `SELECT 1`
        // before every operation, a round trip (and a logged statement)
        // that no budget allows. A closed connection is still refused
        // (`is_broken`); one that died silently fails its first statement
        // with a retryable error, and the watch installed below makes the
        // pool drop it and check the others (the `post_recycle` hook).
        manager_config.recycling_method = diesel_async::pooled_connection::RecyclingMethod::Fast;
        manager_config.custom_setup = Box::new(move |url| {
            let log = Arc::clone(&log);
            let setup = Arc::clone(&setup);
            let health = Arc::clone(&watching);
            let establish = Arc::clone(&establish);
            async move {
                let (mut conn, placement) = establish(url).await?;
                let log = log();
                if C::WATCHED {
                    let next = log.or_else(diesel::connection::get_default_instrumentation);
                    conn.set_instrumentation(health.watch_placed(next, placement));
                } else if let Some(log) = log {
                    conn.set_instrumentation(log);
                }
                setup(&mut conn)
                    .await
                    .map_err(ConnectionError::CouldntSetupConfiguration)?;
                Ok(conn)
            }
            .boxed()
        });
        let manager = AsyncDieselConnectionManager::<C>::new_with_config(url, manager_config);
        let mut builder = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .wait_timeout(Some(config.acquire_timeout))
            .create_timeout(Some(config.acquire_timeout))
            .runtime(deadpool::Runtime::Tokio1);
        if C::WATCHED {
            // The connection given back last is handed out first, so one
            // whose statement just failed is looked at before any idle
            // since before the failure. The hook runs after `is_broken`
            // (deadpool runs `post_recycle` hooks once the manager's recycle
            // passed); when it fails, deadpool drops the connection and
            // takes the next one, or opens a new one.
            builder = builder
                .queue_mode(QueueMode::Lifo)
                .post_recycle(Hook::async_fn(move |conn, metrics| {
                    health.recycle(conn, metrics)
                }));
        }
        let pool = builder.build().map_err(|err| Error::Pool {
            dialect,
            detail: err.to_string(),
        })?;
        Ok(Self {
            pool,
            acquire_timeout: config.acquire_timeout,
        })
    }

    /// A connection for `operation`, back in the pool when it drops, or
    /// [`flowstate_core::Error::PoolTimeout`] once the acquire timeout
    /// passes.
    pub(crate) async fn get(
        &self,
        operation: &'static str,
    ) -> Result<Object<C>, flowstate_core::Error> {
        self.pool
            .get()
            .await
            .map_err(|err| error::pool(operation, self.acquire_timeout, err))
    }

    /// Opens one connection now, so a bad URL or a server that is down is
    /// reported when the store is opened, not on its first call.
    pub(crate) async fn check(&self, dialect: Dialect) -> Result<(), Error> {
        self.pool
            .get()
            .await
            .map(drop)
            .map_err(|err| Error::Connect {
                dialect,
                source: Box::new(err),
            })
    }
}

/// `establish` answering no placement: a pool of one server.
fn unplaced<C, E>(
    establish: E,
) -> impl for<'u> Fn(&'u str) -> BoxFuture<'u, diesel::ConnectionResult<Placed<C>>> + Send + Sync + 'static
where
    C: Send + 'static,
    E: for<'u> Fn(&'u str) -> BoxFuture<'u, diesel::ConnectionResult<C>> + Send + Sync + 'static,
{
    move |url| {
        establish(url)
            .map(|conn| conn.map(|conn| (conn, None)))
            .boxed()
    }
}

/// What makes the instrumentation recording a new connection's statements
/// into the config's statement log, if it has one (a log is set only with
/// the `test-support` feature; without it, nothing is recorded).
type MakeLog = Arc<dyn Fn() -> Option<Box<dyn diesel::connection::Instrumentation>> + Send + Sync>;

/// The [`MakeLog`] of `config`.
fn statement_log(config: &StoreConfig) -> MakeLog {
    #[cfg(feature = "test-support")]
    {
        let log = config.statement_log.clone();
        Arc::new(move || {
            log.as_ref()
                .map(|log| Box::new(log.instrumentation()) as Box<_>)
        })
    }
    #[cfg(not(feature = "test-support"))]
    {
        let _ = config;
        Arc::new(|| None)
    }
}
