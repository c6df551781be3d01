//! flowstate-store-diesel: the Diesel + diesel-async backend of flowstate,
//! for PostgreSQL, MySQL/MariaDB and embedded SQLite.
//!
//! [`DieselStore`] implements every store port of `flowstate-core`; open it
//! from a URL and apply the embedded migrations first:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
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
//! compiles no PostgreSQL or MySQL driver.
//!
//! What it guarantees, and how:
//! - Exclusion comes from the database only: a claim or a transition is one
//!   status-guarded `UPDATE` whose affected rows (or `RETURNING` row) decide;
//!   idempotent inserts ride on unique keys. There is no read-then-write and
//!   no in-process lock anywhere.
//! - Every hot operation sends a fixed, small number of statements, counted
//!   by the tests through [`StatementLog`].
//! - Ids are 36-character text, timestamps `BIGINT` microseconds since the
//!   epoch (UTC) on every dialect, so values round-trip exactly.

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
compile_error!("flowstate-store-diesel needs at least one of the features postgres, mysql, sqlite");

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod cached;
pub mod config;
pub mod error;
pub mod guard;
pub mod migrate;
pub mod pool;
pub mod rows;
pub mod statement_log;
pub mod store;
pub mod url;

#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use config::StoreConfig;
pub use error::{Error, Result};
pub use statement_log::StatementLog;
pub use store::DieselStore;
pub use url::{DatabaseUrl, Dialect};
