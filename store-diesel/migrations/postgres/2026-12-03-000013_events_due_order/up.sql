-- The pending events' index in the order dispatchers take them.
--
-- A dispatcher takes the longest-due pending event: `ORDER BY
-- dispatch_after, occurred_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`
-- (`EventQueueStore::dispatch_next`). Ending at `dispatch_after`, the index
-- left every pending event to be read and sorted for each one taken. The
-- planner does not read `dispatched_at IS NULL` as fixing a leading column
-- (only `=` does), so no column list starting there gives the order: the
-- index is partial on the pending events instead, in the taking order, and
-- the scan stops at the first event no other dispatcher holds.
DROP INDEX flowstate_events_pending_idx;
CREATE INDEX flowstate_events_pending_idx
    ON flowstate_events (dispatch_after, occurred_at, id)
    WHERE dispatched_at IS NULL AND dead_lettered_at IS NULL;
