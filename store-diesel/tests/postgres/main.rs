//! The PostgreSQL dialect: the conformance suite through `DieselStore`, the
//! statement budgets, corrupt rows, and what only this dialect has. Each
//! test runs on a database of its own.

#![cfg(feature = "postgres")]

#[path = "../common/mod.rs"]
mod common;

mod budgets;
mod explain;
mod lease_plans;
mod migrations;
mod pool;
mod prepared;
mod races;
mod support;

use flowstate_store_diesel::Dialect;

flowstate_testkit::conformance_suite!(
    conformance,
    common::harness::DieselHarness::create(Dialect::Postgres)
);

flowstate_testkit::lease_suite!(
    leases,
    common::harness::DieselHarness::create(Dialect::Postgres)
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_rows_are_typed_errors() {
    common::corrupt::corrupt_rows_are_typed_errors(Dialect::Postgres).await;
}
