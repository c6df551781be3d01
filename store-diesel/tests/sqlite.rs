//! The SQLite dialect's tests: the conformance suite, the statement budgets
//! (counted exactly), migrations, bad input, the pool, concurrency on one
//! file, and what a second connection and a second process see. Each test
//! runs on a database file of its own under the temp dir.
//!
//! (The doc comes before the `cfg`: a crate cfg'd out keeps no attribute
//! after its `cfg`, and `missing_docs` would then fire for the empty crate.)
#![cfg(feature = "sqlite")]

#[path = "sqlite/support.rs"]
mod support;

#[path = "shared/records.rs"]
mod records;

#[path = "sqlite/budgets.rs"]
mod budgets;

#[path = "sqlite/bad_input.rs"]
mod bad_input;

#[path = "sqlite/concurrency.rs"]
mod concurrency;

#[path = "sqlite/migrations.rs"]
mod migrations;

#[path = "sqlite/pool.rs"]
mod pool;

#[path = "sqlite/harness.rs"]
mod harness;

use harness::SqliteHarness;

flowstate_testkit::conformance_suite!(conformance, SqliteHarness::create());

#[path = "sqlite/plans.rs"]
mod plans;
