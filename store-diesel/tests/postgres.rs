//! PostgreSQL: the conformance suite, the statement budgets, migrations,
//! bad input, the pool and the query plans, each test on a database of its
//! own on the server `FLOWSTATE_PG_URL` names (default
//! `postgres://postgres@127.0.0.1:5432`).

#![cfg(feature = "postgres")]

#[path = "postgres/bad_input.rs"]
mod bad_input;
#[path = "postgres/budgets.rs"]
mod budgets;
#[path = "postgres/conformance.rs"]
mod conformance;
#[path = "postgres/explain.rs"]
mod explain;
#[path = "postgres/migrations.rs"]
mod migrations;
#[path = "postgres/pool.rs"]
mod pool;
#[path = "postgres/prepared.rs"]
mod prepared;
#[path = "postgres/races.rs"]
mod races;
#[path = "shared/records.rs"]
mod records;
#[path = "postgres/support.rs"]
mod support;
