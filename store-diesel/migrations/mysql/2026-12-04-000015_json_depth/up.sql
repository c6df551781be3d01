-- JSON depth (SCHEMA.md): MariaDB's `JSON` is LONGTEXT with an automatic
-- CHECK (json_valid(col)), and json_valid refuses 32 levels of nesting and
-- more, under core's limit of 64. The check is part of the column's
-- definition (MariaDB 10.11 answers "Can't DROP CONSTRAINT" to
-- `DROP CONSTRAINT col`), so each JSON column is redefined as the same
-- LONGTEXT without it, NULL or NOT NULL as before. core checks the depth
-- (and serde_json the text) before every write, and a row that does not
-- decode is a typed Corrupt on read.
--
-- Only MariaDB runs the `/*M! ... */` parts: on MySQL 8 each statement is
-- an empty ALTER TABLE, a no-op, and the columns stay native JSON, whose
-- limit of 100 levels is above core's 64.
--
-- MODIFY copies each table (MariaDB offers no INSTANT or NOCOPY for it):
-- one ALTER per table, so each is copied once.

ALTER TABLE flowstate_runs
    /*M! MODIFY input LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_run_state
    /*M! MODIFY value LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_steps
    /*M! MODIFY input LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        MODIFY result LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        MODIFY error LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL */;

ALTER TABLE flowstate_step_history
    /*M! MODIFY result LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        MODIFY error LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL */;

ALTER TABLE flowstate_workflow_versions
    /*M! MODIFY graph LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_run_signals
    /*M! MODIFY payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_effects
    /*M! MODIFY outcome LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL */;

ALTER TABLE flowstate_published_versions
    /*M! MODIFY definition LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_activations
    /*M! MODIFY authorization_snapshot LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_events
    /*M! MODIFY data LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        MODIFY context LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        MODIFY authorization_snapshot LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_event_deliveries
    /*M! MODIFY authorization_snapshot LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;

ALTER TABLE flowstate_virtual_user_runs
    /*M! MODIFY findings LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL */;

ALTER TABLE flowstate_virtual_user_transcript
    /*M! MODIFY entry LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL */;
