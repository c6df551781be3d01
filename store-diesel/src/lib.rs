//! flowstate-store-diesel: the Diesel + diesel-async backend of flowstate,
//! for PostgreSQL, MySQL/MariaDB and embedded SQLite.
//!
//! [`DieselStore`] implements every store port of `flowstate-core`; open it
//! from a URL and apply the embedded migrations first:
//!
//! ```no_run
//! # async fn demo() -> flowstate_core::Result<()> {
//! use flowstate_core::ports::{RunStore, StepStore};
//! use flowstate_core::{NewRun, NewStep};
//! use flowstate_store_diesel::{DieselStore, StoreConfig};
//!
//! let store = DieselStore::open_migrated("sqlite://target/flowstate.db", StoreConfig::default()).await?;
//! let run = store.create_run(NewRun::new("checkout", serde_json::json!({"cart": 7}))).await?.record;
//! store.insert_step(NewStep::new(run.id, "charge", "payments.charge", serde_json::json!({}))).await?;
//! if let Some(step) = store.claim_step(run.id, "charge", "payments.charge").await? {
//!     // this worker, and no other, runs attempt `step.attempt` of "charge"
//! }
//! # Ok(()) }
//! ```
//!
//! Each dialect is a module behind a feature of the same name (`postgres`,
//! `mysql`, `sqlite`; all on by default): a build with only `sqlite`
//! compiles no PostgreSQL or MySQL driver. The feature `test-support` (off
//! by default; the crate's own tests, the bench and the fault harness turn
//! it on) adds the plumbing of tests and benches: `StatementLog` and
//! `LeaseClockOffset` (with their `StoreConfig` fields and setters),
//! `StoreConfig::without_schema_check`, `DieselStore::batch_execute`
//! and `reserve_connection`, and the module `test_support` (the kit's SQL
//! hooks per dialect, `kit_hooks`, shared by every harness that runs the
//! kit on a real server).
//!
//! What it guarantees, and how:
//! - Exclusion comes from the database only: a claim or a transition is one
//!   status-guarded `UPDATE` whose affected rows (or `RETURNING` row) decide;
//!   idempotent inserts ride on unique keys. There is no read-then-write and
//!   no in-process lock anywhere.
//! - Every hot operation sends a fixed, small number of statements, counted
//!   by the tests through `StatementLog` (feature `test-support`); a batch
//!   ([`BatchStepStore`](flowstate_core::ports::BatchStepStore)) sends the same
//!   number however many steps it carries (up to 500 steps a statement on
//!   MySQL and SQLite, which bind no arrays and list the steps instead).
//! - Ids are 36-character text, timestamps `BIGINT` microseconds since the
//!   epoch (UTC) on every dialect, so values round-trip exactly.
//! - Events ([`flowstate_core::ports::EventStore`], with the definitions of
//!   [`flowstate_core::ports::DefinitionStore`]): an emit is one transaction that
//!   records the event once per dedupe key (a unique key decides), pins its
//!   deliveries and, with `Dispatch::Now`, creates their runs with
//!   `create_run`'s own insert; a deferred dispatch locks the event
//!   (`FOR UPDATE SKIP LOCKED`; SQLite's `BEGIN IMMEDIATE`) so each
//!   delivery gets exactly one run.
//! - Run leases ([`RunLeaseStore`](flowstate_core::ports::RunLeaseStore)) expire on
//!   the database's clock, read in the SQL of every lease statement, never
//!   on the clock of the worker that sends it (`lease_clock.rs`): workers on
//!   machines whose clocks disagree still never hold one run at once. The
//!   claim is `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)`
//!   on PostgreSQL (one statement) and MySQL (a transaction), one
//!   `BEGIN IMMEDIATE` write on SQLite.
//! - MariaDB Galera (every node takes writes): a MySQL URL may list
//!   several nodes, and connections go only to nodes that are `Synced`
//!   (`mysql/nodes.rs`); each session sets `wsrep_sync_wait`
//!   ([`StoreConfig::galera_sync_wait`]) so the store reads its own writes
//!   made through another node; every multi-statement claim decides by its
//!   guarded `UPDATE`'s matched rows and a read-back of its own write, so
//!   an abort between statements (a row lock is local to a node) runs it
//!   again instead of handing a lease out twice; picks start at different
//!   rows per node and at random on a retry (`mysql/spread.rs`).
//! - Recovery ([`RecoveryStore`](flowstate_core::ports::RecoveryStore),
//!   [`RunRecoveryStore`](flowstate_core::ports::RunRecoveryStore)): the relay's
//!   and the stalled sweep's queries each walk an index of unsettled rows;
//!   `lease_run` is one status-guarded `UPDATE ... RETURNING` (a locked
//!   read, the `UPDATE` and a read-back in one transaction on MySQL); the
//!   reaper locks what it frees (`FOR UPDATE SKIP LOCKED`; SQLite's write
//!   lock), so two reapers never answer one run.
//!
//! How it is built: one schema (`schema.rs`, with a `Json` SQL type that
//! hides the dialects' one difference), one set of row structs, and every
//! cold-path query (reads, deletes, counts, listings, upserts, run status
//! moves) written once in the diesel DSL and compiled for each dialect.
//! Hand-written SQL is left only where the DSL cannot say the statement in
//! the same round trips, built from one scaffold of shared fragments
//! (`sql/`) and prepared once per connection:
//!
//! | statement | dialect | why not the DSL |
//! | --- | --- | --- |
//! | claim, transition, retry, insert_step | PostgreSQL | one CTE each (`UPDATE`/`INSERT ... RETURNING` inside `WITH`, history upsert, diagnosis): diesel has no writable CTEs, so each would be 2-3 round trips against a budget of 1 |
//! | claim `UPDATE` | MySQL, SQLite | `CASE`s that read the old status before `status` is assigned (MySQL's left-to-right `SET`); SQLite's adds `RETURNING *`; MySQL's stamps `move_history_id`, from which a trigger (migration `2026-12-06-000019_move_history`, fired the same way by every per-step move's `UPDATE`) writes the history row inside the same statement, as MySQL has no `RETURNING` or writable CTE to carry it |
//! | run claim | PostgreSQL, SQLite | PostgreSQL's is one statement (a writable CTE settling cancelled runs, then `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING *`); SQLite's names its partial index with `INDEXED BY`, which the DSL cannot say |
//! | history upserts | all | `INSERT ... SELECT` from the step row just written, `ON CONFLICT DO UPDATE` / `ON DUPLICATE KEY UPDATE`: no insert-from-select upsert in the DSL on every dialect |
//! | guarded step `UPDATE`s | MySQL, SQLite | built from core's tables in the same scaffold as the history upsert they pair with, so guard and history cannot drift apart |
//! | batch claim (`claim_batch`) | all | `FOR UPDATE SKIP LOCKED` in a writable CTE (PostgreSQL, one statement, in a transaction that first turns bitmap scans off so the pick walks its index in order) or a locking pick (MySQL), the claim's `CASE`s, and history ids zipped to the claimed rows (`row_number()` over an array, or a `CASE` per id) |
//! | batch completions (`complete_batch`) | all | `unnest`ed arrays joined into a guarded `UPDATE ... FROM` with its history upsert (PostgreSQL, one statement); a `CASE` per step for its payload over an `IN` list, then the history upsert of the listed steps (MySQL, SQLite; `src/sql/in_list.rs`) |
//! | expired-lease reap (`reap_expired_leases`) | PostgreSQL | `WITH expired AS (SELECT ... FOR UPDATE SKIP LOCKED) UPDATE ... FROM expired RETURNING`: the answer's order is the expiry the `UPDATE` clears, and diesel has neither `UPDATE ... FROM` nor `WITH`; MySQL and SQLite pick and free in one typed transaction |
//!
//! Every difference between the dialects crosses one seam, the
//! crate-private traits of `dialect.rs` (`Dialect`: each hot operation a
//! dialect owes; `Connection`: what its connection spells its own way in
//! the shared typed queries), implemented in `postgres/`, `mysql/` and
//! `sqlite/`, which list the same files; `backend.rs` dispatches to the
//! dialect a store speaks (a stand-in for diesel's `MultiConnection`).
//! The measured choices behind the SQL are in `SCHEMA.md`, Decisions.
//!
//! diesel's `i-implement-a-third-party-backend-and-opt-into-breaking-changes`
//! feature is not used.

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
compile_error!("flowstate-store-diesel needs at least one of the features postgres, mysql, sqlite");

mod backend;
mod cached;
mod config;
mod conflict;
mod database;
mod dialect;
pub mod error;
mod guard;
mod health;
mod lease_clock;
pub mod migrate;
mod open_error;
mod pool;
mod ports;
mod rows;
mod schema;
mod sql;
#[cfg(feature = "test-support")]
mod statement_log;
mod store;
#[cfg(feature = "test-support")]
pub mod test_support;
mod url;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use config::{DEFAULT_GALERA_SYNC_WAIT, StoreConfig};
pub use database::Dialect;
pub use open_error::{Error, Result};
pub use store::DieselStore;
pub use url::DatabaseUrl;

#[cfg(feature = "test-support")]
pub use conflict::not_ready_retries;
#[cfg(feature = "test-support")]
pub use conflict::retries as conflict_retries;
#[cfg(feature = "test-support")]
pub use lease_clock::LeaseClockOffset;
#[cfg(all(feature = "test-support", feature = "mysql"))]
pub use mysql::interleave as mysql_claim_interleave;
#[cfg(feature = "test-support")]
pub use statement_log::{LogInstrumentation, StatementLog};
#[cfg(feature = "test-support")]
pub use store::ReservedConnection;
