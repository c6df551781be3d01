//! The conformance suite, run against the in-memory reference backend.

use flowstate_testkit::MemoryHarness;

flowstate_testkit::conformance_suite!(memory, async { MemoryHarness::new() });
flowstate_testkit::events_suite!(memory_events, async { MemoryHarness::new() });
