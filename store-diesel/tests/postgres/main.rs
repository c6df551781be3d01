//! The PostgreSQL dialect: everything every dialect runs, stamped by
//! `dialect_tests!` (the whole kit through `DieselStore`, the statement
//! budgets of the one table, the checks written once in `common`), and the
//! modules only this dialect has. Each test runs on a database of its own.

#![cfg(feature = "postgres")]

#[path = "../common/mod.rs"]
mod common;

mod explain;
mod explain_events;
mod healing;
mod hot_updates;
mod lease_plans;
mod migrations;
mod model;
mod pool;
mod pooler;
mod prepared;
mod races;
mod recovery_plans;
mod support;

common::stamp::dialect_tests!(Dialect::Postgres);
