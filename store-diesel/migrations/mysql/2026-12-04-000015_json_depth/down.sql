-- Back to MariaDB's `JSON` alias, which brings back its json_valid check:
-- this fails (and changes nothing in that table) if a stored value nests 32
-- levels or more. MySQL 8 never left native JSON: each statement is a no-op.

ALTER TABLE flowstate_runs
    /*M! MODIFY input JSON NOT NULL */;

ALTER TABLE flowstate_run_state
    /*M! MODIFY value JSON NOT NULL */;

ALTER TABLE flowstate_steps
    /*M! MODIFY input JSON NOT NULL,
        MODIFY result JSON NULL,
        MODIFY error JSON NULL */;

ALTER TABLE flowstate_step_history
    /*M! MODIFY result JSON NULL,
        MODIFY error JSON NULL */;

ALTER TABLE flowstate_workflow_versions
    /*M! MODIFY graph JSON NOT NULL */;

ALTER TABLE flowstate_run_signals
    /*M! MODIFY payload JSON NOT NULL */;

ALTER TABLE flowstate_effects
    /*M! MODIFY outcome JSON NULL */;

ALTER TABLE flowstate_published_versions
    /*M! MODIFY definition JSON NOT NULL */;

ALTER TABLE flowstate_activations
    /*M! MODIFY authorization_snapshot JSON NOT NULL */;

ALTER TABLE flowstate_events
    /*M! MODIFY data JSON NOT NULL,
        MODIFY context JSON NOT NULL,
        MODIFY authorization_snapshot JSON NOT NULL */;

ALTER TABLE flowstate_event_deliveries
    /*M! MODIFY authorization_snapshot JSON NOT NULL */;

ALTER TABLE flowstate_virtual_user_runs
    /*M! MODIFY findings JSON NULL */;

ALTER TABLE flowstate_virtual_user_transcript
    /*M! MODIFY entry JSON NOT NULL */;
