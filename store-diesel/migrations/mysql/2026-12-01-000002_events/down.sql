-- Reverts 2026-12-01-000002_events, children first.
DROP TABLE IF EXISTS flowstate_event_deliveries;
DROP TABLE IF EXISTS flowstate_events;
DROP TABLE IF EXISTS flowstate_activations;
DROP TABLE IF EXISTS flowstate_published_versions;
DROP TABLE IF EXISTS flowstate_workflows;
