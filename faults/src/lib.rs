//! flowstate-faults: the fault suite flowstate owns. It proves from the
//! database, after real faults, that work is neither lost, nor done twice,
//! nor left stuck, on PostgreSQL, MariaDB and SQLite.
//!
//! It starts what it needs itself and never touches the machine's shared
//! servers beyond databases of its own:
//!
//! - [`ThrowawayPostgres`] and [`ThrowawayMariadb`] ([`Throwaway`] for
//!   either): servers in a temp directory on a free port, with small
//!   memory, a time bound on every start, and a crash (SIGKILL) and restart
//!   on demand; dropped, they stop and leave nothing behind;
//! - [`FaultProxy`]: an in-process TCP proxy between store and server that
//!   cuts every connection, stalls traffic, or refuses new connections;
//! - the [`ledger`]: a table written inside each step, whose key turns a
//!   second execution of an attempt into a recorded double;
//! - [`Verdict`]: lost, doubled, stuck and unexecuted steps, read with
//!   plain SQL after the run and one [`recovery`] pass;
//! - the load: [`load::Crew`] (in-process workers through the store, every
//!   step seeded with a short claim timeout), [`pool_load::PoolLoad`] (a
//!   `flowstate-pool` worker pool) and [`child::WorkerChild`] (the
//!   `fault-worker` binary, a process to SIGKILL or SIGSTOP mid-step);
//! - [`Scenario`]: the report row (scenario x dialect: load, fault, lost,
//!   doubled, stuck, wrong, time to heal), printed and written to
//!   `target/fault-report/` and `target/fault-report.md`, then asserted.
//!
//! The scenarios are the tests under `tests/faults/`, one per scenario and
//! dialect (`README.md` lists them). Each ends with one [`recovery`] pass
//! run past every claim's deadline, so a step whose claimer died or whose
//! claim's answer a fault swallowed is taken back and run again.
//!
//! It does not replace the conformance kit (`flowstate-testkit`): the kit
//! proves each port's guarantee on a healthy database; this suite breaks
//! the database, the network and the workers, and reads what is left.

pub mod child;
pub mod clock;
pub mod cluster;
pub mod ledger;
pub mod load;
pub mod mariadb;
pub mod pool_load;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod recovery;
pub mod report;
pub mod server;
pub mod shared;
pub mod sql;
pub mod verdict;

pub use mariadb::ThrowawayMariadb;
pub use postgres::ThrowawayPostgres;
pub use proxy::FaultProxy;
pub use report::{Heal, Scenario};
pub use server::Throwaway;
pub use shared::SharedDb;
pub use verdict::Verdict;
