//! The operator's commands: `runs`, `events`, `stats` and `prune`, for a
//! person looking at a store in production (a stuck run, a dead letter, a
//! queue that grows, tables that only grow) and for the scripts they
//! write.
//!
//! Each command is a thin call of `flowstate-core`'s ports on a
//! [`DieselStore`] opened from `--database-url` (else `$DATABASE_URL`, else
//! `target/flowstate.db`, the database `cargo xtask migrate` manages), so it
//! works on every dialect and sees exactly what the library sees: no SQL is
//! written here. What the ports cannot answer is said in the output (and
//! in the README) rather than read behind their back.
//!
//! One file per command group ([`runs`], [`events`], [`stats`],
//! [`prune`]), each with
//! its clap arguments and its `run`; [`format`](mod@format) holds what they share to
//! print: times, ages, durations and tables. Every command prints a few
//! lines a person reads at a glance, or with `--json` one JSON document
//! (timestamps as the library serializes them: microseconds since the Unix
//! epoch, UTC).

pub mod events;
pub mod format;
pub mod prune;
pub mod runs;
pub mod stats;

use std::path::Path;

use anyhow::{Context, Result, bail};
use flowstate_core::ports::{EventStore, RecoveryStore, RunRecoveryStore, RunStore, StepStore};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

use crate::backend;

/// Where a command looks, and how it answers: the flags every operator
/// command takes.
#[derive(Clone, Debug, clap::Args)]
pub struct Target {
    /// The database (else $DATABASE_URL, else target/flowstate.db):
    /// postgres://, mysql://, mariadb://, sqlite://path or a file path.
    #[arg(long, value_name = "URL", global = true)]
    pub database_url: Option<String>,
    /// Print one JSON document instead of the human summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The ports the operator commands call: a run's rows, its lease, the
/// recovery queries and events. [`DieselStore`] has them all; so does the
/// testkit's `MemoryStore`.
pub trait OpsStore: RunStore + StepStore + RunRecoveryStore + RecoveryStore + EventStore {}

impl<S: RunStore + StepStore + RunRecoveryStore + RecoveryStore + EventStore> OpsStore for S {}

/// An opened store and how to name it to a person.
pub struct Opened {
    /// The store.
    pub store: DieselStore,
    /// The URL with any password hidden.
    pub shown: String,
    /// Its dialect.
    pub dialect: Dialect,
}

impl Opened {
    /// `on sqlite target/flowstate.db`: the header line's tail.
    pub fn describe(&self) -> String {
        format!("{} {}", self.dialect.name(), self.shown)
    }
}

/// Opens the store `target` names without changing it: a missing SQLite
/// file is an error (opening would create an empty one), and a database
/// never migrated is the store's own `NotMigrated`, naming the fix.
pub async fn open(target: &Target) -> Result<Opened> {
    let url = target
        .database_url
        .clone()
        .unwrap_or_else(|| backend::default_url("flowstate.db"));
    let shown = backend::redact(&url);
    let parsed = backend::parse_url(&url)?;
    if parsed.dialect == Dialect::Sqlite && !Path::new(&parsed.target).exists() {
        bail!(
            "no database at {}: point --database-url (or $DATABASE_URL) at yours, \
             e.g. --database-url target/flowstate-demo.db after `cargo xtask demo`, \
             or create it with `cargo xtask migrate up`",
            parsed.target
        );
    }
    // Small: an operator's command makes a handful of reads one at a time.
    let config = StoreConfig::default().pool_size(2);
    let store = DieselStore::open(&url, config)
        .await
        .with_context(|| format!("cannot open the store at {shown}"))?;
    Ok(Opened {
        dialect: parsed.dialect,
        store,
        shown,
    })
}

/// Prints `json` (pretty) with `--json`, else the human text.
pub fn emit(target: &Target, human: &str, json: &serde_json::Value) -> Result<()> {
    if target.json {
        println!("{}", serde_json::to_string_pretty(json)?);
    } else {
        print!("{human}");
    }
    Ok(())
}
