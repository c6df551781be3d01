ALTER TABLE flowstate_step_history RESET (fillfactor);
