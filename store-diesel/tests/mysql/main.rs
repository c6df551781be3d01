//! The MySQL dialect: the conformance suite through `DieselStore`, the
//! statement budgets, corrupt rows, and what only this dialect has. Each
//! test runs on a database of its own.

#![cfg(feature = "mysql")]

#[path = "../common/mod.rs"]
mod common;

mod budgets;
mod explain;
mod explain_events;
mod healing;
mod lease_plans;
mod migrations;
mod model;
mod pool;
mod races;
mod support;

use flowstate_store_diesel::Dialect;

flowstate_testkit::conformance_suite!(
    conformance,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

flowstate_testkit::batch_suite!(
    batch_conformance,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

flowstate_testkit::pool_suite!(
    pool_conformance,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_rows_are_typed_errors() {
    common::corrupt::corrupt_rows_are_typed_errors(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_refuses_a_schema_it_was_not_written_for() {
    common::schema_check::open_refuses_a_schema_it_was_not_written_for(Dialect::Mysql).await;
}
flowstate_testkit::virtual_users_suite!(
    virtual_users,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

flowstate_testkit::events_suite!(
    events,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

flowstate_testkit::event_queue_suite!(
    event_queue,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dispatch_keeps_the_event() {
    common::events_rollback::a_failed_dispatch_keeps_the_event(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_queued_dispatch_names_the_event() {
    common::events_rollback::a_failed_queued_dispatch_names_the_event(Dialect::Mysql).await;
}

flowstate_testkit::lease_suite!(
    leases,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

common::recovery::recovery_cases!(Dialect::Mysql);

flowstate_testkit::recovery_suite!(
    recovery,
    common::harness::DieselHarness::create(Dialect::Mysql)
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_many_chunks_moves_every_step() {
    common::large_batches::a_batch_over_many_chunks_moves_every_step(Dialect::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_refused_batch_moves_the_rest() {
    common::large_batches::a_partly_refused_batch_moves_the_rest(Dialect::Mysql).await;
}
