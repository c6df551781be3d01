//! How a store is opened: the URL, the pool, the limits and the clock.

use std::sync::Arc;
use std::time::Duration;

use flowstate_core::step_claim::{DEFAULT_CLAIM_TIMEOUT, LONGEST_CLAIM_TIMEOUT};
use flowstate_core::{Clock, InputLimits, SystemClock};

#[cfg(feature = "test-support")]
use crate::lease_clock::LeaseClockOffset;
#[cfg(feature = "test-support")]
use crate::statement_log::StatementLog;

/// The `wsrep_sync_wait` a store sets on each session to a MariaDB Galera
/// node unless told otherwise ([`StoreConfig::galera_sync_wait`]): 1
/// (reads) + 2 (updates and deletes) + 4 (inserts and replaces).
pub const DEFAULT_GALERA_SYNC_WAIT: u8 = 7;

/// Settings for opening a [`DieselStore`](crate::DieselStore), built from
/// [`StoreConfig::default`] with its methods, each answering the same
/// settings with one changed:
///
/// ```
/// use std::time::Duration;
/// use flowstate_store_diesel::StoreConfig;
///
/// let config = StoreConfig::default()
///     .pool_size(4)
///     .acquire_timeout(Duration::from_secs(2))
///     .claim_timeout(Duration::from_secs(60));
/// # drop(config);
/// ```
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The most connections the pool holds.
    pub(crate) pool_size: usize,
    /// How long a call waits for a free connection before it fails with
    /// [`flowstate_core::Error::PoolTimeout`]; it never hangs.
    pub(crate) acquire_timeout: Duration,
    /// How long SQLite waits on a locked database before giving up.
    pub(crate) sqlite_busy_timeout: Duration,
    /// The limits applied to every name, key and JSON value before it is written.
    pub(crate) limits: InputLimits,
    /// Where the store reads the time it stamps on rows.
    pub(crate) clock: Arc<dyn Clock>,
    /// Where every statement sent is recorded, if anywhere (tests and the
    /// bench use it to count statements per operation).
    #[cfg(feature = "test-support")]
    pub(crate) statement_log: Option<Arc<StatementLog>>,
    /// Whether [`DieselStore::open`](crate::DieselStore::open) checks that
    /// the database's applied migrations are exactly this library's (on by
    /// default). Off only for a store used for operator SQL on a database
    /// that holds no flowstate tables (a server's admin database).
    pub(crate) check_schema: bool,
    /// Added to the database's clock in every lease statement (see
    /// [`LeaseClockOffset`](crate::lease_clock)): zero unless a test moves it.
    #[cfg(feature = "test-support")]
    pub(crate) lease_clock_offset: LeaseClockOffset,
    /// How long a claim holds a step that has no claim timeout of its own
    /// ([`flowstate_core::step_claim`]): past it, recovery may take the
    /// attempt back. [`DEFAULT_CLAIM_TIMEOUT`] unless set; between 1 ms and
    /// [`LONGEST_CLAIM_TIMEOUT`]
    /// (a value outside is clamped into it when the store opens).
    pub(crate) claim_timeout: Duration,
    /// Whether every statement must be safe on a server connection a
    /// transaction-mode pooler shares between clients (PgBouncer's
    /// `pool_mode = transaction`): see [`StoreConfig::transaction_pooler`].
    pub(crate) transaction_pooler: bool,
    /// The `wsrep_sync_wait` each session to a MariaDB Galera node sets:
    /// see [`StoreConfig::galera_sync_wait`].
    pub(crate) galera_sync_wait: u8,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            pool_size: 10,
            acquire_timeout: Duration::from_secs(5),
            sqlite_busy_timeout: Duration::from_secs(10),
            limits: InputLimits::default(),
            clock: Arc::new(SystemClock),
            #[cfg(feature = "test-support")]
            statement_log: None,
            check_schema: true,
            #[cfg(feature = "test-support")]
            lease_clock_offset: LeaseClockOffset::default(),
            claim_timeout: DEFAULT_CLAIM_TIMEOUT,
            transaction_pooler: false,
            galera_sync_wait: DEFAULT_GALERA_SYNC_WAIT,
        }
    }
}

