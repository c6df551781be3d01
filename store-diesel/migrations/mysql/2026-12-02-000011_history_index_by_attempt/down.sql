ALTER TABLE flowstate_step_history ADD INDEX flowstate_step_history_step_created (step_id, created_at);
