//! [`DieselStore`]: the one type a user opens from a URL; it implements
//! every port of `flowstate-core` in `crate::ports`, one file per port
//! family.

use crate::backend::Backend;
use crate::config::StoreConfig;
use crate::database::Dialect;
use crate::open_error::Result;
use crate::url::DatabaseUrl;

/// A flowstate store on PostgreSQL, MySQL/MariaDB or SQLite.
///
/// Open it with [`DieselStore::open`]; apply the schema first with
/// [`crate::migrate::up`] (or [`DieselStore::open_migrated`]). A build
/// with only some of the `postgres`, `mysql` and `sqlite` features compiles
/// only those drivers, and a URL naming another is a typed error.
#[derive(Debug)]
pub struct DieselStore {
    pub(crate) backend: Backend,
    pub(crate) config: StoreConfig,
}

impl DieselStore {
    /// Opens a store on `url` (see [`DatabaseUrl::parse`]) and checks that a
    /// connection can be made and that the schema is the one this library
    /// was written for: a database never migrated, or migrated by an older
    /// flowstate, is [`Error::NotMigrated`](crate::Error::NotMigrated) (naming the command that fixes
    /// it), one migrated by a newer flowstate [`Error::SchemaAhead`](crate::Error::SchemaAhead). It
    /// changes no table (diesel may create its own migrations table).
    pub async fn open(url: &str, config: StoreConfig) -> Result<Self> {
        let parsed = DatabaseUrl::parse(url)?;
        let mut config = config;
        if parsed.transaction_pooler {
            config = config.transaction_pooler();
        }
        let backend = Backend::connect(&parsed, &mut config).await?;
        // After connecting (which makes a missing SQLite file and its
        // folders); an in-memory SQLite database is migrated in place as it
        // opens, and another connection would see another database.
        let in_memory =
            parsed.dialect == Dialect::Sqlite && crate::url::is_sqlite_memory(&parsed.target);
        if config.check_schema && !in_memory {
            crate::migrate::check(url, config.transaction_pooler).await?;
        }
        let store = Self { backend, config };
        tracing::debug!(dialect = %store.dialect(), "flowstate store opened");
        Ok(store)
    }

    /// Applies pending migrations on `url`, then opens a store on it; with
    /// [`StoreConfig::transaction_pooler`] (or `?pool_mode=transaction`)
    /// the migrations run through a transaction-mode pooler too.
    pub async fn open_migrated(url: &str, config: StoreConfig) -> Result<Self> {
        let applied = crate::migrate::up_with(url, config.transaction_pooler).await?;
        if !applied.is_empty() {
            tracing::info!(?applied, "flowstate migrations applied");
        }
        Self::open(url, config).await
    }

    /// The dialect this store speaks.
    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }

    /// The lease clock offset the store was opened with, shared with every
    /// store opened from the same config: a test moves it to expire leases
    /// without waiting.
    #[cfg(feature = "test-support")]
    pub fn lease_clock_offset(&self) -> &crate::LeaseClockOffset {
        &self.config.lease_clock_offset
    }

    /// The most connections the store's pool holds: the configured
    /// [`StoreConfig::pool_size`], or 1 for SQLite `:memory:`, whose every
    /// connection would be a database of its own.
    pub fn pool_size(&self) -> usize {
        self.config.pool_size
    }

    /// Runs SQL text with no binds on a pooled connection: an escape hatch for
    /// tests and operators (it bypasses every guarantee of the ports).
    #[cfg(feature = "test-support")]
    pub async fn batch_execute(&self, sql: &str) -> flowstate_core::Result<()> {
        use diesel_async::SimpleAsyncConnection;
        crate::backend::on_connection!(self, "batch_execute", |conn| conn.batch_execute(sql).await)
    }

    /// Takes one connection out of the pool and holds it until the answer
    /// drops, then gives it back: for tests and operators that want to see
    /// the acquire timeout, or to open every connection before a burst.
    #[cfg(feature = "test-support")]
    pub async fn reserve_connection(&self) -> flowstate_core::Result<ReservedConnection> {
        let op = "reserve_connection";
        Ok(ReservedConnection(self.backend.reserve(op).await?))
    }

    /// Whether an insert that skips a taken key says so by affecting no
    /// row ([`crate::dialect::Connection::INSERTS_TELL_SKIPS`]): not on
    /// MySQL, so the caller reads the holder of the key to know.
    pub(crate) fn inserts_tell_skips(&self) -> bool {
        self.backend.inserts_tell_skips()
    }

    /// The time to stamp on rows written now, in microseconds.
    pub(crate) fn now(&self) -> i64 {
        self.config.clock.now().as_micros()
    }
}

/// A connection held out of its store's pool (see
/// [`DieselStore::reserve_connection`]); dropping it gives it back.
#[cfg(feature = "test-support")]
pub struct ReservedConnection(
    // Held only to be dropped.
    #[allow(dead_code)] Box<dyn std::any::Any + Send>,
);

#[cfg(feature = "test-support")]
impl std::fmt::Debug for ReservedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReservedConnection")
    }
}
