-- What a virtual-user run keeps beside its status (issue 30): the goals it
-- set out with (a JSON array of strings, NULL for none), the seed of its
-- randomness (a u64 stored as the BIGINT of the same 64 bits, NULL for
-- none), who or what started it, its tally (typed counters, only ever
-- raised in place by `add_to_tally`: `tally_turns = tally_turns + ?`), its
-- memory (a JSON document of the persona's shape) and intents (a JSON
-- array of strings), both overwritten as it goes, and why it stopped (a
-- `StopReason` as text, written by the complete or fail that settles it).
-- Every column is nullable or defaults to 0, so every run already stored
-- stays valid and reads as before: no goals, seed, starter, memory,
-- intents or stop reason, a zero tally.
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN goals TEXT CHECK (json_valid(goals));
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN seed INTEGER;
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN started_by TEXT;
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN tally_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN tally_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN tally_cost INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN memory TEXT CHECK (json_valid(memory));
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN intents TEXT CHECK (json_valid(intents));
ALTER TABLE flowstate_virtual_user_runs ADD COLUMN stop_reason TEXT;