impl StoreConfig {
    /// The same settings with a pool of `size` connections.
    #[must_use]
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// The same settings with `timeout` to wait for a connection.
    #[must_use]
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The same settings with SQLite waiting up to `timeout` on a locked
    /// database before a write gives up (a retryable error).
    #[must_use]
    pub fn sqlite_busy_timeout(mut self, timeout: Duration) -> Self {
        self.sqlite_busy_timeout = timeout;
        self
    }

    /// The same settings reading time from `clock`.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same settings with `limits` for JSON and keys.
    #[must_use]
    pub fn limits(mut self, limits: InputLimits) -> Self {
        self.limits = limits;
        self
    }

    #[cfg(feature = "test-support")]
    /// The same settings with the schema check at open turned off: only
    /// for a store used for operator SQL on a database that holds no
    /// flowstate tables (a server's admin database).
    #[must_use]
    pub fn without_schema_check(mut self) -> Self {
        self.check_schema = false;
        self
    }

    #[cfg(feature = "test-support")]
    /// The same settings measuring leases with `offset` added to the
    /// database's clock (share one offset between every store of a test).
    #[must_use]
    pub fn lease_clock_offset(mut self, offset: LeaseClockOffset) -> Self {
        self.lease_clock_offset = offset;
        self
    }

    /// The same settings, holding a step with no claim timeout of its own
    /// for `timeout` per claim (see [`StoreConfig::claim_timeout`]).
    #[must_use]
    pub fn claim_timeout(mut self, timeout: Duration) -> Self {
        self.claim_timeout = timeout;
        self
    }

    /// The same settings for a PostgreSQL reached through a pooler in
    /// transaction mode (PgBouncer's `pool_mode = transaction`, or any
    /// pooler that hands a server connection to a client per transaction):
    /// no statement stays prepared on a server connection past its own
    /// exchange, so two clients of one server connection never meet each
    /// other's statements. The URL says the same with
    /// `?pool_mode=transaction`. Each statement still costs one round trip;
    /// the server parses and plans it anew each time. The store keeps no
    /// session state, session advisory lock or LISTEN on PostgreSQL in
    /// either mode. Ignored by MySQL and SQLite.
    #[must_use]
    pub fn transaction_pooler(mut self) -> Self {
        self.transaction_pooler = true;
        self
    }

    /// The same settings with each session to a MariaDB Galera node
    /// setting `wsrep_sync_wait = checks` (masked to its four bits), in
    /// place of [`DEFAULT_GALERA_SYNC_WAIT`].
    ///
    /// Galera is synchronous for commits but not for reads: a node applies
    /// what another committed a moment later, and a store's calls go to
    /// whichever pooled connection is free, on whichever node. With the
    /// default, 7, a node first applies everything the cluster committed
    /// before each read, update, delete and insert, so the store reads its
    /// own writes wherever they were made (the kit on three nodes passes
    /// so). 0 leaves the wait out; an operator who has measured what it
    /// costs and needs less may set 1 (reads) or 3 (reads, updates and
    /// deletes). Ignored by PostgreSQL, SQLite and a MySQL server that is
    /// not a Galera node.
    #[must_use]
    pub fn galera_sync_wait(mut self, checks: u8) -> Self {
        self.galera_sync_wait = checks & 0x0f;
        self
    }

    /// The default claim timeout in microseconds, as statements bind it:
    /// [`StoreConfig::claim_timeout`] clamped to what core allows.
    pub(crate) fn claim_default_us(&self) -> i64 {
        let timeout = self
            .claim_timeout
            .clamp(Duration::from_millis(1), LONGEST_CLAIM_TIMEOUT);
        i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX)
    }

    /// The lease clock offset in microseconds, as statements bind it: zero
    /// but in tests (the `test-support` feature's
    /// [`LeaseClockOffset`](crate::lease_clock)).
    #[cfg_attr(not(feature = "test-support"), allow(clippy::unused_self))]
    pub(crate) fn lease_offset_us(&self) -> i64 {
        #[cfg(feature = "test-support")]
        return self.lease_clock_offset.micros();
        #[cfg(not(feature = "test-support"))]
        0
    }

    #[cfg(feature = "test-support")]
    /// The same settings recording every statement in `log`.
    #[must_use]
    pub fn statement_log(mut self, log: Arc<StatementLog>) -> Self {
        self.statement_log = Some(log);
        self
    }
}
