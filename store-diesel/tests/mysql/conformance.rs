//! The conformance suite of `flowstate-testkit`, every case on a fresh
//! MySQL database.

use crate::support::MysqlHarness;

flowstate_testkit::conformance_suite!(suite, MysqlHarness::create());
