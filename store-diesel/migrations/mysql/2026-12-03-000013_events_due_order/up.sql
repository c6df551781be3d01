-- The pending events' index in the order dispatchers take them.
--
-- A dispatcher takes the longest-due pending event: `ORDER BY
-- dispatch_after, occurred_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`
-- (`EventQueueStore::dispatch_next`). Ending at `dispatch_after`, the index
-- left every pending event to be read and sorted for each one taken, and
-- InnoDB locks every row it reads for the sort: one dispatcher would hold
-- them all. With `occurred_at, id` after it, the scan is in the taking
-- order and locks only the event it takes.
ALTER TABLE flowstate_events
    DROP INDEX flowstate_events_pending,
    ADD INDEX flowstate_events_pending (dispatched_at, dead_lettered_at, dispatch_after, occurred_at, id);
