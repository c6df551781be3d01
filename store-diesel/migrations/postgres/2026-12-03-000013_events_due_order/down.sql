DROP INDEX flowstate_events_pending_idx;
CREATE INDEX flowstate_events_pending_idx
    ON flowstate_events (dispatched_at, dead_lettered_at, dispatch_after);
