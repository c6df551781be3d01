-- The pending events' index in the order dispatchers take them.
--
-- A dispatcher takes the longest-due pending event: `ORDER BY
-- dispatch_after, occurred_at, id LIMIT 1` (`EventQueueStore::
-- dispatch_next`). Ending at `dispatch_after`, the index left every pending
-- event to be read and sorted for each one taken. Partial on the pending
-- events and in the taking order (as on PostgreSQL), the scan stops at the
-- first.
DROP INDEX flowstate_events_pending;
CREATE INDEX flowstate_events_pending
    ON flowstate_events (dispatch_after, occurred_at, id)
    WHERE dispatched_at IS NULL AND dead_lettered_at IS NULL;
