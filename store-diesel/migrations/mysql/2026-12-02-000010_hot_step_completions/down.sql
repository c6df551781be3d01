ALTER TABLE flowstate_steps ADD INDEX flowstate_steps_run_status (run_id, status);
