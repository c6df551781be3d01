//! What every dialect's test crate shares: a database per test ([`db`]),
//! the conformance harness over [`DieselStore`](flowstate_store_diesel::DieselStore)
//! ([`harness`]), the statement budgets as tables ([`budgets`]) and the
//! checks of corrupt rows ([`corrupt`]), each written once.

#![allow(dead_code)]

pub mod budgets;
pub mod corrupt;
pub mod db;
pub mod harness;
pub mod lease_budgets;
pub mod records;
