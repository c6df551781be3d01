//! The SQLite dialect: everything every dialect runs, stamped by
//! `dialect_tests!` (the whole kit through `DieselStore`, the statement
//! budgets of the one table, the checks written once in `common`), and the
//! modules only this dialect has. Each test runs on a database of its own.

#![cfg(feature = "sqlite")]

#[path = "../common/mod.rs"]
mod common;

mod concurrency;
mod healing;
mod migrations;
mod model;
mod plans;
mod plans_events;
mod pool;
mod support;

common::stamp::dialect_tests!(Dialect::Sqlite);
