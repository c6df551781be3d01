//! The connection pool: deadpool through diesel-async, with a bounded wait
//! for a connection and the statement log installed on every connection.

use std::time::Duration;

use deadpool::managed::Manager;
use diesel::ConnectionError;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError, PoolableConnection,
};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::config::StoreConfig;
use crate::error::{self, Error};

/// A pool of connections of type `C` and how long to wait for one.
pub(crate) struct ConnectionPool<C>
where
    C: PoolableConnection + Send + 'static,
    AsyncDieselConnectionManager<C>: Manager<Type = C, Error = PoolError>,
{
    pool: Pool<C>,
    acquire_timeout: Duration,
}

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
    C: PoolableConnection + Send + 'static,
    AsyncDieselConnectionManager<C>: Manager<Type = C, Error = PoolError>,
{
    /// Builds a pool for `url`; connections are made lazily, each set up
    /// with `setup` (a dialect's session settings or pragmas) and, if the
    /// config has one, the statement log.
    pub(crate) fn build<F>(
        dialect: &'static str,
        url: &str,
        config: &StoreConfig,
        setup: F,
    ) -> Result<Self, Error>
    where
        F: for<'c> Fn(&'c mut C) -> BoxFuture<'c, diesel::QueryResult<()>> + Send + Sync + 'static,
    {
        let log = config.statement_log.clone();
        let setup = std::sync::Arc::new(setup);
        let mut manager_config = ManagerConfig::<C>::default();
        // No ping on checkout: the default (`Verified`) sends `SELECT 1`
        // before every operation, a round trip (and a logged statement)
        // that no budget allows. A closed connection is still refused
        // (`is_broken`); one that died silently fails its first statement
        // with a retryable error.
        manager_config.recycling_method = diesel_async::pooled_connection::RecyclingMethod::Fast;
        manager_config.custom_setup = Box::new(move |url| {
            let log = log.clone();
            let setup = std::sync::Arc::clone(&setup);
            async move {
                let mut conn = C::establish(url).await?;
                if let Some(log) = log {
                    conn.set_instrumentation(log.instrumentation());
                }
                setup(&mut conn)
                    .await
                    .map_err(ConnectionError::CouldntSetupConfiguration)?;
                Ok(conn)
            }
            .boxed()
        });
        let manager = AsyncDieselConnectionManager::<C>::new_with_config(url, manager_config);
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .wait_timeout(Some(config.acquire_timeout))
            .create_timeout(Some(config.acquire_timeout))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(|err| Error::Pool {
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
    pub(crate) async fn check(&self, dialect: &'static str) -> Result<(), Error> {
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
