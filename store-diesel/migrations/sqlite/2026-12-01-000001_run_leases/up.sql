-- Run leases (see SCHEMA.md): who holds a run, until when on the clock of
-- the process that embeds SQLite, the fencing token of the last claim,
-- consecutive failures and the last reason, and a pending cancel request
-- (0 or 1: the table is STRICT, which has no BOOLEAN), and the wait of a
-- sleeping run (until when, on the same clock, and on which signal).
-- Signals are rows of their own, kept until the lease holder takes them.
ALTER TABLE flowstate_runs ADD COLUMN lease_owner TEXT;
ALTER TABLE flowstate_runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_runs ADD COLUMN lease_expires_at INTEGER;
ALTER TABLE flowstate_runs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_runs ADD COLUMN failure_reason TEXT;
ALTER TABLE flowstate_runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_runs ADD COLUMN wake_at INTEGER;
ALTER TABLE flowstate_runs ADD COLUMN waiting_on TEXT;

CREATE TABLE flowstate_run_signals (
    run_id  TEXT    NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    name    TEXT    NOT NULL,
    payload TEXT    NOT NULL CHECK (json_valid(payload)),
    sent_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, name)
) STRICT;

-- The claim's scans, oldest first: unsettled runs free of a cancel request,
-- and (few) unsettled runs with one. Settled runs, most of the table in
-- time, are in neither. The cancel term also keeps the runs listing off
-- them: its status filter alone does not imply their predicates, so it
-- keeps `flowstate_runs_status_created_idx`.
CREATE INDEX flowstate_runs_claimable_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 0;
CREATE INDEX flowstate_runs_cancel_requested_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 1;

-- The effect journal: one row per (run, effect key), begun by the call
-- whose `began_by` it holds, settled once `outcome` is set.
CREATE TABLE flowstate_effects (
    run_id     TEXT    NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    effect_key TEXT    NOT NULL,
    began_by   TEXT    NOT NULL,
    outcome    TEXT    CHECK (outcome IS NULL OR json_valid(outcome)),
    began_at   INTEGER NOT NULL,
    settled_at INTEGER,
    PRIMARY KEY (run_id, effect_key)
) STRICT;
-- Stranded effects, oldest first: only the unsettled ones.
CREATE INDEX flowstate_effects_stranded_idx ON flowstate_effects (began_at)
    WHERE settled_at IS NULL;
