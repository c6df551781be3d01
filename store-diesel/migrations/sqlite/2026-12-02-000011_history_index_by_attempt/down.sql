CREATE INDEX flowstate_step_history_step_created ON flowstate_step_history (step_id, created_at);
