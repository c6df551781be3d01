ALTER TABLE flowstate_steps RESET (fillfactor);
DROP INDEX flowstate_steps_claimable_function_idx;
DROP INDEX flowstate_steps_claimable_idx;
ALTER TABLE flowstate_steps DROP COLUMN claimable;
CREATE INDEX flowstate_steps_run_status_idx ON flowstate_steps (run_id, status);
CREATE INDEX flowstate_steps_claimable_idx ON flowstate_steps (created_at, id)
    WHERE status IN ('pending', 'failed');
CREATE INDEX flowstate_steps_claimable_function_idx ON flowstate_steps (function_name, created_at, id)
    WHERE status IN ('pending', 'failed');
