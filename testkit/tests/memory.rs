//! The conformance suite, run against the in-memory reference backend.

use flowstate_testkit::MemoryHarness;

flowstate_testkit::conformance_suite!(memory, async { MemoryHarness::new() });

flowstate_testkit::lease_suite!(memory_leases, async { MemoryHarness::new() });
