//! flowstate-faults: the fault suite flowstate owns. It proves from the
//! database, after real faults, that work is neither lost, nor done twice,
//! nor left stuck, on PostgreSQL, MariaDB and SQLite.
//!
//! It starts what it needs itself and never touches the machine's shared
//! servers beyond databases of its own:
//!
//! - [`ThrowawayPostgres`] and [`ThrowawayMariadb`]: servers in a temp
//!   directory on a free port, with small memory, a time bound on every
//!   start, and a crash (SIGKILL) and restart on demand; dropped, they stop
//!   and leave nothing behind;
//! - [`FaultProxy`]: an in-process TCP proxy between store and server that
//!   cuts every connection, stalls traffic, or refuses new connections;
//! - the [`ledger`]: a table written inside each step, whose key turns a
//!   second execution of an attempt into a recorded double.

pub mod ledger;
pub mod mariadb;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod sql;

pub use mariadb::ThrowawayMariadb;
pub use postgres::ThrowawayPostgres;
pub use proxy::FaultProxy;
