-- Reverts 2026-12-01-000003_virtual_users: its tables (and their indexes),
-- children first.
DROP TABLE IF EXISTS flowstate_virtual_user_transcript;
DROP TABLE IF EXISTS flowstate_virtual_user_runs;
DROP TABLE IF EXISTS flowstate_virtual_user_schedules;
