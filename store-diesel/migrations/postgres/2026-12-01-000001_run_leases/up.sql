-- Run leases (see store-diesel/SCHEMA.md): who holds a run, until when on
-- the database's clock, the fencing token of the last claim, consecutive
-- failures and the last reason, a pending cancel request, and the wait of
-- a sleeping run (until when, on the same clock, and on which signal).
-- Signals are rows of their own, kept until the lease holder takes them.
ALTER TABLE flowstate_runs
    ADD COLUMN lease_owner      TEXT COLLATE "C",
    ADD COLUMN lease_token      BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at BIGINT,
    ADD COLUMN failures         BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN failure_reason   TEXT,
    ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN wake_at          BIGINT,
    ADD COLUMN waiting_on       TEXT COLLATE "C";

CREATE TABLE flowstate_run_signals (
    run_id  TEXT COLLATE "C" NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    name    TEXT COLLATE "C" NOT NULL,
    payload JSONB NOT NULL,
    sent_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, name)
);

-- The claim's scans, oldest first: unsettled runs free of a cancel request,
-- and (few) unsettled runs with one. Settled runs, most of the table in
-- time, are in neither. The cancel term also keeps the runs listing off
-- them: its status filter alone does not imply their predicates, so it
-- keeps `flowstate_runs_status_created_idx`.
CREATE INDEX flowstate_runs_claimable_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested;
CREATE INDEX flowstate_runs_cancel_requested_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested;

-- The effect journal: one row per (run, effect key), begun by the call
-- whose `began_by` it holds, settled once `outcome` is set.
CREATE TABLE flowstate_effects (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    effect_key TEXT COLLATE "C" NOT NULL,
    began_by   TEXT COLLATE "C" NOT NULL,
    outcome    JSONB,
    began_at   BIGINT NOT NULL,
    settled_at BIGINT,
    PRIMARY KEY (run_id, effect_key)
);
-- Stranded effects, oldest first: only the unsettled ones.
CREATE INDEX flowstate_effects_stranded_idx ON flowstate_effects (began_at)
    WHERE settled_at IS NULL;
