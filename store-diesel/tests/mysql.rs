//! The MySQL/MariaDB dialect's tests: the conformance suite, the statement
//! budgets (counted exactly), migrations, bad input and byte-exact keys,
//! the pool and conflict retries. Each test runs on a database of its own
//! (`fst_<32 hex>`) on the server `FLOWSTATE_MYSQL_URL` names (default
//! `mysql://root@127.0.0.1:3306`); a server that cannot be reached fails
//! the tests, it does not skip them.
#![cfg(feature = "mysql")]

#[path = "mysql/bad_input.rs"]
mod bad_input;
#[path = "mysql/budgets.rs"]
mod budgets;
#[path = "mysql/conformance.rs"]
mod conformance;
#[path = "mysql/explain.rs"]
mod explain;
#[path = "mysql/migrations.rs"]
mod migrations;
#[path = "mysql/pool.rs"]
mod pool;
#[path = "mysql/races.rs"]
mod races;
#[path = "shared/records.rs"]
mod records;
#[path = "mysql/support.rs"]
mod support;
