//! Plumbing of tests kept in one place for every crate that tests a
//! [`DieselStore`](crate::DieselStore) (feature `test-support`): the
//! conformance kit's hooks, written once for this crate's own harness and
//! for the fault harness's harnesses through a pooler and on a cluster.

pub mod kit_hooks;
