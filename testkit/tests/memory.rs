//! The conformance suite, run against the in-memory reference backend.

use flowstate_testkit::MemoryHarness;

flowstate_testkit::conformance_suite!(memory, async { MemoryHarness::new() });

flowstate_testkit::batch_suite!(memory_batch, async { MemoryHarness::new() });
flowstate_testkit::virtual_users_suite!(memory_virtual_users, async { MemoryHarness::new() });
flowstate_testkit::events_suite!(memory_events, async { MemoryHarness::new() });
flowstate_testkit::lease_suite!(memory_leases, async { MemoryHarness::new() });
flowstate_testkit::recovery_suite!(memory_recovery, async { MemoryHarness::new() });
