-- Run leases (see SCHEMA.md): who holds a run, until when on the database's
-- clock, the fencing token of the last claim, consecutive failures and the
-- last reason, a pending cancel request, and the wait of a sleeping run
-- (until when, on the same clock, and on which signal). Signals are rows of
-- their own, kept until the lease holder takes them.
--
-- The signals table first (IF NOT EXISTS), then one ALTER TABLE, which
-- InnoDB applies whole or not at all: a failed run of this file leaves
-- nothing half-done to trip over when it runs again.
-- MySQL has no partial index: the claim scans `flowstate_runs_status_created`
-- for the unsettled statuses, which a mostly-settled table keeps short.
CREATE TABLE IF NOT EXISTS flowstate_run_signals (
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name VARBINARY(255) NOT NULL,
    payload JSON NOT NULL,
    sent_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, name),
    CONSTRAINT flowstate_run_signals_run_fk FOREIGN KEY (run_id)
        REFERENCES flowstate_runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

-- The effect journal: one row per (run, effect key), begun by the call
-- whose `began_by` it holds, settled once `outcome` is set.
CREATE TABLE IF NOT EXISTS flowstate_effects (
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    effect_key VARBINARY(255) NOT NULL,
    began_by CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    outcome JSON NULL,
    began_at BIGINT NOT NULL,
    settled_at BIGINT NULL,
    PRIMARY KEY (run_id, effect_key),
    KEY flowstate_effects_stranded (settled_at, began_at),
    CONSTRAINT flowstate_effects_run_fk FOREIGN KEY (run_id)
        REFERENCES flowstate_runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE flowstate_runs
    ADD COLUMN lease_owner VARBINARY(255) NULL,
    ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at BIGINT NULL,
    ADD COLUMN failures BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN failure_reason LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN wake_at BIGINT NULL,
    ADD COLUMN waiting_on VARBINARY(255) NULL;
