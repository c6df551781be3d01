ALTER TABLE flowstate_events
    DROP INDEX flowstate_events_pending,
    ADD INDEX flowstate_events_pending (dispatched_at, dead_lettered_at, dispatch_after);
