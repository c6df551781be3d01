//! What every dialect's test crate shares: a database per test ([`db`]),
//! the conformance harness over [`DieselStore`](flowstate_store_diesel::DieselStore)
//! ([`harness`]), the statement budgets as tables ([`budgets`]) and the
//! checks of corrupt rows ([`corrupt`]) and of opening a store on the wrong
//! schema ([`schema_check`]), each written once.

#![allow(dead_code)]

pub mod budgets;
pub mod corrupt;
pub mod db;
pub mod events_rollback;
pub mod harness;
pub mod healing;
pub mod large_batches;
pub mod lease_round;
pub mod migrators;
pub mod model;
pub mod records;
pub mod recovery;
pub mod reopen;
pub mod schema_check;
pub mod stamp;
pub mod wake_race;
