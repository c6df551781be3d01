//! The MySQL dialect: everything every dialect runs, stamped by
//! `dialect_tests!` (the whole kit through `DieselStore`, the statement
//! budgets of the one table, the checks written once in `common`), and the
//! modules only this dialect has. Each test runs on a database of its own.

#![cfg(feature = "mysql")]

#[path = "../common/mod.rs"]
mod common;

mod claim_interleave;
mod explain;
mod explain_events;
mod healing;
mod lease_plans;
mod migrations;
mod model;
mod nodes;
mod pool;
mod prepared;
mod races;
mod support;

common::stamp::dialect_tests!(Dialect::Mysql);
