DROP INDEX flowstate_events_pending;
CREATE INDEX flowstate_events_pending
    ON flowstate_events (dispatched_at, dead_lettered_at, dispatch_after);
