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
-- JSON columns are LONGTEXT utf8mb4_bin without the json_valid CHECK
-- MariaDB would add (see migration 000015).
ALTER TABLE flowstate_virtual_user_runs
    ADD COLUMN goals LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN seed BIGINT NULL,
    ADD COLUMN started_by TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN tally_turns BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN tally_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN tally_cost BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN memory LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN intents LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN stop_reason VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL;
