//! The whole conformance kit through PgBouncer in transaction mode (issue
//! 34): every family and hook case the direct PostgreSQL target runs
//! (`store-diesel/tests/postgres`), on a [`DieselStore`] opened with
//! [`StoreConfig::transaction_pooler`] through one PgBouncer.
//!
//! One PgBouncer serves the whole binary: started once (a `OnceLock`) on a
//! thread of its own that lives as long as the binary, in front of the
//! PostgreSQL `FLOWSTATE_PG_URL` names (`127.0.0.1:5432` by default), its
//! `* =` database entry routing any database name there. It runs under
//! `setpriv --pdeathsig KILL`, so the kernel kills it when the binary
//! exits, however it exits: a `static`'s `Drop` never runs.
//!
//! Each case gets a database of its own: created directly on the server,
//! migrated through PgBouncer, dropped directly after the case
//! (`WITH (FORCE)` ends PgBouncer's server connections to it). The hooks
//! reach behind the store directly on the server too.
//!
//! Connections stay few: PgBouncer keeps [`POOL_SIZE`] server connections
//! per database and [`SERVER_CONNECTIONS`] over all of them (idle ones of
//! one database are closed for another past that), and at most
//! [`CASES_AT_ONCE`] cases run at once whatever `--test-threads` says,
//! each holding at most one direct connection at a time: at most 15
//! server connections for the binary.
//!
//! Nothing is excluded: every case the direct target runs runs here.
//! `kit_through_pgbouncer_counts_its_cases` prints how many.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};
use flowstate_faults::cluster::{PgBouncer, PgBouncerSettings};
use flowstate_store_diesel::test_support::kit_hooks::HookDb;
use flowstate_store_diesel::{Dialect, DieselStore, LeaseClockOffset, StoreConfig};
use flowstate_testkit::{Harness, LeaseHarness, ManualClock, SkewedClock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Server connections PgBouncer keeps per database (each case's).
const POOL_SIZE: u32 = 3;

/// Server connections PgBouncer keeps over every database.
const SERVER_CONNECTIONS: u32 = 12;

/// Cases running at once in this binary, whatever `--test-threads` says.
const CASES_AT_ONCE: usize = 3;

/// Client connections of a case's store, as the direct harness opens: the
/// race cases' 32 tasks race on PgBouncer rather than queue on the pool.
const CONNECTIONS: usize = 34;

/// Writes `line` to stdout past the test harness's capture, so it shows
/// in every run, not only with `--nocapture`.
fn shown(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// The server behind PgBouncer: `FLOWSTATE_PG_URL` without a database.
fn server() -> (String, String, u16) {
    let url = std::env::var("FLOWSTATE_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let (scheme, rest) = url.split_once("://").expect("a server URL");
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().expect("a port")),
        None => (host_port, 5432),
    };
    (format!("{scheme}://{authority}"), host.to_owned(), port)
}

/// The binary's PgBouncer: its URL for database `name`.
fn bouncer_url(name: &str) -> String {
    static BOUNCER: OnceLock<Result<u16, String>> = OnceLock::new();
    let port = BOUNCER.get_or_init(|| {
        let (_, host, port) = server();
        let (sender, answer) = std::sync::mpsc::channel();
        // The thread that starts PgBouncer is its parent for PDEATHSIG:
        // one that never ends before the binary does, not a test's runtime.
        std::thread::Builder::new()
            .name("pgbouncer".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let settings = PgBouncerSettings {
                    pool_size: POOL_SIZE,
                    max_client_conn: 2000,
                    max_user_connections: SERVER_CONNECTIONS,
                    die_with_parent: true,
                };
                match runtime.block_on(PgBouncer::start_with(&host, port, settings)) {
                    Ok(bouncer) => {
                        shown(&format!(
                            "pgbouncer (transaction mode, {POOL_SIZE} server connections per \
                             database, {SERVER_CONNECTIONS} in all) on port {} in front of \
                             {host}:{port}, up in {:?}",
                            bouncer.port(),
                            bouncer.started_in()
                        ));
                        let _ = sender.send(Ok(bouncer.port()));
                        loop {
                            std::thread::park();
                        }
                    }
                    Err(err) => {
                        let _ = sender.send(Err(format!("{err:#}")));
                    }
                }
            })
            .expect("spawn the pgbouncer thread");
        answer
            .recv()
            .unwrap_or_else(|_| Err("the pgbouncer thread died".to_owned()))
    });
    match port {
        Ok(port) => format!("postgres://postgres@127.0.0.1:{port}/{name}"),
        Err(err) => panic!("cannot start PgBouncer: {err}"),
    }
}

/// Runs `sql` on database `database` of the server, directly.
async fn direct(database: &str, sql: &str) {
    let url = format!("{}/{database}", server().0);
    let mut conn = AsyncPgConnection::establish(&url)
        .await
        .unwrap_or_else(|err| panic!("cannot reach PostgreSQL at {url}: {err}"));
    conn.batch_execute(sql)
        .await
        .unwrap_or_else(|err| panic!("{sql}: {err}"));
}

/// One case's database, reached through PgBouncer by the store and
/// directly by the hooks.
struct CaseDb {
    name: String,
    /// A slot among [`CASES_AT_ONCE`], held until the database is gone.
    _slot: OwnedSemaphorePermit,
}

impl CaseDb {
    async fn migrated() -> Self {
        static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
        let slot = SLOTS
            .get_or_init(|| Arc::new(Semaphore::new(CASES_AT_ONCE)))
            .clone()
            .acquire_owned()
            .await
            .expect("the slots stay open");
        let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
        direct("postgres", &format!("CREATE DATABASE {name}")).await;
        let db = Self { name, _slot: slot };
        let url = format!("{}?pool_mode=transaction", db.pooled_url());
        flowstate_store_diesel::migrate::up(&url)
            .await
            .unwrap_or_else(|err| panic!("cannot migrate {url}: {err}"));
        db
    }

    /// Its URL through PgBouncer.
    fn pooled_url(&self) -> String {
        bouncer_url(&self.name)
    }

    /// A store on it through PgBouncer.
    async fn store(&self, config: StoreConfig) -> DieselStore {
        let url = self.pooled_url();
        DieselStore::open(&url, config.transaction_pooler())
            .await
            .unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
    }

    /// Drops it directly; `WITH (FORCE)` ends PgBouncer's server
    /// connections to it.
    async fn drop_database(self) {
        direct(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        )
        .await;
    }
}

/// The hooks reach behind the stores directly on the server, past
/// PgBouncer.
impl HookDb for CaseDb {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    /// Runs `sql` directly, behind every store's back; answers the rows it
    /// affected.
    async fn execute(&self, sql: &str) -> usize {
        let url = format!("{}/{}", server().0, self.name);
        let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    }

    /// Runs `sql`, a query answering one `BIGINT` column `n`, directly.
    async fn count(&self, sql: &str) -> u64 {
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let url = format!("{}/{}", server().0, self.name);
        let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
        let counted: Count =
            diesel_async::RunQueryDsl::get_result(diesel::sql_query(sql), &mut conn)
                .await
                .unwrap_or_else(|err| panic!("{sql}: {err}"));
        u64::try_from(counted.n).expect("a count")
    }
}

/// The kit's view of a store through PgBouncer, read through a
/// `ManualClock` (as `store-diesel/tests/common/harness.rs`, the direct
/// one).
pub struct PooledHarness {
    store: Arc<DieselStore>,
    clock: Arc<ManualClock>,
    db: CaseDb,
    lease_offset: LeaseClockOffset,
}

impl PooledHarness {
    /// A fresh migrated database and a store on it through PgBouncer with
    /// every pooled connection already open.
    pub async fn create() -> Self {
        let db = CaseDb::migrated().await;
        let clock = Arc::new(ManualClock::new());
        let lease_offset = LeaseClockOffset::following(clock.clone());
        let config = StoreConfig::default()
            .pool_size(CONNECTIONS)
            .clock(clock.clone())
            .lease_clock_offset(lease_offset.clone());
        let store = db.store(config).await;
        let opening: Vec<_> = (0..CONNECTIONS)
            .map(|_| store.reserve_connection())
            .collect();
        for held in futures_util::future::join_all(opening).await {
            drop(held.expect("open a pooled connection"));
        }
        Self {
            store: Arc::new(store),
            clock,
            db,
            lease_offset,
        }
    }
}

impl Harness for PooledHarness {
    type Store = DieselStore;

    fn store(&self) -> &Arc<DieselStore> {
        &self.store
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    async fn teardown(self) {
        drop(self.store);
        self.db.drop_database().await;
    }
}

flowstate_store_diesel::impl_kit_hooks!(PooledHarness, db);

impl LeaseHarness for PooledHarness {
    async fn advance_lease_clock(&self, by: std::time::Duration) {
        self.lease_offset.advance(by);
    }

    async fn skewed_store(&self, skew_micros: i64) -> Arc<DieselStore> {
        let clock = Arc::new(SkewedClock::new(self.clock.clone(), skew_micros));
        let config = StoreConfig::default()
            .pool_size(4)
            .clock(clock)
            .lease_clock_offset(self.lease_offset.clone());
        Arc::new(self.db.store(config).await)
    }
}

// The families and hooks `store-diesel/tests/postgres` stamps
// (`common::stamp::dialect_tests!`), every one.
flowstate_testkit::suite!(kit, crate::PooledHarness::create(), [all]);

/// Prints how many kit cases this binary runs through PgBouncer (every
/// case of every family, the hook cases included), and that PgBouncer
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kit_through_pgbouncer_counts_its_cases() {
    let started = Instant::now();
    let cases: usize = flowstate_testkit::CASES
        .iter()
        .map(|(_, cases)| cases.len())
        .sum();
    let db = CaseDb::migrated().await;
    let store = db.store(StoreConfig::default().pool_size(1)).await;
    drop(store);
    db.drop_database().await;
    shown(&format!(
        "kit through PgBouncer: {cases} cases of {} families (hook cases included), \
         none excluded; a database migrated and a store opened through it in {:?}",
        flowstate_testkit::CASES.len(),
        started.elapsed()
    ));
    assert!(cases > 0, "the kit lists its cases");
}
