CREATE INDEX flowstate_steps_run_status ON flowstate_steps (run_id, status);
